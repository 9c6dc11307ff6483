"""What ranks say, in the notebook: their prints, native writes, and rank 0's progress bar, live (01, 03).

Each rank talks to the launcher over a pipe of its own (:class:`Channel`): only that rank holds its
writing end, so when a rank dies, even in the middle of a message, the launcher's reader sees the
end of the pipe instead of waiting forever for the rest of the message.

In a rank, :func:`relay_output` sends what Python prints (``sys.stdout``, ``sys.stderr``) and what
native code writes to file descriptors 1 and 2 (a C++ warning, a subprocess's output) to the
launcher. There, :func:`show` prints whole lines; a line that a progress bar redraws with carriage
returns is shown live in Jupyter (one display, updated) and keeps only its final state, so a saved
notebook shows one line per bar instead of every redraw.
"""
from __future__ import annotations

import codecs
import ctypes
import io
import os
import queue
import sys
import threading
import time
from typing import Any

LIVE_EVERY = 0.2  # seconds between two updates of a live line in Jupyter


class Channel:
    """A rank's end of its pipe to the launcher: ``send(kind, payload)`` from any thread (01, 03)."""

    def __init__(self, conn: Any, rank: int) -> None:
        self.conn, self.rank, self.lock = conn, rank, threading.Lock()

    def send(self, kind: str, payload: Any = None) -> None:
        with self.lock:
            try:
                self.conn.send((kind, self.rank, payload))
            except (OSError, ValueError):  # the launcher is gone: nobody to tell
                pass


class _Writer(io.TextIOBase):
    """``sys.stdout``/``sys.stderr`` in a rank: what is written goes to the launcher at once."""

    encoding = "utf-8"  # what the launcher's side prints: tqdm then draws its bar with block characters

    def __init__(self, channel: Channel, stream: str) -> None:
        self.channel, self.stream = channel, stream

    def write(self, s: str) -> int:
        if s:
            self.channel.send("out", (self.stream, s))
        return len(s)

    def isatty(self) -> bool:
        return False


def _pump(fd: int, stream: str, channel: Channel) -> threading.Thread:
    """Point file descriptor ``fd`` at a pipe; a thread sends what arrives on it to the launcher."""
    r, w = os.pipe()
    os.dup2(w, fd)
    os.close(w)
    decode = codecs.getincrementaldecoder("utf-8")(errors="replace").decode

    def run() -> None:
        while data := os.read(r, 65536):
            channel.send("out", (stream, decode(data)))
        os.close(r)

    t = threading.Thread(target=run, daemon=True, name=f"relay-fd{fd}")
    t.start()
    return t


def relay_output(channel: Channel) -> list[threading.Thread]:
    """In a rank: send Python's and native code's output to the launcher; returns the fd pumps (01, 03)."""
    os.environ["BEYOND_ONE_GPU_RELAYED"] = "1"  # the training loop draws rank 0's bar: the launcher shows it
    sys.stdout.flush()
    sys.stderr.flush()
    pumps = [_pump(1, "stdout", channel), _pump(2, "stderr", channel)]
    sys.stdout, sys.stderr = _Writer(channel, "stdout"), _Writer(channel, "stderr")
    return pumps


def end_relay(pumps: list[threading.Thread]) -> None:
    """In a rank, when it is done: flush C's and Python's buffers and let the pumps send the last bytes (01, 03)."""
    if not pumps:
        return
    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):
        pass
    null = os.open(os.devnull, os.O_WRONLY)
    for fd in (1, 2):
        os.dup2(null, fd)  # closes the pipes' writing ends: the pumps read to the end and stop
    os.close(null)
    for t in pumps:
        t.join(1.0)


def read_into(conn: Any, rank: int, inbox: "queue.Queue") -> threading.Thread:
    """In the launcher: a thread that moves a rank's messages into ``inbox``, then ``("eof", rank, None)`` (01, 03).

    It is the only place that waits on the pipe, so a rank that dies in the middle of a message
    can block this thread for a while, never the notebook.
    """
    def run() -> None:
        try:
            while True:
                inbox.put(conn.recv())
        except (EOFError, OSError, ValueError):
            pass
        except Exception as e:  # a message that cannot be read: say so, as that rank's error
            inbox.put(("error", rank, f"its message to the launcher could not be read: {e!r}"))
        inbox.put(("eof", rank, None))

    t = threading.Thread(target=run, daemon=True, name=f"launch-reader-{rank}")
    t.start()
    return t


_PENDING: dict[tuple[int, str], str] = {}
_LIVE: dict[tuple[int, str], list] = {}  # (rank, stream) -> [display handle, time of the last update]


def _jupyter() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    return getattr(get_ipython(), "kernel", None) is not None


def _show_live(key: tuple[int, str], text: str, final: bool = False) -> bool:
    """Show ``text`` in the live display of ``key`` (made on first use); False outside Jupyter."""
    live = _LIVE.get(key)
    if live is None:
        if final or not _jupyter():
            return False
        from IPython.display import display
        _LIVE[key] = [display({"text/plain": text}, raw=True, display_id=True), time.monotonic()]
        return True
    if final or time.monotonic() - live[1] >= LIVE_EVERY:
        live[0].update({"text/plain": text}, raw=True)
        live[1] = time.monotonic()
    if final:
        del _LIVE[key]
    return True


def show(rank: int, stream: str, text: str) -> None:
    """In the launcher: print what a rank wrote, a line at a time (01, 03).

    Of a line redrawn with carriage returns (a tqdm bar) only the last state is kept; in Jupyter
    that line is shown live while it is being redrawn, and its final state stays in the output.
    """
    key = (rank, stream)
    buf = _PENDING.pop(key, "") + text
    if "\n" not in buf:
        _PENDING[key] = buf
        state = buf.rsplit("\r", 1)[-1] or buf.rstrip("\r").rsplit("\r", 1)[-1]
        if "\r" in buf and state.strip():
            _show_live(key, state)
        return
    done, _PENDING[key] = buf.rsplit("\n", 1)
    lines = [line.rsplit("\r", 1)[-1] for line in done.split("\n")]
    if key in _LIVE:  # the redrawn line has ended: its display keeps the final state
        _show_live(key, lines.pop(0), final=True)
    out = sys.stderr if stream == "stderr" else sys.stdout
    if lines:
        out.write("\n".join(lines) + "\n")
        out.flush()


def flush() -> None:
    """Print what ranks wrote without a final newline (called when a launch ends) (01, 03)."""
    for (rank, stream), text in list(_PENDING.items()):
        last = text.rsplit("\r", 1)[-1] or text.rstrip("\r").rsplit("\r", 1)[-1]
        if (rank, stream) in _LIVE:
            _show_live((rank, stream), last, final=True)
        elif last.strip():
            (sys.stderr if stream == "stderr" else sys.stdout).write(last + "\n")
    _PENDING.clear()
    _LIVE.clear()
