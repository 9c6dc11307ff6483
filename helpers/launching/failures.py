"""When a launch fails: which rank is the cause, and how, in words that say what to do (01, 03).

The launcher collects what each rank said (started, a result, a traceback) and how each process
ended; :meth:`_Run.diagnose` names the cause: a rank killed by a signal (the out-of-memory
killer's SIGKILL, a segfault); else a rank that ended without a traceback; else the lowest-numbered
rank whose error is not a lost connection to another rank (``PEER_LOST``), ahead of the ranks that
then lost their connection to it. It judges what has arrived by then, not which rank failed first.
"""
from __future__ import annotations

import io
import queue as queue_mod
import signal
import time
from typing import Any

import torch

from ..core.i18n import tr
from .relay import show


PEER_LOST = ("Connection reset by peer", "Connection closed by peer", "Broken pipe", "recvBytes", "sendBytes",
             "Socket Timeout", "NCCL communicator was aborted")


class LaunchError(RuntimeError):
    """A rank failed; ``rank`` is the one :meth:`_Run.diagnose` names as the cause, ``cause`` says how (01, 03).

    The message holds that rank's whole traceback (or how it ended), then what the other ranks
    did after it, as consequences. ``exits``: each rank's exit code when the launcher stopped
    listening (``None``: still running, so the launcher then ended it); ``errors``: the traceback
    of every rank that raised.
    """

    def __init__(self, rank: int, details: str, cause: str = "", exits: dict | None = None,
                 errors: dict | None = None) -> None:
        self.rank = rank
        self.details = details
        self.cause = cause or details.strip().splitlines()[-1]
        self.exits = dict(exits or {})
        self.errors = dict(errors or {})
        super().__init__(f"rank {rank} failed; {details}")


class Stopped(KeyboardInterrupt):
    """Stop was pressed during a launch, and every rank has been ended (01–03).

    Jupyter shows it as its one-line message (IPython's ``_render_traceback_``), not as the
    launcher's and multiprocessing's frames that Stop happened to interrupt.
    """

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: {self}"]


class _Run:
    """What the ranks of one launch have said so far: started, results, errors (their tracebacks)."""

    def __init__(self, nprocs: int) -> None:
        self.nprocs = nprocs
        self.started: set[int] = set()
        self.results: dict[int, Any] = {}
        self.errors: dict[int, str] = {}
        self.closed: set[int] = set()  # ranks whose pipe has ended: all they said has arrived
        self.exit_seen: dict[int, float] = {}

    def receive(self, inbox: "queue_mod.Queue", wait: float) -> None:
        """Handle every message that has arrived, waiting up to ``wait`` s for the first."""
        deadline = time.monotonic() + wait
        for _ in range(1000):  # then let the launcher look at its clock and its ranks
            try:
                kind, rank, payload = inbox.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue_mod.Empty:
                return
            if kind == "started":
                self.started.add(rank)
            elif kind == "out":
                show(rank, *payload)
            elif kind == "ok":
                self.results[rank] = torch.load(io.BytesIO(payload), weights_only=False)
            elif kind == "error":
                self.errors.setdefault(rank, payload)
            elif kind == "eof":
                self.closed.add(rank)

    def failed(self, exits: dict[int, int]) -> bool:
        """A rank raised, or one has ended without a result (its pipe closed, or ended 2 s ago: a child of it
        may hold the pipe open)."""
        now = time.monotonic()
        for r in exits:
            self.exit_seen.setdefault(r, now)
        return bool(self.errors) or any(r not in self.results and (r in self.closed or now - t > 2)
                                        for r, t in self.exit_seen.items())

    def diagnose(self, exits: dict[int, int | None]) -> LaunchError:
        """The error that names the cause: a rank killed by a signal; else one that ended without a traceback; else
        the lowest-numbered rank whose error is not a lost connection (``PEER_LOST``); else the lowest that raised."""
        notes = {r: _how_it_ended(r, code, r in self.started)
                 for r, code in exits.items() if code is not None and r not in self.results and r not in self.errors}
        signalled = [r for r, code in exits.items() if code is not None and code < 0 and r in notes]
        causes = [r for r in self.errors if not any(s in self.errors[r] for s in PEER_LOST)]
        first = (signalled or sorted(notes) or sorted(causes) or sorted(self.errors))[0]
        text = notes[first] if first in notes else f"its traceback:\n{self.errors[first]}"
        cause = notes[first] if first in notes else self.errors[first].strip().splitlines()[-1]
        others = [f"rank {r}: {notes[r]}" for r in sorted(notes) if r != first]
        others += [f"rank {r} then failed: {self.errors[r].strip().splitlines()[-1]}" for r in sorted(self.errors)
                   if r != first]
        if others:
            text += "\nAfter that (consequences, most likely):\n" + "\n".join(others)
        said = tr("launch.cause", "rank {rank}: {cause}", rank=first, cause=cause)
        return LaunchError(first, text, said, exits=exits, errors=self.errors)


def _how_it_ended(rank: int, code: int, started: bool) -> str:
    """Why a rank that left no traceback is gone, in words, with the likely cause and the fix."""
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.valid_signals() else f"signal {-code}"
        why = {"SIGKILL": " (the out-of-memory killer sends SIGKILL: out of memory? Watch memory, or use a smaller "
                          "batch or fewer processes)",
               "SIGSEGV": " (a crash in native code: a segmentation fault)",
               "SIGABRT": " (native code aborted: look above for its message)",
               "SIGBUS": " (a crash in native code: often shared memory (/dev/shm) running out)"}.get(name, "")
        return f"it was killed by {name}{why}"
    if not started:
        return (f"it exited with code {code} before running your function: multiprocessing could not start it. The error is "
                "printed above, outside this message. If you launched from a script, call launch() under "
                "`if __name__ == \"__main__\":` (every new process imports the script again).")
    if code == 0:
        return ("it exited with code 0 without returning a result: does the function call sys.exit(), os._exit(), "
                "or end the process some other way before returning?")
    return f"it exited with code {code} without a traceback (os._exit, or a crash in native code)"
