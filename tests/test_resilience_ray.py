"""Notebook 10's Ray Train runs: the course's training as a TorchTrainer equals the launcher's, and a worker
killed mid-epoch is restarted from the last checkpoint (FailureConfig) to the same parameters."""
import signal

import pytest

from conftest import launched_children as _children
from helpers.core.measure import max_abs_diff
from helpers.core.procs import session_processes
from helpers.launching import launch
from helpers.launching import ray_cluster as RC
from helpers.resilience.instruments import announcements, kill_when, ray_registered_epochs, recovery
from helpers.resilience.ray_runs import run_ray_train
from helpers.resilience.recipe import resumable_worker

pytest.importorskip("ray.train")


def test_ray_train_equals_the_launcher_and_a_killed_worker_resumes_from_the_last_checkpoint(tmp_path):
    """One Ray Train run of 3 epochs, rank 1 killed once epoch 0's checkpoint is registered: it resumes from a
    checkpoint (not epoch 0) and ends equal to the course's launcher running the same training uninterrupted."""
    whole3 = launch(resumable_worker, 2, args=(3, None), verbose=False, timeout=120)[0]["params"]
    RC.init_ray(nodes=2)
    session = RC._SESSION[0]
    try:
        folder = tmp_path / "killed"
        folder.mkdir()
        run_dir = tmp_path / "ray" / "killed"
        killer = kill_when(str(folder), rank=1, epoch=1, sig=signal.SIGKILL, delay=0.0,   # once epoch 0 is registered
                           ready=lambda: 0 in ray_registered_epochs(str(run_dir)))
        killed = run_ray_train(3, storage=str(tmp_path / "ray"), name="killed", max_failures=1,
                               announce_dir=str(folder))
        killer["thread"].join(5)
        assert "pid" in killer, killer
        starts = announcements(str(folder))
        again = recovery(starts, killer["at"], rank=1)
        assert again["resumed_epoch"] >= 1, starts   # from a checkpoint, not from the start
        assert [(a["rank"], a["epoch"]) for a in starts].count((1, 0)) == 1, starts
        assert killed["next_epoch"] == 3 and max_abs_diff(killed["params"], whole3) < 1e-6
    finally:
        RC.shutdown_ray()
    assert not session_processes(session) and not _children()
