"""Folders the course's helpers write into: never delete what they did not create (05, 07).

A monitoring run, a TensorBoard log or a checkpoint folder is written by a helper, and a rerun of
the notebook should start it afresh rather than append to it. :class:`OwnedFolder` makes that
safe: a helper declares the names it writes (``writes``: glob patterns), *claims* a folder that is
new or empty, leaves a small manifest in it, and on the next run removes only its own files:
those the manifest lists, or, when the last run never finished (the kernel died), those that
match its patterns and appeared after that run's claim. A file of yours is never one of them, in
that folder or below it. A folder that already holds anything else (your notebook, your own
runs) is refused with an error that says which folder to use instead.

While a helper writes, it holds the folder's lock (``.beyond-one-gpu.lock``, with its process id):
a second helper on the same folder, in this process or another, is refused with the holder's pid
instead of deleting the first one's live files. The lock dies with its process, so the folder
of a kernel that was killed is taken over by the next run.
"""
from __future__ import annotations

import json
import os
import socket
import tempfile
import time
import weakref
from pathlib import Path

from .i18n import tr

try:
    import fcntl
except ImportError:  # Windows: the pid in the lock file decides
    fcntl = None

MANIFEST = ".written-by-beyond-one-gpu.json"
LOCK = ".beyond-one-gpu.lock"
_BOOKKEEPING = (MANIFEST, LOCK, MANIFEST + ".tmp")
_SLACK_S = 2.0  # file times come from a coarser clock than time.time() (and FAT/FUSE round them)
_HELD: "weakref.WeakValueDictionary[str, OwnedFolder]" = weakref.WeakValueDictionary()  # this process's holds


class FolderInUseError(FileExistsError):
    """The folder is being written by a live helper, in this process or another; nothing was changed (05)."""


_PRIVATE: dict[str, Path] = {}


def private_folder(prefix: str) -> Path:
    """This user's own folder ``<tmp>/<prefix><uid>`` (mode 700), made once per process (04, 05).

    A fixed shared name in /tmp can already exist on a shared machine, made by someone else and
    writable by all: if it is not ours and private, a fresh ``mkdtemp`` folder (mode 700) is used.
    """
    if prefix in _PRIVATE and _PRIVATE[prefix].is_dir():
        return _PRIVATE[prefix]
    path = Path(tempfile.gettempdir()) / f"{prefix}{os.getuid()}"
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        st = path.lstat()
        if path.is_symlink() or st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise PermissionError(f"{path} is not private to this user")
    except OSError:
        path = Path(tempfile.mkdtemp(prefix=prefix))
    _PRIVATE[prefix] = path
    return path


def user_path(path: str | os.PathLike) -> Path:
    """``path`` with ``~`` expanded, absolute: every path a student passes to a helper (05, 07)."""
    return Path(os.path.expandvars(os.fspath(path))).expanduser().absolute()


def _started(pid: int) -> float | None:
    """When process ``pid`` started (seconds since the epoch), or None if there is no such process."""
    try:
        import psutil
    except ImportError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return 0.0
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def _holder_alive(holder: dict) -> bool:
    """Whether the process a lock file names is still the one that took it (not a pid reused since)."""
    if holder.get("host") != socket.gethostname():
        return True  # another machine sharing the folder: its processes cannot be seen from here
    started = _started(int(holder.get("pid", -1)))
    return started is not None and (started == 0.0 or abs(started - holder.get("started", 0)) < 1)


def _forget_locks_in_child() -> None:
    """A forked child (a DataLoader worker) holds none of its parent's folders: the lock ends with the parent."""
    for folder in list(_HELD.values()):
        f, folder._lock_file = folder._lock_file, None
        if f is not None:
            f.close()  # this copy only: the parent's lock stays (only LOCK_UN, or its last copy closing, ends it)
    _HELD.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_locks_in_child)


