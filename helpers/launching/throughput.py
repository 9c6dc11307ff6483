"""Samples per second of DDP training with 1, 2, … processes at the same global batch (02, 03).

The instrument both notebooks use to compare processes: every process single-threaded, the same
global batch split over them, a timed loop whose length rank 0 decides, the slowest rank's time.
A communication hook counts the gradient buckets all-reduced and their bytes.
"""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from ..core.data import digits_batch
from ..core.models import DigitsCNN
from .launcher import launch
from .ranks import choose_backend, local_device
from .timing import calls_to_fill, slowest_seconds_per_call


def rank_share(global_batch: int, world_size: int, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's equal share of a global batch of digits (02, 03)."""
    x, y = digits_batch(global_batch)
    local = global_batch // world_size
    return x[rank * local:(rank + 1) * local], y[rank * local:(rank + 1) * local]


def _ddp(model: nn.Module, device: torch.device) -> DDP:
    return DDP(model, device_ids=[device.index] if device.type == "cuda" else None)


class BucketCounter:
    """A DDP communication hook that counts the gradient buckets it all-reduces (03)."""

    def __init__(self) -> None:
        self.calls = 0
        self.bytes = 0

    @staticmethod
    def hook(state, bucket):  # no annotations: DDP checks them, and this module's are strings

        state.calls += 1
        buf = bucket.buffer()
        state.bytes += buf.numel() * buf.element_size()
        fut = dist.all_reduce(buf.div_(dist.get_world_size()), async_op=True).get_future()
        return fut.then(lambda f: f.value()[0])


def throughput_worker(rank: int, world_size: int, batches: list[int], seconds: float, channels: tuple[int, int],
                      hidden: int) -> list[dict]:
    """Samples/s of DDP training at each global batch size, measured for ``seconds`` each (03)."""
    device = local_device()
    torch.manual_seed(0)
    model = _ddp(DigitsCNN(channels=channels, hidden=hidden).to(device), device)
    counter = BucketCounter()
    model.register_comm_hook(counter, BucketCounter.hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    out = []
    for gb in batches:
        x, y = (t.to(device) for t in rank_share(gb, world_size, rank))

        def step() -> None:
            opt.zero_grad(set_to_none=True)
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()

        n = calls_to_fill(step, seconds, device)  # every rank runs rank 0's count
        counter.calls = counter.bytes = 0
        dt = slowest_seconds_per_call(step, n, device) * n  # the slowest rank sets the pace
        out.append({"global_batch": gb, "steps": n, "step_s": dt / n, "samples_per_s": gb * n / dt,
                    "buckets_per_step": counter.calls / n, "allreduce_bytes_per_step": counter.bytes / n})
    return out


def run_throughput(nprocs_list: tuple[int, ...] = (1, 2), batches: tuple[int, ...] = (64, 256, 1024),
                   seconds: float = 1.5, channels: tuple[int, int] = (16, 32), hidden: int = 64, repeats: int = 2,
                   timeout: float = 120) -> list[dict]:
    """Throughput of DDP with each process count, every process single-threaded, same global batches (03).

    The process counts are measured in turn, ``repeats`` times, and the best run of each is kept:
    on a shared machine a burst of outside load slows one run, never speeds one up.
    """
    best: dict[tuple[int, int], dict] = {}
    backend = choose_backend(max(nprocs_list))  # the same backend (and devices) for every process count
    for _ in range(repeats):
        for n in nprocs_list:
            res = launch(throughput_worker, n, args=(list(batches), seconds, channels, hidden), timeout=timeout,
                         backend=backend, verbose=False)[0]
            for r in res:
                key = (n, r["global_batch"])
                if key not in best or r["samples_per_s"] > best[key]["samples_per_s"]:
                    best[key] = {"processes": n, **r}
    rows = [best[(n, b)] for n in nprocs_list for b in batches]
    base = {r["global_batch"]: r["samples_per_s"] for r in rows if r["processes"] == nprocs_list[0]}
    for r in rows:
        r["speedup"] = r["samples_per_s"] / base[r["global_batch"]]
    return rows
