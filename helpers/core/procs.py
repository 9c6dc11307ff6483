"""Processes the course starts, and how they end: nothing outlives the notebook (03, 04, 05).

- :func:`end_processes` ends processes politely, then for certain (SIGTERM, a grace period, SIGKILL),
  and cannot be cut short by a second press of Jupyter's Stop: the one routine for the launcher's
  ranks, Ray's agents and TensorBoard's servers.
- :func:`free_port` gives a port for a server the course starts (TensorBoard, Ray's head node).
- :func:`session_processes` finds this user's processes whose command line names a marker (a
  temporary folder of ours, say): how the course finds Ray's agents or a torchrun agent's workers.
- :func:`watch_parent` starts a small watchdog that ends those processes if the notebook's kernel
  dies before it could clean up (killed, crashed, or its machine's OOM killer).
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterable

import psutil


def _marked(p: psutil.Process, marker: str) -> bool:
    """Whether ``marker`` is in the process's command line, its environment, or the path of a file it has open."""
    if marker in " ".join(p.info["cmdline"] or ()):
        return True
    try:
        if any(marker in v for v in p.environ().values()):
            return True
        return any(marker in f.path for f in p.open_files())
    except psutil.Error:
        return False


def session_processes(marker: str) -> list[psutil.Process]:
    """This user's live processes (not this one) that name ``marker`` (04, and the failure drills).

    A process that renames itself (Ray's agents show as ``ray::DashboardAgent``, and overwrite their
    environment doing so) still writes its logs into its session's folder: a unique folder per
    session marks every process of that session, and nothing else.
    """
    me, uid, out = os.getpid(), os.getuid(), []
    for p in psutil.process_iter(["pid", "cmdline", "uids", "status"]):
        try:
            if (p.info["pid"] != me and p.info["uids"] and p.info["uids"].real == uid
                    and p.info["status"] != psutil.STATUS_ZOMBIE and _marked(p, marker)):
                out.append(p)
        except psutil.Error:
            pass
    return out


def end_processes(procs: Iterable, grace: float = 3.0, groups: Iterable[int] = ()) -> list[int]:
    """SIGTERM every process, wait up to ``grace`` seconds, then SIGKILL what is left and the process groups
    ``groups`` (what the processes started); return the pids that were running (01–05).

    ``procs``: ``psutil.Process`` objects (Ray's agents, a leftover of the tests) or processes that
    ``multiprocessing`` started (the launcher's ranks, joined here, so that their exit is collected). A
    KeyboardInterrupt (Stop pressed again) does not stop the cleanup: it skips the wait, and is re-raised
    once every process is gone.
    """
    procs, groups = [p for p in procs if _alive(p)], list(groups)
    interrupted, stage, left = False, 0, procs
    deadline = time.monotonic() + grace
    while stage < 3:
        try:
            if stage == 0:
                _signal(procs, "terminate")
                stage = 1
            if stage == 1:
                left = _wait(procs, deadline)
                stage = 2
            if stage == 2:
                for group in groups:
                    kill_group(group)
                _signal(left, "kill")
                _wait(left, time.monotonic() + 5)
                stage = 3
        except KeyboardInterrupt:
            interrupted, stage = True, max(stage, 2)  # no more waiting: kill
        except psutil.Error:  # a wait psutil could not do: on to the next stage
            stage += 1
    if interrupted:
        raise KeyboardInterrupt
    return [p.pid for p in procs]


def _alive(p) -> bool:
    """Whether a ``psutil.Process`` or a ``multiprocessing`` process still runs (a finished one is reaped)."""
    return p.is_running() if isinstance(p, psutil.Process) else p.pid is not None and p.is_alive()


def _signal(procs: list, how: str) -> None:
    """``terminate()`` or ``kill()`` each process that still runs; one that is gone meanwhile is skipped."""
    for p in procs:
        try:
            if _alive(p):
                getattr(p, how)()
        except (psutil.Error, ProcessLookupError):
            pass


def _wait(procs: list, deadline: float) -> list:
    """Wait until every process has ended or the deadline (``time.monotonic()``) has passed; return those left."""
    polled = [p for p in procs if isinstance(p, psutil.Process)]
    left = psutil.wait_procs(polled, timeout=max(0.0, deadline - time.monotonic()))[1] if polled else []
    for p in procs:
        if not isinstance(p, psutil.Process):
            p.join(max(0.0, deadline - time.monotonic()))
    return left + [p for p in procs if not isinstance(p, psutil.Process) and _alive(p)]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now, for a server the course starts (04, 05)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kill_group(pgid: int) -> None:
    """SIGKILL a whole process group (a rank and anything it started), if it still exists (01–03)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def watch_parent(marker: str = "", groups: Iterable[int] = (), parent: int | None = None) -> subprocess.Popen:
    """Start a watchdog: when ``parent`` (default: this process) dies, SIGKILL this user's processes marked
    with ``marker`` (see :func:`session_processes`), and the process groups ``groups`` (03, 04).

    The watchdog runs in a session of its own, so Jupyter's Stop or a kernel restart does not reach
    it; it exits by itself once it has cleaned up (its code: :mod:`helpers.core.watchdog`). Kill it
    (``.kill()``) when the cleanup has been done the normal way.
    """
    parent = os.getpid() if parent is None else parent
    cmd = [sys.executable, str(Path(__file__).with_name("watchdog.py")), str(parent), marker, *map(str, groups)]
    return subprocess.Popen(cmd, start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
