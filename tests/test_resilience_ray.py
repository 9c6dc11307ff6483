"""Notebook 10's Ray Train runs: the course's training as a TorchTrainer equals the launcher's, and a worker
killed mid-epoch is restarted from the last checkpoint (FailureConfig) to the same parameters."""
import signal

import pytest

from conftest import launched_children as _children
from helpers.core.measure import max_abs_diff
from helpers.core.procs import session_processes
from helpers.launching import launch
from helpers.launching import ray_cluster as RC
from helpers.resilience.instruments import announcements, kill_when
from helpers.resilience.ray_runs import run_ray_train
from helpers.resilience.recipe import resumable_worker

pytest.importorskip("ray.train")


def test_ray_train_equals_the_launcher_and_a_killed_worker_resumes_from_the_last_checkpoint(tmp_path):
    whole = launch(resumable_worker, 2, args=(2, None), verbose=False, timeout=120)[0]["params"]
    RC.init_ray(nodes=2)
    session = RC._SESSION[0]
    try:
        plain = run_ray_train(2, storage=str(tmp_path / "ray"), name="plain")
        assert plain["next_epoch"] == 2 and max_abs_diff(plain["params"], whole) < 1e-6
        folder = tmp_path / "killed"
        folder.mkdir()
        killer = kill_when(str(folder), rank=1, epoch=1, sig=signal.SIGKILL, delay=0.05)
        killed = run_ray_train(2, storage=str(tmp_path / "ray"), name="killed", max_failures=1,
                               announce_dir=str(folder))
        killer["thread"].join(5)
        assert "pid" in killer, killer
        starts = [(a["rank"], a["epoch"]) for a in announcements(str(folder))]
        assert starts.count((1, 1)) == 2 and starts.count((1, 0)) == 1, starts   # epoch 1 again, epoch 0 not
        assert killed["next_epoch"] == 2 and max_abs_diff(killed["params"], whole) < 1e-6
    finally:
        RC.shutdown_ray()
    assert not session_processes(session) and not _children()