class OwnedFolder:
    """A folder a helper writes into and may clear on its next run, removing only what it wrote (05).

    ``claim()`` before writing, ``seal()`` after (or ``release()`` when giving up): the manifest
    then lists every file the helper wrote, i.e. every file that matches ``writes``. A run that
    never sealed (the kernel died) is cleared by pattern and age: only files matching ``writes``
    created after that run claimed the folder are removed.
    """

    def __init__(self, path: str | os.PathLike, owner: str, writes: tuple[str, ...] | list[str]) -> None:
        self.path = user_path(path)
        self.owner = owner
        self.writes = tuple(writes)
        self._lock_file = None

    @property
    def manifest(self) -> Path:
        return self.path / MANIFEST

    def claim(self) -> Path:
        """Make the folder ready for a fresh run: create it, or clear what this course wrote there before."""
        if self.path.exists() and not self.path.is_dir():
            raise NotADirectoryError(tr("files.not_a_folder", "{owner} needs a folder, and {path} is a file; pass a "
                                        "folder name such as 'runs/my_run'", owner=self.owner, path=self.path))
        if self.path.is_dir() and not self.manifest.exists():
            foreign = sorted(p.name for p in self.path.iterdir() if p.name not in _BOOKKEEPING)
            if foreign:
                raise FileExistsError(tr(
                    "files.foreign", "{owner} writes each run into a folder of its own, and {path} already holds files "
                    "it did not write (for example {example!r}). Nothing was deleted. Pass a new folder, such as "
                    "'runs/my_run'.", owner=self.owner, path=self.path, example=foreign[0]))
        self.path.mkdir(parents=True, exist_ok=True)
        self._lock()
        try:
            if self.manifest.exists():
                self._clear_previous_run()
            self._write_manifest({"owner": self.owner, "claimed_at": time.time(), "writes": list(self.writes),
                                  "files": None})
        except BaseException:
            self.release()
            raise
        return self.path

    def seal(self) -> None:
        """Record every file this run wrote (those matching ``writes``), then let go of the folder."""
        if self._lock_file is None:  # not claimed, or already sealed: another run may own the folder now
            return
        info = self._read_manifest()
        if info:
            info["files"] = sorted(str(p.relative_to(self.path)) for p in self._written_since(info.get("claimed_at")))
            self._write_manifest(info)
        self.release()

    def release(self) -> None:
        """Let go of the folder's lock (``seal`` does it); the next run may claim the folder (05)."""
        if _HELD.get(str(self.path)) is self:
            del _HELD[str(self.path)]
        f, self._lock_file = self._lock_file, None
        if f is not None:
            f.seek(0)
            f.truncate()  # no holder named any more; the file stays (removing it races with a waiting claim)
            if fcntl is not None:
                try:  # explicitly: a forked child (a DataLoader worker) may share the open file
                    fcntl.flock(f, fcntl.LOCK_UN)
                except OSError:
                    pass
            f.close()

    # --- the lock -------------------------------------------------------------------------------------------

    def _lock(self) -> None:
        """Take the folder's lock, or raise :class:`FolderInUseError` naming the live process that holds it."""
        key = str(self.path)
        if key in _HELD:
            raise FolderInUseError(self._in_use(self._holder(), here=True))
        f = open(self.path / LOCK, "a+")
        try:
            if fcntl is None:
                raise OSError("no flock here")
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # another open lock: a live helper in another process (or a forked child)
            f.close()
            raise FolderInUseError(self._in_use(self._holder(), here=False)) from None
        except OSError:  # a filesystem without flock (some network drives): the pid in the lock decides
            holder = self._holder()
            if holder and _holder_alive(holder):
                f.close()
                raise FolderInUseError(self._in_use(holder, here=holder.get("pid") == os.getpid())) from None
        f.seek(0)
        f.truncate()
        f.write(json.dumps({"owner": self.owner, "pid": os.getpid(), "started": _started(os.getpid()),
                            "host": socket.gethostname(), "since": time.time()}))
        f.flush()
        self._lock_file = f
        _HELD[key] = self

    def _holder(self) -> dict:
        try:
            return json.loads((self.path / LOCK).read_text() or "{}")
        except (OSError, ValueError):
            return {}

    def _in_use(self, holder: dict, here: bool) -> str:
        owner = holder.get("owner", self.owner)
        since = time.strftime("%H:%M:%S", time.localtime(holder.get("since", time.time())))
        if here:
            who = tr("files.holder_here", "a {owner} in this process (pid {pid}, since {since})", owner=owner,
                     pid=os.getpid(), since=since)
        elif "pid" in holder:
            who = tr("files.holder_other", "a {owner} in process {pid} on {host} (since {since})", owner=owner,
                     pid=holder["pid"], host=holder.get("host", "?"), since=since)
        else:  # it let go, but a process it started (a DataLoader worker, say) still has the lock open
            who = tr("files.holder_unknown", "a process started by the last {owner} there, still running",
                     owner=owner)
        return tr("files.in_use",
                  "{path} is in use: {who} is writing there. Nothing was changed. Close that one first (its "
                  ".close(), or let its `with` block end; or stop that process), or pass another folder, such as "
                  "'{suggestion}'.", path=self.path, who=who, suggestion=f"{self.path.name}_2")

    # --- what this helper wrote ---------------------------------------------------------------------------

    def _read_manifest(self) -> dict:
        try:
            return json.loads(self.manifest.read_text())
        except (OSError, ValueError):  # cut short by a crash while it was written: a run that never sealed
            return {}

    def _write_manifest(self, info: dict) -> None:
        tmp = self.path / (MANIFEST + ".tmp")
        tmp.write_text(json.dumps(info))
        os.replace(tmp, self.manifest)  # readers see the old manifest or the new one, never half of one

    def _written_since(self, claimed_at: float | None, writes: tuple[str, ...] | None = None) -> list[Path]:
        """Files (and links) matching the patterns that appeared after ``claimed_at``; a matched folder counts whole."""
        since = (claimed_at or 0.0) - _SLACK_S
        found: set[Path] = set()
        for pattern in writes or self.writes:
            for m in self.path.glob(pattern):
                if m.name in _BOOKKEEPING or m.lstat().st_mtime < since:
                    continue
                if m.is_dir() and not m.is_symlink():
                    found.update(p for p in m.rglob("*") if p.is_symlink() or not p.is_dir())
                else:
                    found.add(m)
        return sorted(found)

    def _clear_previous_run(self) -> None:
        info = self._read_manifest()
        writes = tuple(info.get("writes") or self.writes)
        ours = set(self._written_since(None, writes))
        if info.get("files") is not None:  # sealed: what it listed (and that is still of the kind it writes)
            doomed = [f for f in (self.path / f for f in info["files"]) if f in ours]
        else:  # never sealed: what it writes, that appeared after it claimed the folder
            doomed = self._written_since(info.get("claimed_at", float("inf")), writes)
        root = self.path.resolve()
        emptied: set[Path] = set()
        for f in doomed:
            parent = f.parent.resolve()
            if (f.is_symlink() or f.is_file()) and (parent == root or root in parent.parents):
                f.unlink()
                emptied.update(p for p in f.parents if self.path in p.parents)
        for pattern in writes:  # folders a helper made (wandb's run folders), left empty
            emptied.update(p for m in self.path.glob(pattern) if m.is_dir() and not m.is_symlink()
                           for p in (m, *m.rglob("*")) if p.is_dir() and not p.is_symlink())
        for d in sorted(emptied, key=lambda p: -len(p.parts)):  # deepest first
            if d.is_dir() and not any(d.iterdir()):  # a folder the run's files were in, now empty
                d.rmdir()
        self.manifest.unlink()
