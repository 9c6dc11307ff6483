"""DDP from scratch, checked and timed: the recipe's three versions against ``DistributedDataParallel`` (08).

Every version starts from the same parameters and trains on the same shares of the same batch;
after a few SGD steps its parameters must equal DDP's, and its step time is measured beside DDP's.
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from ..core.measure import max_abs_diff
from ..core.models import MLP
from ..dist.launcher import launch
from ..dist.ranks import agree, local_device
from ..dist.throughput import rank_share
from .instruments import seconds_per_call
from .recipe import OverlappedDDP, allreduce_gradients, allreduce_gradients_bucketed

__all__ = ["VARIANTS", "scratch_model", "scratch_ddp_worker", "run_scratch_ddp"]

VARIANTS = ("ddp", "per_parameter", "bucketed", "overlapped")


def scratch_model(hidden: tuple[int, ...] = (512, 512, 512), seed: int = 0) -> nn.Module:
    """The model DDP is rebuilt on: the course MLP on 8×8 digits, the same on every rank (08)."""
    torch.manual_seed(seed)
    return MLP(64, hidden, 10)


def _step_fn(variant: str, hidden: tuple[int, ...], bucket_bytes: int, lr: float, x: torch.Tensor,
             y: torch.Tensor) -> tuple[nn.Module, Callable[[], None]]:
    """The model of one variant and a function running one training step of it."""
    dev = x.device
    model = scratch_model(hidden).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    net: nn.Module = model
    sync: Callable[[], None] = lambda: None  # noqa: E731
    if variant == "ddp":
        net = DDP(model, device_ids=[dev.index] if dev.type == "cuda" else None)
    elif variant == "per_parameter":
        sync = lambda: allreduce_gradients(model)  # noqa: E731
    elif variant == "bucketed":
        sync = lambda: allreduce_gradients_bucketed(model, bucket_bytes)  # noqa: E731
    elif variant == "overlapped":
        wrapped = OverlappedDDP(model, bucket_bytes)
        net, sync = wrapped, wrapped.finish  # type: ignore[assignment]
    else:
        raise ValueError(f"unknown variant {variant!r}; choose from {VARIANTS}")

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(net(x), y).backward()
        sync()
        opt.step()

    return model, step


def scratch_ddp_worker(rank: int, world_size: int, variants: tuple[str, ...], hidden: tuple[int, ...], batch: int,
                       steps: int, timed_steps: int, repeats: int, bucket_bytes: int, lr: float) -> dict:
    """Train every variant ``steps`` SGD steps and compare with DDP; then time ``timed_steps`` steps of each (08).

    The variants' timings alternate within each of ``repeats`` rounds; each keeps its best round
    (the slowest rank's time), so a burst of outside load does not decide the comparison.
    """
    dev = local_device()
    x, y = (t.to(dev) for t in rank_share(batch, world_size, rank))
    runs = {v: _step_fn(v, hidden, bucket_bytes, lr, x, y) for v in variants}
    params = {}
    for v, (model, step) in runs.items():
        for _ in range(steps):
            step()
        params[v] = [p.detach().cpu().clone() for p in model.parameters()]
    best = {v: float("inf") for v in variants}
    for _ in range(repeats):
        for v, (_, step) in runs.items():
            dist.barrier()
            best[v] = min(best[v], agree(seconds_per_call(step, timed_steps, dev), "max"))
    ref = params.get("ddp")
    return {"step_s": best, "max_abs_diff": {v: max_abs_diff(p, ref) for v, p in params.items()} if ref else {},
            "parameters": sum(p.numel() for p in runs[variants[0]][0].parameters())}


def run_scratch_ddp(nprocs: int = 2, variants: tuple[str, ...] = VARIANTS, hidden: tuple[int, ...] = (512, 512, 512),
                    batch: int = 512, steps: int = 3, timed_steps: int = 5, repeats: int = 3,
                    bucket_bytes: int = 2**20, lr: float = 0.1, timeout: float = 180) -> dict:
    """DDP rebuilt three ways against DDP: parameters after ``steps`` steps and step times (08).

    Returns ``{"step_s": {variant: s}, "max_abs_diff": {variant: vs DDP}, "ratio": {variant: step / DDP's},
    "parameters", "processes"}``; ``batch`` is global, split evenly over the ranks.
    """
    if "ddp" not in variants:
        raise ValueError("the comparison needs 'ddp' among the variants")
    if batch % nprocs:
        raise ValueError(f"batch ({batch}) must divide evenly over {nprocs} processes")
    res = launch(scratch_ddp_worker, nprocs, args=(tuple(variants), tuple(hidden), batch, steps, timed_steps, repeats,
                                                   bucket_bytes, lr), timeout=timeout, verbose=False)[0]
    res["ratio"] = {v: s / res["step_s"]["ddp"] for v, s in res["step_s"].items()}
    res["processes"] = nprocs
    return res
