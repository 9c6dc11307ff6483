"""TensorBoard's server from a notebook: the right binary, a free port, a check it answers, a clean stop (05).

A server the notebook starts keeps serving until the kernel ends (the student is sent to its
tabs after Run All): it is ended then, by ``atexit`` when the kernel shuts down and, on Linux, by
the operating system when the kernel is killed (``PR_SET_PDEATHSIG``). A rerun of the cell ends
the server the same kernel started for the same folder before it starts a new one.
"""
from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from ..core.files import private_folder
from ..core.i18n import tr
from ..core.procs import end_processes, free_port  # free_port: importable from here too, as before (05)

__all__ = ["tensorboard_binary", "free_port", "board_port", "running_tensorboards", "check_tensorboard",
           "stop_tensorboards", "stop_own_tensorboards"]


_WRAPPER = """#!{python}
# TensorBoard for notebook 05, ended with the process that started it (written by helpers.monitor.board).
import ctypes, os, signal, sys
parent = int(os.environ.get("{env}", "0"))
if ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0) == 0 and parent and os.getppid() != parent:
    try:
        os.kill(parent, 0)
    except ProcessLookupError:
        sys.exit(0)  # the kernel that started us died before PR_SET_PDEATHSIG was set
    except PermissionError:
        pass
os.execv({target!r}, [{target!r}] + sys.argv[1:])
"""
_PARENT_ENV = "BEYOND_ONE_GPU_TENSORBOARD_PARENT"
_MARK = "bog-tensorboard-"
_ENDED_AT_EXIT: list[bool] = []  # whether stop_own_tensorboards is registered with atexit in this process


def tensorboard_binary() -> str:
    """Point TensorBoard's notebook magic at this environment's ``tensorboard``, ended with this kernel (05).

    ``%tensorboard`` starts the server as a child of the kernel, and nothing stopped it when the
    kernel was killed (a crash, the OOM killer): it kept serving, and holding its port. On Linux
    the binary given to the magic is a small wrapper that has the operating system send the server
    SIGTERM when the kernel dies (``PR_SET_PDEATHSIG``), then becomes the real ``tensorboard``;
    where the wrapper's folder is mounted noexec, the real binary is given, with no such signal.
    On every system, the servers this kernel started are also ended when it shuts down
    (:func:`stop_own_tensorboards`, registered with ``atexit``).
    """
    if not _ENDED_AT_EXIT:
        atexit.register(stop_own_tensorboards)
        _ENDED_AT_EXIT.append(True)
    exe = Path(sys.executable).parent / "tensorboard"
    target = str(exe) if exe.exists() else shutil.which(os.environ.get("TENSORBOARD_BINARY", "tensorboard"))
    if target and sys.platform.startswith("linux") and _MARK not in target:
        os.environ[_PARENT_ENV] = str(os.getpid())
        text = _WRAPPER.format(python=sys.executable, env=_PARENT_ENV, target=target)
        wrapper = private_folder(_MARK) / f"tensorboard-{hashlib.sha256(text.encode()).hexdigest()[:12]}"
        if os.statvfs(wrapper.parent).f_flag & getattr(os, "ST_NOEXEC", 0):  # a /tmp that runs no programs
            os.environ["TENSORBOARD_BINARY"] = target
            return target
        if not wrapper.exists():
            tmp = wrapper.with_suffix(f".{os.getpid()}")
            tmp.write_text(text)
            tmp.chmod(0o700)
            os.replace(tmp, wrapper)
        target = str(wrapper)
    if target:
        os.environ["TENSORBOARD_BINARY"] = target
    return os.environ.get("TENSORBOARD_BINARY", "tensorboard")


def board_port(logdir: str | Path) -> int:
    """A port for a new board of ``logdir``: ends the one this process started for it before, if any (05).

    Run All again (or the cell run twice) then leaves one server for the folder, not one per run.
    Servers other processes started are left alone.
    """
    stop_own_tensorboards(logdir)
    return free_port()


def running_tensorboards(logdir: str | Path | None = None) -> list:
    """TensorBoard servers started from this machine (TensorBoard's own registry), optionally by logdir (05)."""
    from tensorboard import manager

    infos = manager.get_all()
    if logdir is None:
        return infos
    want = str(Path(logdir).resolve())
    return [i for i in infos if str(Path(i.logdir).resolve()) == want]


def check_tensorboard(port: int, timeout: float = 30) -> list[str]:
    """Ask the TensorBoard server on ``port`` for its runs; raise if it does not answer (05)."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/runs", timeout=5) as r:
                return json.loads(r.read())
        except OSError as e:
            last = e
            time.sleep(0.5)
    raise RuntimeError(tr("05.tensorboard_no_answer", "TensorBoard did not answer on 127.0.0.1:{port} within "
                          "{timeout:g} s ({last}); read the %tensorboard cell's output for its error",
                          port=port, timeout=timeout, last=last))


def _that_tensorboard(info: Any) -> Any:
    """The registry entry's process if it is still the TensorBoard it describes, started by this user; else None."""
    import psutil

    try:
        p = psutil.Process(info.pid)
        cmd, created, uid = " ".join(p.cmdline()), p.create_time(), p.uids().real
    except psutil.Error:  # gone, or not ours to inspect
        return None
    # TensorBoard registers itself once serving, a few seconds after it started: a process created
    # after that moment is another program that got the pid when the real one was gone
    return p if "tensorboard" in cmd and created <= info.start_time + 1 and uid == os.getuid() else None


def _forget(info: Any) -> None:
    """Remove a registry entry of TensorBoard's (its own format: one file per pid)."""
    from tensorboard import manager

    Path(manager._get_info_dir(), f"pid-{info.pid}.info").unlink(missing_ok=True)


def stop_tensorboards(logdir: str | Path | None = None) -> int:
    """End the TensorBoard servers serving ``logdir`` (all of this user's if None); return how many (05).

    A registry entry whose process is gone, or whose pid now belongs to another program, is removed
    and not counted: nothing but the TensorBoard that registered is ever signalled.
    """
    boards = {}
    for info in running_tensorboards(logdir):
        p = _that_tensorboard(info)
        if p is not None:
            boards[p] = info
        else:
            _forget(info)
    end_processes(list(boards), grace=5.0)
    for info in boards.values():
        _forget(info)
    return len(boards)


def stop_own_tensorboards(logdir: str | Path | None = None) -> int:
    """End the TensorBoard servers this process started (only those serving ``logdir``, if given); return how many (05).

    The servers are this process's children running ``tensorboard``; ``%tensorboard`` starts them
    so. Registered with ``atexit`` by :func:`tensorboard_binary`, so a kernel that shuts down ends
    its boards.
    """
    import psutil

    infos = {i.pid: i for i in running_tensorboards(logdir)}
    boards = []
    for child in psutil.Process().children():
        try:
            is_board = "tensorboard" in " ".join(child.cmdline())
        except psutil.Error:
            continue
        if is_board and (logdir is None or child.pid in infos):
            boards.append(child)
    end_processes(boards, grace=5.0)
    for child in boards:
        if child.pid in infos:
            _forget(infos[child.pid])
    return len(boards)
