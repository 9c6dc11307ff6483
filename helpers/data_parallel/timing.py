"""Timing a step of work on CPU or GPU honestly: wait for the GPU before reading the clock (02)."""
from __future__ import annotations

import contextlib
import time
from typing import Any, Callable, Iterator

import torch

__all__ = ["sync", "timing", "timed"]


def sync() -> None:
    """Wait for every queued GPU kernel on every GPU (no-op without CUDA), so a clock read after it is honest (02).

    ``torch.cuda.synchronize()`` with no argument waits for the current device only, so each device
    is synchronized by its index: a step that runs on several GPUs is done only when all of them are.
    """
    if torch.cuda.is_available():
        for d in range(torch.cuda.device_count()):
            torch.cuda.synchronize(d)


@contextlib.contextmanager
def timing(times: dict, name: str) -> Iterator[None]:
    """Add the ``with`` block's wall time (GPU included) to ``times[name]`` (02).

    The ``record`` hook the instruments give ``four_steps_gpu``: ``with timing(times, "scatter"): ...``.
    """
    sync()
    t0 = time.perf_counter()
    yield
    sync()
    times[name] = times.get(name, 0.0) + time.perf_counter() - t0


def timed(times: dict, name: str, fn: Callable[[], Any]) -> Any:
    """Run ``fn()``, add its wall time (GPU included) to ``times[name]``, return its result (02)."""
    with timing(times, name):
        return fn()
