"""TensorBoard (05) ends with the kernel that started it, killed or shut down, and a board cell run again ends only its
own earlier board (issue 21). Each test failed on the code before the fix it checks.

Timing-dependent steps wait for events (a line printed, a process gone) with a deadline."""
from __future__ import annotations

import signal
import sys
from pathlib import Path

import psutil
import pytest

from helpers import monitor as MO

from monitor_kernels import _alive, _kernel, _line, _wait_gone
from monitor_kernels import _stop_wandb_service  # noqa: F401  (autouse: wandb-core stops after this module)


# --- (e) TensorBoard ends with its kernel ----------------------------------------------------------------------------

_TENSORBOARD_KERNEL = """
import sys, time, datetime
from helpers.monitor.board import tensorboard_binary, free_port
from tensorboard import manager
tensorboard_binary()                                  # as notebook 05's %tensorboard cell does
r = manager.start(["--logdir", sys.argv[1], "--host", "127.0.0.1", "--port", str(free_port())],
                  timeout=datetime.timedelta(seconds=150))
print("tensorboard", r.info.pid if hasattr(r, "info") else repr(r).replace("\\n", " "), flush=True)
time.sleep(600)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_tensorboard_ends_when_the_kernel_that_started_it_is_killed(tmp_path):
    kernel = _kernel(_TENSORBOARD_KERNEL, str(tmp_path))
    tb = None
    try:
        line = _line(kernel, "tensorboard", 180)
        assert line.split()[1].isdigit(), f"TensorBoard did not start: {line}"
        tb = int(line.split()[1])
        assert _alive(tb) and "tensorboard" in " ".join(psutil.Process(tb).cmdline())
        kernel.send_signal(signal.SIGKILL)                                # a crash, the OOM killer
        kernel.wait()
        assert _wait_gone(tb, 30), "TensorBoard outlived the kernel that started it"
    finally:
        kernel.kill()
        kernel.wait()
        if tb is not None and _alive(tb):
            psutil.Process(tb).kill()
        MO.stop_tensorboards(tmp_path)                                    # its registry entry, if it left one


def _start_board(logdir: Path) -> int:
    """A TensorBoard for ``logdir``, started by this process as ``%tensorboard`` starts it; its pid."""
    import datetime

    from tensorboard import manager

    MO.tensorboard_binary()
    r = manager.start(["--logdir", str(logdir), "--host", "127.0.0.1", "--port", str(MO.free_port())],
                      timeout=datetime.timedelta(seconds=150))
    assert hasattr(r, "info"), f"TensorBoard did not start: {r!r}"
    return r.info.pid


def test_the_board_cell_run_again_ends_only_its_earlier_board_of_that_folder(tmp_path, monkeypatch):
    """Run All again: board_port ends the server this process started for the folder, not the one of another folder."""
    for name in ("TENSORBOARD_BINARY", "BEYOND_ONE_GPU_TENSORBOARD_PARENT"):   # tensorboard_binary() sets them
        monkeypatch.setenv(name, "")                                              # recorded: restored after
        monkeypatch.delenv(name)
    first, other = _start_board(tmp_path / "a"), _start_board(tmp_path / "b")
    try:
        port = MO.board_port(tmp_path / "a")
        assert _wait_gone(first, 30), "the earlier board of the folder is still serving"
        assert _alive(other), "the board of another folder was ended"
        assert not MO.running_tensorboards(tmp_path / "a") and port not in [i.port for i in MO.running_tensorboards()]
    finally:
        for pid in (first, other):
            if _alive(pid):
                psutil.Process(pid).kill()
        MO.stop_tensorboards(tmp_path / "a")
        MO.stop_tensorboards(tmp_path / "b")


_BOARD_THEN_EXIT = """
import sys, types, datetime
import helpers.monitor.board as B
from tensorboard import manager
B.sys = types.SimpleNamespace(platform="darwin", executable=sys.executable)   # no PR_SET_PDEATHSIG wrapper
B.tensorboard_binary()
r = manager.start(["--logdir", sys.argv[1], "--host", "127.0.0.1", "--port", str(B.free_port())],
                  timeout=datetime.timedelta(seconds=150))
print("tensorboard", r.info.pid if hasattr(r, "info") else repr(r).replace("\\n", " "), flush=True)
sys.stdin.readline()
"""


def test_tensorboard_ends_when_its_kernel_shuts_down_without_the_linux_wrapper(tmp_path):
    """A kernel that shuts down (restart, nbval's end) ends its boards through atexit, on any system."""
    kernel = _kernel(_BOARD_THEN_EXIT, str(tmp_path))
    tb = None
    try:
        line = _line(kernel, "tensorboard", 180)
        assert line.split()[1].isdigit(), f"TensorBoard did not start: {line}"
        tb = int(line.split()[1])
        kernel.stdin.write("\n")                                                  # the kernel exits normally
        kernel.stdin.flush()
        assert kernel.wait(60) == 0, kernel.stderr.read()[-3000:]
        assert _wait_gone(tb, 30), "TensorBoard outlived the kernel that started it"
        assert not MO.running_tensorboards(tmp_path)
    finally:
        kernel.kill()
        kernel.wait()
        if tb is not None and _alive(tb):
            psutil.Process(tb).kill()
        MO.stop_tensorboards(tmp_path)
