"""How the launcher starts its ranks, and how a rank ends with its parent (03).

The launcher (:mod:`.launcher`) starts each rank with multiprocessing's *forkserver* on Linux:
a server process imports torch once, at the first launch, and forks every rank from itself, so
a launch does not wait for each rank to import torch again. Elsewhere, *spawn*.
"""
from __future__ import annotations

import os
import select
import signal
import sys
import threading
import time
from typing import Any

import torch.multiprocessing as mp


def start_method() -> str:
    """``"forkserver"`` on Linux, ``"spawn"`` elsewhere (03).

    Both start a process that has never initialised CUDA and import the script's ``__main__``
    again (`Python's start methods <https://docs.python.org/3/library/multiprocessing.html#contexts-and-start-methods>`_).
    The fork server is a process of its own that imports what ``_PRELOAD`` names once and forks
    every rank from itself; from Python 3.14 it is the default on Linux. On macOS Python's docs call
    fork unsafe (system libraries may start threads) and the fork server forks a process that has
    imported torch; Windows has no fork: spawn there.
    """
    return "forkserver" if sys.platform.startswith("linux") and "forkserver" in mp.get_all_start_methods() else "spawn"


# imported once by the fork server; importing them does not initialise CUDA, nor start a thread. torch._dynamo:
# DistributedDataParallel's constructor imports it (``torch._dynamo.utils.get_optimize_ddp_mode()`` in
# torch/nn/parallel/distributed.py), 1.6 s of CPU per rank on a 2-core AMD EPYC when each rank imports it itself
_PRELOAD = ["torch", "torch.distributed", "torch._dynamo", f"{__package__}.launcher"]


def context() -> Any:
    """The multiprocessing context the launcher starts ranks with (see :func:`start_method`) (03)."""
    ctx = mp.get_context(start_method())
    if ctx.get_start_method() == "forkserver":
        ctx.set_forkserver_preload(_PRELOAD)  # takes effect when the fork server starts, at the first launch
    return ctx


def die_with_launcher(launcher: int) -> None:
    """In a rank: when the launching process is gone, end the rank and whatever it started (03).

    Under forkserver the rank's parent is the fork server, which outlives the launcher while any
    rank runs (each rank holds the server's "launcher alive" pipe open), so the rank watches the
    launcher itself: through a pidfd, readable once that process has exited (Linux 5.3+,
    `pidfd_open(2) <https://man7.org/linux/man-pages/man2/pidfd_open.2.html>`_); where there
    is none, by polling for the launcher's pid.
    """
    try:
        pidfd = os.pidfd_open(launcher)
    except (AttributeError, OSError):
        pidfd = None

    def gone() -> bool:
        try:
            os.kill(launcher, 0)
        except (ProcessLookupError, PermissionError):  # PermissionError: the pid now another user's process
            return True
        return False

    parent = os.getppid()  # the launcher (spawn) or the fork server

    def watch() -> None:
        if pidfd is not None:
            select.select([pidfd], [], [])
        else:
            while not gone() and os.getppid() == parent:
                time.sleep(0.5)
        os.killpg(0, signal.SIGKILL)

    threading.Thread(target=watch, daemon=True, name="die-with-launcher").start()
