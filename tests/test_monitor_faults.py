"""The Monitor (05) under faults: nothing the student made is deleted, two Monitors never share a folder,
logged in but offline costs seconds not minutes, what is read back is the whole run, and TensorBoard ends
with the kernel that started it (issue 21). Each test failed on the code before the fix it checks.

Timing-dependent steps wait for events (a line printed, a process gone, a file complete) with a deadline;
no test touches the network: an unreachable W&B server is a closed port on 127.0.0.1.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from conftest import ROOT
from helpers import monitor as MO
from helpers.core import files as F
from helpers.core import logger as LG


@pytest.fixture(autouse=True, scope="module")
def _stop_wandb_service():
    """Stop the wandb-core service these tests start, so later tests and kernels do not inherit it."""
    yield
    import wandb

    wandb.teardown()


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _wait_gone(pid: int, seconds: float) -> bool:
    """Whether ``pid`` ended within ``seconds`` (polled: the event is the process's end)."""
    deadline = time.monotonic() + seconds
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    return not _alive(pid)


def _kernel(script: str, *args: str) -> subprocess.Popen:
    """A Python process standing in for a notebook kernel, importing the helpers of this checkout."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-c", script, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def _line(proc: subprocess.Popen, word: str, seconds: float) -> str:
    """The first line of ``proc``'s output that starts with ``word``, waiting at most ``seconds``."""
    got: list[str] = []

    def read():
        for line in proc.stdout:
            if line.startswith(word):
                got.append(line.strip())
                return

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(seconds)
    if not got:
        proc.kill()
        raise AssertionError(f"no {word!r} line within {seconds} s; stderr: {proc.stderr.read()[-3000:]}")
    return got[0]


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


# --- (c) logged in, but no network -------------------------------------------------------------------------------

@pytest.fixture
def no_network(monkeypatch):
    """Name lookups of any host but this machine fail, and are recorded: nothing here may leave the machine."""
    asked: list[str] = []
    real = socket.getaddrinfo

    def lookup(host, *a, **k):
        if host not in ("localhost", "127.0.0.1", "::1"):
            asked.append(host)
            raise socket.gaierror(f"no network in this test ({host})")
        return real(host, *a, **k)

    monkeypatch.setattr(socket, "getaddrinfo", lookup)
    return asked


def test_logged_in_without_a_network_logs_offline_within_seconds(tmp_path, monkeypatch, capsys, no_network):
    import wandb

    closed = MO.free_port()                                               # nothing listens there: refused at once
    for k in ("WANDB_MODE", "WANDB_BASE_URL"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)                         # logged in
    monkeypatch.setenv("WANDB_BASE_URL", f"http://127.0.0.1:{closed}")   # the server, unreachable
    monkeypatch.setenv("WANDB_INIT_TIMEOUT", "20")                        # (before the fix: fail in 20 s, not 90)
    monkeypatch.setenv("WANDB_ERROR_REPORTING", "false")
    monkeypatch.setattr(LG, "_OFFLINE_SET_HERE", False)
    wandb.teardown()                                                      # wandb's settings, made afresh from this env
    try:
        start = time.monotonic()
        with MO.Monitor(tmp_path / "run", tensorboard=False) as mon:
            mon.log({"a": 1.0}, 1)
        took = time.monotonic() - start
        said = capsys.readouterr().out
        assert "logged offline" in said and f"wandb sync {mon.wandb_dir}" in said, said
        assert mon.wandb_dir.name.startswith("offline-run-")
        assert [r["a"] for r in MO.read_wandb_run(mon.wandb_dir)["history"]] == [1.0]
        assert took < 60, f"{took:.0f} s to fall back"
        assert no_network == [], f"hosts looked up: {no_network}"
    finally:
        wandb.teardown()                                                  # forget the unreachable server's settings


def test_an_unanswering_server_is_given_up_within_three_seconds(monkeypatch):
    """A server that never answers (a firewall dropping packets): the check gives up after its timeout."""
    released = threading.Event()
    timeouts: list[float] = []

    def black_hole(address, timeout=None, **kw):
        timeouts.append(timeout)
        released.wait(30)                                                 # no answer until the test is over
        raise TimeoutError("timed out")

    monkeypatch.setattr(LG.socket, "create_connection", black_hole)
    monkeypatch.delenv("HTTPS_PROXY", raising=False)
    monkeypatch.delenv("https_proxy", raising=False)
    try:
        start = time.monotonic()
        why = LG._unreachable("https://wandb.example.invalid")
        took = time.monotonic() - start
    finally:
        released.set()
    assert why and "no answer" in why and took < 3.5 and timeouts and timeouts[0] <= 3


# --- (d) what is read back is the whole run -------------------------------------------------------------------------

@pytest.fixture
def wandb_closes_late(monkeypatch):
    """wandb-core closes a finished run's file late, as on a loaded machine: ``finish()`` returns long before."""
    from wandb.sdk.lib.service import service_connection as SC

    real, later = SC.ServiceConnection.inform_finish, []

    def inform_finish(self, run_id):
        t = threading.Timer(2.0, real, args=(self, run_id))
        later.append(t)
        t.start()

    monkeypatch.setattr(SC.ServiceConnection, "inform_finish", inform_finish)
    yield
    for t in later:
        t.join()


def test_the_run_is_read_back_whole_when_wandb_writes_its_file_late(tmp_path, monkeypatch, wandb_closes_late):
    monkeypatch.setenv("WANDB_MODE", "offline")
    with MO.Monitor(tmp_path / "run", config={"lr": 0.01}, tensorboard=False) as mon:
        for step in range(1, 4):
            mon.log({"val/acc": step / 10}, step)
    assert next(mon.wandb_dir.glob("run-*.wandb")).stat().st_size > 0   # close() waited for the file's end
    wb = MO.read_wandb_run(mon.wandb_dir)
    assert [r["val/acc"] for r in wb["history"]] == [0.1, 0.2, 0.3] and wb["complete"]


def test_read_wandb_run_waits_for_the_end_of_the_file(tmp_path, monkeypatch, wandb_closes_late):
    import wandb

    monkeypatch.setenv("WANDB_MODE", "offline")
    run = wandb.init(project="t", dir=str(tmp_path), mode="offline", reinit="finish_previous",
                     settings=wandb.Settings(console="off", silent=True, x_disable_stats=True))
    for step in range(3):
        run.log({"x": step})
    folder = Path(run.dir).parent
    run.finish()                                                          # returns before the file is written
    wb = MO.read_wandb_run(folder)
    assert [r["x"] for r in wb["history"]] == [0, 1, 2] and wb["complete"]


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
