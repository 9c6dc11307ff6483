"""Timing a step of work on CPU or GPU honestly: wait for the GPU before reading the clock (02)."""
from __future__ import annotations

import time
from typing import Any, Callable

import torch

__all__ = ["sync", "timed"]


def sync() -> None:
    """Wait for every queued GPU kernel (no-op without CUDA), so a clock read after it is honest (02)."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def timed(times: dict, name: str, fn: Callable[[], Any]) -> Any:
    """Run ``fn()``, add its wall time (GPU included) to ``times[name]``, return its result (02)."""
    sync()
    t0 = time.perf_counter()
    out = fn()
    sync()
    times[name] = times.get(name, 0.0) + time.perf_counter() - t0
    return out
