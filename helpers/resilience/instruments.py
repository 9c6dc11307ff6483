"""What notebook 10 uses to break its own runs on purpose, from outside, and to time what a failure costs (10).

A worker announces itself (its pid, rank and epoch) as a file in a folder the notebook names; the notebook
waits for the announcement and kills that process with a real signal, as a node failure (SIGKILL) or a
scheduler (SIGTERM) would. Nothing in the training code knows it is being tested.
"""
from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

from ..core.i18n import tr

__all__ = ["announce", "wait_for", "kill_when", "announcements", "recovery", "ray_registered_epochs", "leftover_processes"]


def announce(folder: str | None, rank: int, epoch: int) -> None:
    """A worker says it has started ``epoch``, in ``folder`` (10): ``rank<r>-epoch<e>.pid`` holds its pid (a restarted
    worker overwrites it), and a line of ``starts.log`` keeps every start with its time (:func:`announcements`).
    """
    if folder:
        with open(Path(folder) / "starts.log", "a") as log:  # every start, kept: one short line, one write
            log.write(f"{rank} {epoch} {os.getpid()} {time.time()!r}\n")   # before the pid: a kill finds it logged
        path = Path(folder) / f"rank{rank}-epoch{epoch}.pid"
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(str(os.getpid()))
        os.replace(tmp, path)  # whole or absent: the notebook never reads half a pid


def wait_for(folder: str, rank: int, epoch: int, timeout: float = 60.0) -> int:
    """The pid of ``rank`` once it has started ``epoch`` (10); TimeoutError naming what never came."""
    path = Path(folder) / f"rank{rank}-epoch{epoch}.pid"
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(tr("10.epoch_never_started", "rank {rank} did not start epoch {epoch} within "
                                  "{timeout:g} s ({path} never appeared)", rank=rank, epoch=epoch, timeout=timeout,
                                  path=path))
        time.sleep(0.005)   # polled often: kill_when's delay is measured from this moment
    return int(path.read_text())


def kill_when(folder: str, rank: int, epoch: int, sig: int = signal.SIGKILL, delay: float = 0.3,
              timeout: float = 120.0, ready=None) -> dict:
    """In a background thread: once ``rank`` starts ``epoch``, wait ``delay`` s (into the epoch) and send it ``sig`` (10).

    ``ready``: a function polled after that until it returns True, before the signal (e.g. that Ray Train has
    registered the last checkpoint: :func:`ray_registered_epochs`).

    Returns a dict the thread fills: ``pid``, ``at`` (``time.time()`` of the kill: the workers' clock) or ``error``.
    """
    out: dict = {}

    def run() -> None:
        try:
            pid = wait_for(folder, rank, epoch, timeout)
            time.sleep(delay)
            deadline = time.monotonic() + timeout
            while ready is not None and not ready():
                if time.monotonic() > deadline:
                    raise TimeoutError(tr("10.not_ready_to_strike", "not ready to strike within {timeout:g} s",
                                          timeout=timeout))
                time.sleep(0.01)
            os.kill(pid, sig)
            out.update(pid=pid, at=time.time())
        except (TimeoutError, ProcessLookupError) as e:
            out["error"] = str(e)

    out["thread"] = threading.Thread(target=run, daemon=True)
    out["thread"].start()
    return out


def announcements(folder: str) -> list[dict]:
    """Every epoch start announced in ``folder``, restarts included, in time order: rank, epoch, pid, t (10)."""
    path = Path(folder) / "starts.log"
    rows = [line.split() for line in path.read_text().splitlines()] if path.exists() else []
    return sorted(({"rank": int(r), "epoch": int(e), "pid": int(p), "t": float(t)} for r, e, p, t in rows),
                  key=lambda a: a["t"])


def recovery(starts: list[dict], kill_at: float, rank: int = 0) -> dict:
    """What a failure at ``kill_at`` cost a run, from its epoch starts (:func:`announcements`) on ``rank`` (10).

    ``resumed_epoch``: the first epoch started after the failure; ``recovery_s``: from the failure to that start
    (the restart: new processes, the process group, the checkpoint loaded); ``redone_s``: the work that start
    repeats, from the earlier start of that same epoch to the failure (what the checkpoint did not hold);
    ``lost_s``: both. ``killed_epoch``: the last epoch ``rank`` started before the failure (the one it died in).
    ``started_s``: each start's time from the run's first (``rank``'s).
    """
    mine = [a for a in starts if a["rank"] == rank]
    started = [a for a in mine if a["t"] < kill_at]
    after = next((a for a in mine if a["t"] > kill_at), None)
    before = next((a for a in started if after and a["epoch"] == after["epoch"]), None)
    if before is None:
        raise ValueError(tr("10.no_recovery", "rank {rank} has no epoch start both before the failure and after it, "
                            "of the same epoch, in these starts: kill it after it has started an epoch, and let the "
                            "run resume", rank=rank))
    t0, died_in = mine[0]["t"], started[-1]["epoch"]
    return {"rank": rank, "resumed_epoch": after["epoch"], "killed_epoch": died_in, "recovery_s": after["t"] - kill_at,
            "redone_s": kill_at - before["t"],
            "lost_s": after["t"] - before["t"], "kill_s": kill_at - t0,
            "started_s": [(a["epoch"], a["t"] - t0) for a in mine]}


def ray_registered_epochs(run_dir: str) -> list[int]:
    """The epochs whose checkpoints Ray Train's controller has registered, from its snapshot in ``run_dir`` (10).

    The controller rewrites ``checkpoint_manager_snapshot.json`` in the run's storage folder each time it
    registers a reported checkpoint (``CheckpointManager._write_state_to_storage`` in Ray Train v2).
    """
    path = Path(run_dir) / "checkpoint_manager_snapshot.json"
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):   # not written yet, or being written
        return []
    return sorted(r["metrics"]["epoch"] for r in state.get("checkpoint_results", []) if "epoch" in r.get("metrics", {}))


def leftover_processes() -> list[str]:
    """This process's descendants still alive, as ``pid: command`` lines, other than multiprocessing's own helpers (10).

    The fork server and the resource tracker that the course's launcher starts once per kernel stay on purpose;
    every rank, ``torchrun`` agent and Ray process a cell started should be gone.
    """
    import psutil

    alive = []
    for p in psutil.Process().children(recursive=True):
        try:
            cmd = " ".join(p.cmdline())
            if p.status() != psutil.STATUS_ZOMBIE and "forkserver" not in cmd and "resource_tracker" not in cmd:
                alive.append(f"{p.pid}: {cmd[:120]}")
        except psutil.Error:   # gone meanwhile
            pass
    return alive
