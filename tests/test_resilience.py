"""Notebook 10's instruments, on made-up inputs whose answers are known (helpers.resilience).

What the notebook's runs show (a resumed, a preempted and a restarted run equal the uninterrupted one, Ray Train
restarting a killed worker, DCP resharding 2 -> 1 and 2 -> 4, the hang diagnostics, no process left) is asserted by
notebook 10's own cells, which the suite executes (nbval); Tune over Ray Train, which the notebook runs only on
4 CPUs or more, is tested in test_resilience_ray.py.
"""
import json

import pytest

from helpers.resilience.hangs import what_it_said
from helpers.resilience.instruments import announcements, recovery, ray_registered_epochs
from helpers.resilience.ray_runs import tune_ray_train


def _starts(folder, rows):
    (folder / "starts.log").write_text("".join(f"{r} {e} {p} {t!r}\n" for r, e, p, t in rows))
    return announcements(str(folder))


def test_recovery_measures_the_restart_and_the_redone_work_from_the_epoch_starts(tmp_path):
    # rank 1: epochs 0 and 1 start at 10.0 and 10.5, killed at 10.6, epoch 1 starts again at 14.0 in a new process
    starts = _starts(tmp_path, [(1, 0, 7, 10.0), (0, 0, 6, 10.0), (1, 1, 7, 10.5), (1, 1, 9, 14.0), (1, 2, 9, 14.4)])
    r = recovery(starts, kill_at=10.6, rank=1)
    assert r["rank"] == 1 and r["resumed_epoch"] == 1 and r["killed_epoch"] == 1
    assert r["recovery_s"] == pytest.approx(3.4) and r["redone_s"] == pytest.approx(0.1)
    assert r["lost_s"] == pytest.approx(3.5) and r["kill_s"] == pytest.approx(0.6)
    assert [e for e, _ in r["started_s"]] == [0, 1, 1, 2]


def test_a_restart_from_the_start_resumes_at_epoch_zero(tmp_path):
    starts = _starts(tmp_path, [(0, 0, 5, 1.0), (0, 1, 5, 2.0), (0, 0, 8, 6.0)])
    r = recovery(starts, kill_at=2.5, rank=0)
    assert r["resumed_epoch"] == 0 and r["redone_s"] == pytest.approx(1.5)   # everything since the start
    assert r["killed_epoch"] == 1   # it died in epoch 1, and the restart began again at 0
    with pytest.raises(ValueError, match="no epoch start both before the failure and after it"):
        recovery(starts, kill_at=0.5, rank=0)   # killed before it started anything


def test_registered_epochs_come_from_the_controllers_snapshot_and_a_missing_or_partial_one_is_none(tmp_path):
    assert ray_registered_epochs(str(tmp_path)) == []
    (tmp_path / "checkpoint_manager_snapshot.json").write_text('{"checkpoint_results": [')   # being written
    assert ray_registered_epochs(str(tmp_path)) == []
    snap = {"checkpoint_results": [{"metrics": {"epoch": 1}}, {"metrics": {"epoch": 0}}, {"metrics": {}}]}
    (tmp_path / "checkpoint_manager_snapshot.json").write_text(json.dumps(snap))
    assert ray_registered_epochs(str(tmp_path)) == [0, 1]


def test_what_it_said_keeps_each_culprit_once():
    detail = ("Detected mismatch between collectives on ranks. Rank 0 is running collective: "
              "CollectiveFingerPrint(SequenceNumber=1, OpType=ALLREDUCE, TensorShape=[1]), but Rank 1 is running "
              "collective: CollectiveFingerPrint(SequenceNumber=1, OpType=BROADCAST, TensorShape=[1])")
    said = what_it_said(detail + "\n" + detail)   # every rank's error repeats it
    assert said == ["rank 0: ALLREDUCE (sequence number 1 in the group)",
                    "rank 1: BROADCAST (sequence number 1 in the group)"]
    assert what_it_said("x Ranks 1, 3 failed to pass monitoredBarrier in 2000 ms y") == [
        "Ranks 1, 3 failed to pass monitoredBarrier in 2000 ms"]
    assert what_it_said("Connection reset by peer") == []


@pytest.mark.parametrize("workers, cpus", [(1, 1), (3, 3)])
def test_a_sweep_too_large_for_the_cluster_is_refused_before_ray_starts(workers, cpus):
    with pytest.raises(ValueError, match=f"needs {workers + 1} CPUs"):
        tune_ray_train([1e-3], epochs=1, storage="/nonexistent", workers=workers, cpus=cpus)
