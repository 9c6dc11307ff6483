"""Notebook 10's Tune over Ray Train (Ray Train v2's way: each trial the driver of a TorchTrainer): every trial runs
its trainer to the end on the course's two-node cluster, and Tune gets the trainer's reports. The notebook runs it
only with 4 CPUs or more, on its two-node cluster; here one node that counts 4 CPUs whatever the machine has
(Ray's CPUs are a count it schedules by) runs both trials at once: the same Tune and Ray Train path, without the
second node's start-up, in half the time of one trial after the other on 2 CPUs."""
import pytest

from conftest import launched_children as _children
from helpers.core.procs import session_processes
from helpers.launching import ray_cluster as RC
from helpers.resilience.ray_runs import tune_ray_train

pytest.importorskip("ray.train")


def test_tune_runs_one_ray_train_run_per_trial_and_gets_each_runs_reports(tmp_path):
    cluster = RC.init_ray(num_cpus=4, nodes=1)
    session = RC._SESSION[0]
    try:
        grid = tune_ray_train([1e-3, 3e-2], epochs=1, storage=str(tmp_path), workers=1, cpus=cluster["cpus"])
    finally:
        RC.shutdown_ray()
    assert not grid.errors and sorted(r.config["lr"] for r in grid) == [1e-3, 3e-2]
    for r in grid:
        assert r.metrics["epoch"] == 0 and 0.0 <= r.metrics["val_acc"] <= 1.0   # the trainer's last report
        assert (tmp_path / f"lr={r.config['lr']:g}").is_dir()   # each trial's own Ray Train run folder
    accs = {r.config["lr"]: r.metrics["val_acc"] for r in grid}
    assert grid.get_best_result().config["lr"] == max(accs, key=accs.get)
    assert not session_processes(session) and not _children()
