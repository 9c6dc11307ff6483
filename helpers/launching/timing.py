"""One distributed timer: every rank starts together, the device is waited for, the slowest rank's time wins (03, 08, 09).

Every timed loop of the multi-process lessons goes through :func:`slowest_seconds_per_call`: a
barrier so that no rank starts its clock while another is still busy with earlier work, the
device synchronised before the clock starts and after the calls (CUDA runs kernels, nccl's too,
after the call that queued them returns), and the largest time over the ranks, since a step is
done only when its slowest rank is. What the lessons build on it (the best of several repeats,
their spread, a fresh order each round, warm-up calls) stays where the lesson uses it.
"""
from __future__ import annotations

import time
from typing import Callable

import torch
import torch.distributed as dist

from .ranks import agree, local_device

__all__ = ["synchronize", "seconds_per_call", "slowest_seconds_per_call", "calls_to_fill"]


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work: CUDA runs kernels (nccl's too) after the call returns (03, 08, 09).

    A timer that reads the clock without it measures how fast work is queued, not how fast it runs.
    On a CPU there is nothing to wait for, and CUDA is never touched.
    """
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def seconds_per_call(fn: Callable[[], object], inner: int, device: torch.device) -> float:
    """Seconds per call of ``fn``, over ``inner`` calls, the device synchronised before and after (03, 08, 09).

    This rank's time only; :func:`slowest_seconds_per_call` is the one to use between ranks.
    """
    synchronize(device)
    t0 = time.perf_counter()
    for _ in range(inner):
        fn()
    synchronize(device)
    return (time.perf_counter() - t0) / inner


def slowest_seconds_per_call(fn: Callable[[], object], inner: int = 1, device: torch.device | None = None) -> float:
    """The slowest rank's seconds per call of ``fn`` over ``inner`` calls, all ranks starting together (03, 08, 09).

    A barrier, then :func:`seconds_per_call` on ``device`` (this rank's,
    :func:`helpers.launching.ranks.local_device`, by default), then the largest value over all ranks
    (:func:`helpers.launching.ranks.agree`). Every rank must call it, the same number of times.
    """
    device = local_device() if device is None else device
    dist.barrier()
    return agree(seconds_per_call(fn, inner, device), "max")


def calls_to_fill(fn: Callable[[], object], seconds: float, device: torch.device, decide: bool = True,
                  warmup: int = 3, probe: int = 3, least: int = 3) -> int:
    """How many calls of ``fn`` take about ``seconds`` here: ``warmup`` calls, then ``probe`` timed ones (02, 03).

    At least ``least``. With ``decide`` (every rank must call it), rank 0's count for every rank, so
    that all ranks run the same number of steps, and of collectives.
    """
    for _ in range(warmup):
        fn()
    n = max(least, int(seconds / seconds_per_call(fn, probe, device)))
    return int(agree(float(n), "rank0")) if decide else n
