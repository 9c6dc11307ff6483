"""One DDP process against two, timed in turns inside one launch, so a slow moment hits both alike (02).

Two ranks start once. In each round rank 0 first trains alone (a DDP model on a process group of
rank 0 only, the whole global batch) while rank 1 waits at a barrier; then both train a DDP
model on the world group, each on half the batch. Every process is single-threaded (the
launcher's ``threads=1``); starting the processes is outside every timed loop. They run on the CPU
with gloo even where there are GPUs, so that notebook 02 compares them with its threads, which
run on the CPU, on the same cores.
"""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from ..core.data import digits_batch
from ..core.models import DigitsCNN
from ..launching.launcher import launch
from ..launching.timing import calls_to_fill, seconds_per_call, slowest_seconds_per_call

__all__ = ["process_rounds", "PROCESS_BACKEND"]

PROCESS_BACKEND = "gloo"  # CPU processes everywhere: the threads they are compared with run on the CPU


def _timed_steps(model: nn.Module, x: torch.Tensor, y: torch.Tensor, seconds: float, group: bool = False) -> float:
    """Seconds per step of ``model`` on (x, y), steps for about ``seconds``; ``group``: all ranks time it together."""
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    dev = torch.device("cpu")  # PROCESS_BACKEND
    n = calls_to_fill(step, seconds, dev, decide=group)  # in a group: rank 0's count for every rank
    if not group:
        return seconds_per_call(step, n, dev)
    return slowest_seconds_per_call(step, n, dev)  # all start together; the slowest sets the pace


def rounds_worker(rank: int, world_size: int, batch: int, seconds: float, rounds: int) -> dict:
    """Samples/s of 1 DDP process (rank 0 alone) and of 2 (both ranks), round by round (02)."""
    alone = dist.new_group([0])  # every rank takes part in creating a group
    x, y = digits_batch(batch)  # on the CPU, GPUs or not (PROCESS_BACKEND): DDP's module stays there too
    torch.manual_seed(0)
    one = DDP(DigitsCNN(), process_group=alone) if rank == 0 else None
    both = DDP(DigitsCNN())
    half = batch // world_size
    xs, ys = x[rank * half:(rank + 1) * half], y[rank * half:(rank + 1) * half]
    res: dict[int, list[float]] = {1: [], 2: []}
    for _ in range(rounds):
        dist.barrier()
        if rank == 0:
            res[1].append(batch / _timed_steps(one, x, y, seconds))
        dist.barrier()  # rank 1 waits here while rank 0 trains alone
        res[2].append(batch / _timed_steps(both, xs, ys, seconds, group=True))
    return res


def process_rounds(batch: int = 256, seconds: float = 0.3, rounds: int = 3) -> dict:
    """``{1: [samples/s per round], 2: [...]}``: one DDP process on the whole batch, then two on half each (02).

    On the CPU with gloo (:data:`PROCESS_BACKEND`) also where there are GPUs: the threads they are
    compared with run on the CPU.
    """
    return launch(rounds_worker, 2, args=(batch, seconds, rounds), backend=PROCESS_BACKEND, verbose=False,
                  timeout=180)[0]
