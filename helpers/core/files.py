"""Folders the course's helpers write into: never delete what they did not create (05, 07).

A monitoring run, a TensorBoard log or a checkpoint folder is written by a helper, and a rerun of
the notebook should start it afresh rather than append to it. :class:`OwnedFolder` makes that
safe: a helper *claims* a folder that is new or empty, leaves a small manifest in it, and on the
next run removes only the files that manifest lists. A folder that already holds anything else
(your notebook, your own runs) is refused with an error that says which folder to use instead.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path


MANIFEST = ".written-by-beyond-one-gpu.json"


def user_path(path: str | os.PathLike) -> Path:
    """``path`` with ``~`` expanded, absolute: every path a student passes to a helper (05, 07)."""
    return Path(os.path.expandvars(os.fspath(path))).expanduser().absolute()


class OwnedFolder:
    """A folder a helper writes into and may clear on its next run, removing only what it wrote (05).

    ``claim()`` before writing, ``seal()`` after: the manifest then lists every file the helper
    wrote. A run that never sealed (the kernel died) is cleared by age: only files created after
    that run claimed the folder are removed.
    """

    def __init__(self, path: str | os.PathLike, owner: str) -> None:
        self.path = user_path(path)
        self.owner = owner

    @property
    def manifest(self) -> Path:
        return self.path / MANIFEST

    def claim(self) -> Path:
        """Make the folder ready for a fresh run: create it, or clear what this course wrote there before."""
        if self.path.exists() and not self.path.is_dir():
            raise NotADirectoryError(f"{self.owner} needs a folder, and {self.path} is a file; pass a folder name "
                                     "such as 'runs/my_run'")
        if self.path.is_dir():
            if self.manifest.exists():
                self._clear_previous_run()
            elif any(self.path.iterdir()):
                raise FileExistsError(
                    f"{self.owner} writes each run into a folder of its own, and {self.path} already holds files it did "
                    f"not write (for example {next(iter(sorted(p.name for p in self.path.iterdir())))!r}). Nothing was "
                    "deleted. Pass a new folder, such as 'runs/my_run'.")
        self.path.mkdir(parents=True, exist_ok=True)
        self.manifest.write_text(json.dumps({"owner": self.owner, "claimed_at": time.time(), "files": None}))
        return self.path

    def seal(self) -> None:
        """Record every file now in the folder as written by this run (call when done writing)."""
        info = json.loads(self.manifest.read_text())
        info["files"] = sorted(str(p.relative_to(self.path)) for p in self.path.rglob("*")
                               if p.is_file() and p.name != MANIFEST)
        self.manifest.write_text(json.dumps(info))

    def _clear_previous_run(self) -> None:
        info = json.loads(self.manifest.read_text())
        if info.get("files") is not None:
            doomed = [self.path / f for f in info["files"]]
        else:  # the last run never sealed: remove what appeared after it claimed the folder
            since = info.get("claimed_at", float("inf"))
            doomed = [p for p in self.path.rglob("*") if p.is_file() and p.name != MANIFEST
                      and p.stat().st_mtime >= since]
        emptied: set[Path] = set()
        for f in doomed:
            if f.is_file() and self.path in f.resolve().parents:
                f.unlink()
                emptied.update(p for p in f.parents if self.path in p.parents)
        for d in sorted(emptied, key=lambda p: -len(p.parts)):  # deepest first
            if d.is_dir() and not any(d.iterdir()):  # a folder the run's files were in, now empty
                d.rmdir()
        self.manifest.unlink()
