"""What the Monitor's and TensorBoard's fault drills share: a Python process standing in for a notebook kernel, waits
on its output and its end, and the module fixture that stops the wandb-core service a module's tests started
(tests/test_monitor_faults.py, test_wandb_faults.py, test_tensorboard_faults.py)."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import psutil
import pytest

from conftest import ROOT


@pytest.fixture(autouse=True, scope="module")
def _stop_wandb_service():
    """Stop the wandb-core service these tests start, so later tests and kernels do not inherit it."""
    yield
    import wandb

    wandb.teardown()


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _wait_gone(pid: int, seconds: float) -> bool:
    """Whether ``pid`` ended within ``seconds`` (polled: the event is the process's end)."""
    deadline = time.monotonic() + seconds
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    return not _alive(pid)


def _kernel(script: str, *args: str) -> subprocess.Popen:
    """A Python process standing in for a notebook kernel, importing the helpers of this checkout."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-c", script, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def _line(proc: subprocess.Popen, word: str, seconds: float) -> str:
    """The first line of ``proc``'s output that starts with ``word``, waiting at most ``seconds``."""
    got: list[str] = []

    def read():
        for line in proc.stdout:
            if line.startswith(word):
                got.append(line.strip())
                return

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(seconds)
    if not got:
        proc.kill()
        raise AssertionError(f"no {word!r} line within {seconds} s; stderr: {proc.stderr.read()[-3000:]}")
    return got[0]
