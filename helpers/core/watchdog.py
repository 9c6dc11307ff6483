"""The watchdog that :func:`helpers.core.procs.watch_parent` starts: it cleans up if the kernel dies (03, 04).

Run as ``python helpers/core/watchdog.py PARENT MARKER [GROUP ...]``: it waits until process
``PARENT`` is gone, then SIGKILLs the process groups ``GROUP`` and this user's processes marked
with ``MARKER`` (:func:`helpers.core.procs.session_processes`; an empty marker: none), and exits.

It is started by the path of this file, not with ``-m helpers.core.watchdog``: ``-m`` imports the
``helpers`` package first, and with it torch (seconds, and hundreds of MB kept for the whole
session); by path, it holds only psutil while it waits. Nor does the child need ``helpers`` to
be installed: it puts the folder that holds this copy of ``helpers`` on its path itself, which
works in an editable install, a checkout on ``PYTHONPATH`` and Colab's cloned course alike.
"""
from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import psutil


def main(argv: list[str]) -> None:
    """Wait until process ``argv[0]`` is gone, then kill the process groups ``argv[2:]`` and this user's processes
    marked with ``argv[1]`` (03, 04)."""
    parent, marker, groups = int(argv[0]), argv[1], [int(g) for g in argv[2:]]
    while _alive(parent):
        time.sleep(1)
    for g in groups:
        try:
            os.killpg(g, signal.SIGKILL)
        except OSError:
            pass
    if marker:
        from helpers.core.procs import session_processes  # only now: it imports the helpers package, torch with it

        for p in session_processes(marker):
            try:
                p.kill()
            except psutil.Error:
                pass


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:  # gone, also between looking it up and asking its status
        return False


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    # the folder that holds helpers/, in place of helpers/core/ (whose modules would shadow others of their names)
    sys.path = [str(here.parents[1])] + [p for p in sys.path if Path(p or ".").resolve() != here]
    main(sys.argv[1:])
