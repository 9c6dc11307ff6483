"""What notebook 10 uses to break its own runs on purpose, from outside, and to time what a failure costs (10).

A worker announces itself (its pid, rank and epoch) as a file in a folder the notebook names; the notebook
waits for the announcement and kills that process with a real signal, as a node failure (SIGKILL) or a
scheduler (SIGTERM) would. Nothing in the training code knows it is being tested.
"""
from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

__all__ = ["announce", "wait_for", "kill_when"]


def announce(folder: str | None, rank: int, epoch: int) -> None:
    """A worker says it has started ``epoch``: ``rank<r>-epoch<e>.pid`` holding its pid, in ``folder`` (10)."""
    if folder:
        path = Path(folder) / f"rank{rank}-epoch{epoch}.pid"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(str(os.getpid()))
        os.replace(tmp, path)  # whole or absent: the notebook never reads half a pid


def wait_for(folder: str, rank: int, epoch: int, timeout: float = 60.0) -> int:
    """The pid of ``rank`` once it has started ``epoch`` (10); TimeoutError naming what never came."""
    path = Path(folder) / f"rank{rank}-epoch{epoch}.pid"
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"rank {rank} did not start epoch {epoch} within {timeout:g} s ({path} never appeared)")
        time.sleep(0.05)
    return int(path.read_text())


def kill_when(folder: str, rank: int, epoch: int, sig: int = signal.SIGKILL, delay: float = 0.3,
              timeout: float = 120.0) -> dict:
    """In a background thread: once ``rank`` starts ``epoch``, wait ``delay`` s (mid-epoch) and send it ``sig`` (10).

    Returns a dict the thread fills: ``pid``, ``at`` (``time.monotonic()`` of the kill) or ``error``.
    """
    out: dict = {}

    def run() -> None:
        try:
            pid = wait_for(folder, rank, epoch, timeout)
            time.sleep(delay)
            os.kill(pid, sig)
            out.update(pid=pid, at=time.monotonic())
        except (TimeoutError, ProcessLookupError) as e:
            out["error"] = str(e)

    out["thread"] = threading.Thread(target=run, daemon=True)
    out["thread"].start()
    return out
