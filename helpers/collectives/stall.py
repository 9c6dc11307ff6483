"""A ring that hangs, said in words: where each rank waits, and an end long before the launch's timeout (08).

Notebook 08's code check runs the student's ring on real processes. A ring in which every rank
first calls the blocking ``dist.send`` deadlocks: each send waits for a receive that no rank has
reached. Rather than stay silent until the launch's timeout, each rank runs a :class:`StallWatch`:
when its thread has stood still for ``patience`` seconds (a send/recv of a few kB takes
milliseconds) it notes where, in a file; after ``give_up`` seconds it ends the rank.
:func:`watch_ranks`, in the notebook's process, prints once where the ranks wait, and
:func:`gave_up` tells the caller that the ranks were ended for a deadlock (:class:`RingDeadlock`).
"""
from __future__ import annotations

import linecache
import os
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Iterator

from ..core.i18n import tr

__all__ = ["STALL_EXIT", "RingDeadlock", "StallWatch", "watch_ranks", "gave_up"]

STALL_EXIT = 75  # the exit code of a rank that a StallWatch ended
_TORCH = os.sep + "torch" + os.sep
_HELPERS = str(Path(__file__).resolve().parent.parent)
_LOG = os.sep + "collectives" + os.sep + "ring_exercise.py"


class RingDeadlock(TimeoutError):
    """The ranks waited for each other in send/recv until the check gave up on them: a deadlock (08)."""


def _where(frame: FrameType | None) -> str:
    """The innermost line outside torch that ``frame`` is running: the student's, or the check's own."""
    while frame is not None and (_TORCH in frame.f_code.co_filename or frame.f_code.co_filename.endswith(_LOG)):
        frame = frame.f_back  # torch's frames, and the check's MessageLog wrapped around the student's dist calls
    if frame is None:
        return "?"
    path = frame.f_code.co_filename
    if str(Path(path).resolve()).startswith(_HELPERS):
        return tr("collectives.stall_in_check", "in the check's own code, waiting for the ranks still in your function")
    code = linecache.getline(path, frame.f_lineno).strip()
    return tr("collectives.stall_line", "{file}, line {line}: {code}", file=Path(path).name, line=frame.f_lineno,
              code=code)


class StallWatch:
    """In a rank: note where this thread has stood still for ``patience`` s; end the rank after ``give_up`` s (08).

    Standing still means the same frame at the same bytecode: a call that has not returned, such
    as a blocking ``dist.send`` whose receiver never comes. The note is ``rank<r>.txt`` in
    ``folder``; giving up writes ``rank<r>.gave_up`` and exits with :data:`STALL_EXIT`.
    """

    def __init__(self, folder: str | Path, rank: int, patience: float = 5.0, give_up: float = 20.0) -> None:
        self.folder, self.rank, self.patience, self.give_up = Path(folder), rank, patience, give_up
        self._done = threading.Event()
        self._thread = threading.get_ident()

    def __enter__(self) -> StallWatch:
        self._thread = threading.get_ident()
        threading.Thread(target=self._watch, daemon=True, name="stall-watch").start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()

    def _note(self, suffix: str, frame: FrameType) -> None:
        tmp = self.folder / f".rank{self.rank}.{suffix}"
        tmp.write_text(_where(frame), encoding="utf-8")
        os.replace(tmp, self.folder / f"rank{self.rank}.{suffix}")

    def _watch(self) -> None:
        state, since, noted = None, time.monotonic(), False
        while not self._done.wait(0.1):
            frame = sys._current_frames().get(self._thread)
            if frame is None:
                continue
            now = time.monotonic()
            if (id(frame), frame.f_lasti) != state:
                state, since, noted = (id(frame), frame.f_lasti), now, False
                continue
            if not noted and now - since >= self.patience:
                self._note("txt", frame)
                noted = True
            if now - since >= self.give_up and not self._done.is_set():
                self._note("gave_up", frame)
                os._exit(STALL_EXIT)


def _ranks_say(folder: Path, suffix: str) -> str:
    notes = sorted(folder.glob(f"rank*.{suffix}"), key=lambda p: int(p.stem[4:]))
    return "\n".join(tr("collectives.stall_rank", "  rank {rank}: {where}", rank=p.stem[4:],
                        where=p.read_text(encoding="utf-8")) for p in notes)


@contextmanager
def watch_ranks(folder: str | Path, patience: float, give_up: float) -> Iterator[None]:
    """In the notebook's process, while ranks with a :class:`StallWatch` run: say once where they wait (08)."""
    folder, stop = Path(folder), threading.Event()

    def run() -> None:
        while not stop.wait(0.25):
            if any(folder.glob("rank*.txt")):
                if stop.wait(0.5):  # the other ranks' notes arrive within moments; a finished launch says nothing
                    return
                print(tr("collectives.stall_waiting",
                         "⏳ the ranks have not moved for {patience:g} s, where sending a few kB takes milliseconds:\n"
                         "{ranks}\nThey are waiting for each other in send/recv. A ring in which every rank first "
                         "calls the blocking dist.send may deadlock: each send waits for a recv that no rank has "
                         "reached. Send with req = dist.isend(...), then dist.recv(...), then req.wait(). The check "
                         "gives up after {give_up:g} s of waiting.", patience=patience,
                         ranks=_ranks_say(folder, "txt"), give_up=give_up), file=sys.stderr, flush=True)
                return

    thread = threading.Thread(target=run, daemon=True, name="stall-report")
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=2)


def gave_up(folder: str | Path, give_up: float) -> RingDeadlock | None:
    """The :class:`RingDeadlock` to raise if a :class:`StallWatch` ended a rank, else None (08)."""
    where = _ranks_say(Path(folder), "gave_up")
    if not where:
        return None
    return RingDeadlock(tr("collectives.deadlock",
                           "the ranks waited {give_up:g} s for each other and were ended: a deadlock.\n{where}\nIf every "
                           "rank first calls the blocking dist.send, each waits for a recv that no rank has reached: "
                           "send with req = dist.isend(...), then dist.recv(...), then req.wait(); and let every rank "
                           "take the same number of steps", give_up=give_up, where=where))
