"""Out-of-memory troubleshooting: the code notebook 06 teaches (its recipe).

The models the lessons use, and :func:`find_largest_batch`: halve the batch on an
out-of-memory error until a step fits, then bisect, freeing memory outside the ``except``
block (inside it, the traceback still holds the failed step's tensors).
"""
from __future__ import annotations

import gc
from dataclasses import dataclass, field
from typing import Callable

import torch
from torch import nn

from ..core.saved import BudgetExceeded, SavedTensorTracker

__all__ = ["small_mlp", "Block", "deep_mlp", "is_oom", "BatchSearch", "find_largest_batch",
           "training_step_under_budget", "training_step_on_gpu", "step_model", "step_model_at"]


def small_mlp(seed: int = 0, hidden: int = 256) -> nn.Module:
    """The small MLP of the leak demonstration: 64 → 256 → 256 → 10 (06)."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Flatten(), nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, 10))


class Block(nn.Module):
    """Linear + ReLU of one width: the unit that activation checkpointing stores or recomputes (06)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.lin = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.lin(x))


def deep_mlp(blocks: int = 16, width: int = 256, seed: int = 0) -> nn.Sequential:
    """``blocks`` identical Linear+ReLU blocks (06)."""
    torch.manual_seed(seed)
    return nn.Sequential(*[Block(width) for _ in range(blocks)])


def is_oom(err: BaseException) -> bool:
    """Whether an exception is an out-of-memory error (CUDA's, MPS's, or the CPU budget's) (06)."""
    if isinstance(err, (BudgetExceeded, torch.cuda.OutOfMemoryError)):
        return True
    return isinstance(err, RuntimeError) and "out of memory" in str(err)


@dataclass
class BatchSearch:
    """The result of :func:`find_largest_batch`: the batch found and every size tried."""

    batch_size: int
    tried: list[tuple[int, bool]] = field(default_factory=list)  # (size, fitted)


def find_largest_batch(step: Callable[[int], object], start: int = 4096, minimum: int = 1,
                       refine: bool = True, tolerance: int | None = None) -> BatchSearch:
    """Largest batch size for which ``step(batch_size)`` runs without running out of memory (06).

    Halves from ``start`` until a step fits (retrying smaller on an out-of-memory error, the idea
    of Accelerate's ``find_executable_batch_size``), then, with ``refine``, bisects between the
    last size that failed (the one tried before it, not twice the size that fitted: from ``start=4097``
    the first fit is 2048 and 4096 may fit too) and the first that fitted until they are ``tolerance`` apart (default:
    1/64 of the size found, about 1.6 %; ``tolerance=1`` finds the exact limit). Memory is freed
    *outside* the ``except`` block: inside it, the traceback still references the failed step's
    tensors.
    """
    if not isinstance(start, int) or start < 1 or not isinstance(minimum, int) or minimum < 1:
        raise ValueError(f"start and minimum must be positive ints, got start={start!r}, minimum={minimum!r}")
    if tolerance is not None and (not isinstance(tolerance, int) or tolerance < 1):
        raise ValueError(f"tolerance must be a positive int (1 for the exact limit) or None, got {tolerance!r}")
    tried: list[tuple[int, bool]] = []

    def fits(bs: int) -> bool:
        failed = False
        try:
            step(bs)
        except Exception as e:  # only OOMs are retried; anything else is a real bug
            if not is_oom(e):
                raise
            failed = True
        if failed:  # outside the except block, so the failed step's frames can be freed
            gc.collect()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        tried.append((bs, not failed))
        return not failed

    bs, bad = start, None  # bad: the smallest size that failed (from an odd start, not twice the first fit)
    while not fits(bs):
        if bs <= minimum:
            raise RuntimeError(f"even batch size {minimum} does not fit; make the model smaller or free memory")
        bad, bs = bs, max(minimum, bs // 2)
    good = bs
    if refine and bad is not None:
        while bad - good > (tolerance if tolerance is not None else max(1, good // 64)):
            mid = (good + bad) // 2
            if fits(mid):
                good = mid
            else:
                bad = mid
    return BatchSearch(good, tried)


def training_step_under_budget(budget_bytes: int, width: int = 256, blocks: int = 4) -> Callable[[int], None]:
    """A training step of a deep MLP whose saved tensors must stay under ``budget_bytes`` (06, CPU path)."""
    model = deep_mlp(blocks, width)

    def step(batch_size: int) -> None:
        x = torch.randn(batch_size, width)
        with SavedTensorTracker(budget_bytes):
            loss = model(x).square().mean()
        loss.backward()
        model.zero_grad(set_to_none=True)

    return step


def training_step_on_gpu(width: int = 4096, blocks: int = 8) -> Callable[[int], None]:
    """A real training step on the GPU, for the search under a memory fraction (06, GPU path)."""
    model = deep_mlp(blocks, width).cuda()

    def step(batch_size: int) -> None:
        x = torch.randn(batch_size, width, device="cuda")
        model(x).square().mean().backward()
        model.zero_grad(set_to_none=True)
        torch.cuda.synchronize()

    return step


def step_model_at(commit: str, name: str = "training_step_on_gpu") -> str | None:
    """The model ``name`` trained by default at ``commit``, read with git from that commit's
    ``helpers/memory/recipe.py``: ``"deep_mlp(blocks=8, width=4096)"``; None where this clone's history
    lacks the commit (a shallow clone) (06)."""
    import ast
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    try:
        r = subprocess.run(["git", "-C", str(root), "show", f"{commit}:helpers/memory/recipe.py"],
                           capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if r.returncode:
        return None
    for node in ast.walk(ast.parse(r.stdout)):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            named = node.args.args[len(node.args.args) - len(node.args.defaults):]
            d = {a.arg: ast.literal_eval(v) for a, v in zip(named, node.args.defaults)}
            return f"deep_mlp(blocks={d['blocks']}, width={d['width']})"
    return None


def step_model(step_factory: Callable[..., Callable[[int], None]]) -> str:
    """The model a training-step factory trains with its defaults, read from its signature:
    ``"deep_mlp(blocks=4, width=256)"`` (06)."""
    import inspect

    params = inspect.signature(step_factory).parameters
    return f"deep_mlp(blocks={params['blocks'].default}, width={params['width'].default})"
