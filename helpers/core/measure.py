"""Measuring, the same way everywhere: seeds, timers, thread counts, differences, threads side by side (all notebooks)."""
from __future__ import annotations

import os
import random
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator

import numpy as np
import torch


def seed_everything(seed: int = 0) -> None:
    """Seed Python, NumPy and torch (CPU and every GPU) so that a notebook reruns the same.

    Used by every notebook (00 onwards). Two things it does not do: a ``torch.Generator`` made
    elsewhere (``make_loaders`` gives the training loader its own, seeded by its ``seed``) keeps
    its state, so build the loaders again for the same shuffles; and ``PYTHONHASHSEED`` is only
    written to the environment, for the processes this one starts: this interpreter's string
    hashing was fixed when it started (https://docs.python.org/3/using/cmdline.html#envvar-PYTHONHASHSEED).
    """
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}; e.g. seed_everything(0)")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device
    os.environ["PYTHONHASHSEED"] = str(seed)


class Timer:
    """Wall-clock timer: ``with Timer() as t: ...`` then ``t.seconds`` (00_setup and after).

    ``sync`` waits for a CUDA device before reading the clock, so GPU timings are honest.
    """

    def __init__(self, sync: torch.device | str | None = None) -> None:
        self.sync = torch.device(sync) if sync is not None else None
        self.seconds = 0.0
        self._start = 0.0

    def _synchronize(self) -> None:
        if self.sync is not None and self.sync.type == "cuda":
            torch.cuda.synchronize(self.sync)

    def __enter__(self) -> "Timer":
        self._synchronize()
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self._synchronize()
        self.seconds = time.perf_counter() - self._start

    def __repr__(self) -> str:
        return f"Timer({self.seconds:.3f} s)"


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run a block with ``torch.set_num_threads(n)``, restoring the old value after (01, 02)."""
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"thread count must be an int >= 1, got {n!r}")
    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def max_abs_diff(a: Iterable[torch.Tensor], b: Iterable[torch.Tensor]) -> float:
    """The largest absolute difference between two lists of tensors, element by element (02, 03, 06).

    How the course says "equal to float rounding": two trainings that should give the same
    parameters or gradients are compared with this, on the CPU.
    """
    pairs = list(zip(a, b))
    if not pairs:
        raise ValueError("max_abs_diff() got nothing to compare")
    return max((x.detach().cpu() - y.detach().cpu()).abs().max().item() for x, y in pairs)


def run_threads(fn: Callable[[int], None], n: int) -> None:
    """Run ``fn(0) … fn(n - 1)`` in ``n`` Python threads at once and wait for all (02).

    An exception in any thread is raised here, after every thread has finished.
    """
    errors: list[BaseException] = []

    def target(i: int) -> None:
        try:
            fn(i)
        except BaseException as e:  # re-raised in the caller's thread below
            errors.append(e)

    threads = [threading.Thread(target=target, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def fit_alpha_beta(nbytes: Iterable[float], seconds: Iterable[float]) -> tuple[float, float]:
    """Fit ``time = α + bytes · β`` by least squares on relative errors (08, 09).

    Relative, so that a 1 KB message (α dominates) counts as much as a 16 MB one (β dominates);
    plain least squares on seconds would let the largest messages decide alone.
    """
    b, t = np.asarray(list(nbytes), dtype=float), np.asarray(list(seconds), dtype=float)
    a = np.stack([np.ones_like(b), b], axis=1) / t[:, None]
    alpha, beta = np.linalg.lstsq(a, np.ones_like(t), rcond=None)[0]
    return float(alpha), float(beta)
