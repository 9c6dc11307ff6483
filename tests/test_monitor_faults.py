"""The Monitor (05) under faults: nothing the student made is deleted, and two Monitors never share a folder (issue
21). Each test failed on the code before the fix it checks.

Timing-dependent steps wait for events (a line printed, a process gone, a file complete) with a deadline."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from helpers import monitor as MO
from helpers.core import files as F

from monitor_kernels import _kernel, _line
from monitor_kernels import _stop_wandb_service  # noqa: F401  (autouse: wandb-core stops after this module)


def _tb_values(run: Path, tag: str = "a") -> list[tuple[int, float]]:
    return MO.read_back(run)["runs"]["tensorboard"]["scalars"][tag]


# --- (a) nothing the student made is deleted ------------------------------------------------------------------

_HOLD = """
import sys
from helpers.core.logger import Monitor
m = Monitor(sys.argv[1], wandb=False)
m.log({"a": 1.0}, 1)
m.tb.flush()
print("ready", flush=True)
if sys.stdin.readline().strip() == "finish":
    m.log({"a": 2.0}, 2)
    m.close()
    print("closed", flush=True)
"""


def test_a_run_whose_kernel_died_is_cleared_without_the_students_files(tmp_path):
    run = tmp_path / "run"
    kernel = _kernel(_HOLD, str(run))
    try:
        _line(kernel, "ready", 120)
        (run / "my_notes.txt").write_text("mine")                        # the student's, made during the run
        (run / "analysis").mkdir()
        (run / "analysis" / "plot.png").write_bytes(b"png")
        (run / "tensorboard" / "notes.md").write_text("also mine")
    finally:
        kernel.kill()                                                     # the kernel dies: close() never runs
        kernel.wait()
    with MO.Monitor(run, wandb=False) as mon:                             # its lock is stale: taken over
        mon.log({"a": 5.0}, 1)
    assert (run / "my_notes.txt").read_text() == "mine"
    assert (run / "analysis" / "plot.png").read_bytes() == b"png"
    assert (run / "tensorboard" / "notes.md").read_text() == "also mine"
    assert _tb_values(run) == [(1, 5.0)]                                  # the dead run's event file is gone


def test_a_sealed_run_lists_only_its_own_files(tmp_path):
    run = tmp_path / "run"
    with MO.Monitor(run, wandb=False) as mon:
        mon.log({"a": 1.0}, 1)
        (run / "my_notes.txt").write_text("written while the run was going")
    with MO.Monitor(run, wandb=False) as mon:
        mon.log({"a": 2.0}, 1)
    assert (run / "my_notes.txt").exists() and _tb_values(run) == [(1, 2.0)]


# --- (b) one live Monitor per folder ----------------------------------------------------------------------------

def test_a_second_monitor_in_this_process_is_refused_and_the_first_keeps_everything(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    run = tmp_path / "run"
    first = MO.Monitor(run, config={"lr": 0.1})
    try:
        first.log({"a": 1.0}, 1)
        with pytest.raises(FileExistsError, match=rf"in use: a Monitor in this process \(pid {os.getpid()}, since .*close"):
            MO.Monitor(run, config={"lr": 0.2})                           # the same cell run twice
        for step in range(2, 6):
            first.log({"a": float(step)}, step)                           # W&B's run was not finished under it
    finally:
        first.close()
    assert [s for s, _ in _tb_values(run)] == [1, 2, 3, 4, 5]
    wb = MO.read_wandb_run(first.wandb_dir)
    assert [r["a"] for r in wb["history"]] == [1.0, 2.0, 3.0, 4.0, 5.0] and wb["config"]["lr"] == 0.1
    with MO.Monitor(run, wandb=False) as again:                           # closed: the folder is free again
        again.log({"a": 9.0}, 1)
    assert _tb_values(run) == [(1, 9.0)]


def test_a_monitor_in_another_process_keeps_its_folder(tmp_path):
    run = tmp_path / "run"
    kernel = _kernel(_HOLD, str(run))
    try:
        _line(kernel, "ready", 120)
        with pytest.raises(FileExistsError, match=rf"in use: a Monitor in process {kernel.pid} on .*another folder"):
            MO.Monitor(run, wandb=False)
        kernel.stdin.write("finish\n")
        kernel.stdin.flush()
        _line(kernel, "closed", 60)
        assert kernel.wait(30) == 0, kernel.stderr.read()[-3000:]
    finally:
        kernel.kill()
        kernel.wait()
    assert _tb_values(run) == [(1, 1.0), (2, 2.0)]                        # nothing of the live run was lost


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX's")
def test_a_forked_child_does_not_keep_the_folder_after_close(tmp_path):
    """DataLoader workers are forked while the Monitor is open; closing it frees the folder all the same."""
    import multiprocessing as mp

    child_ready, release = mp.get_context("fork").Event(), mp.get_context("fork").Event()
    run = tmp_path / "run"
    with MO.Monitor(run, wandb=False) as mon:
        worker = mp.get_context("fork").Process(target=_wait_for, args=(child_ready, release))
        worker.start()
        assert child_ready.wait(60)
        mon.log({"a": 1.0}, 1)
    try:
        with MO.Monitor(run, wandb=False) as again:                       # the worker lives on
            again.log({"a": 2.0}, 1)
    finally:
        release.set()
        worker.join(30)
    assert _tb_values(run) == [(1, 2.0)]


def _wait_for(ready, release) -> None:
    ready.set()
    release.wait(60)


def test_without_file_locks_the_pid_in_the_lock_decides(tmp_path, monkeypatch):
    """Filesystems without flock (some network drives): a live holder is refused, a dead one's lock taken over."""
    monkeypatch.setattr(F, "fcntl", None)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        run = tmp_path / "run"
        run.mkdir()
        (run / F.MANIFEST).write_text(json.dumps({"owner": "Monitor", "claimed_at": time.time(), "files": None}))
        holder = {"owner": "Monitor", "pid": sleeper.pid, "started": psutil.Process(sleeper.pid).create_time(),
                  "host": socket.gethostname(), "since": time.time()}
        (run / F.LOCK).write_text(json.dumps(holder))
        with pytest.raises(F.FolderInUseError, match=f"process {sleeper.pid}"):
            MO.Monitor(run, wandb=False)
        sleeper.kill()
        sleeper.wait()
        with MO.Monitor(run, wandb=False) as mon:                         # the holder is dead: taken over
            with pytest.raises(F.FolderInUseError, match="this process"):
                MO.Monitor(run, wandb=False)
            mon.log({"a": 1.0}, 1)
        assert _tb_values(run) == [(1, 1.0)]
    finally:
        sleeper.kill()
        sleeper.wait()
