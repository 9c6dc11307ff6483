"""Model parallelism and pipelining: the code notebook 01 teaches (its recipe).

- :class:`TwoDeviceModel`: the lecture's plain split, ``seq1`` on one device, ``seq2`` on another.
- :func:`gpipe_step`: a hand-written GPipe schedule for two stages, one process each, with
  ``torch.distributed`` send/recv.
- :func:`build_schedule` / :func:`schedule_step`: the same with ``torch.distributed.pipelining``
  (``PipelineStage``, ``ScheduleGPipe``, ``Schedule1F1B``).
"""
from __future__ import annotations

from contextlib import nullcontext
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist
from torch import nn

from ..core.device import gpu_count
from ..core.i18n import tr

if TYPE_CHECKING:
    from torch.distributed.pipelining.schedules import _PipelineSchedule as PipelineSchedule

__all__ = ["two_devices", "TwoDeviceModel", "parameters_per_device", "make_stages", "synthetic_batch",
           "gpipe_step", "build_schedule", "schedule_step"]



def two_devices() -> tuple[torch.device, torch.device, str]:
    """Two devices for the two halves: cuda:0/cuda:1 when there are two GPUs, else what exists, said (01)."""
    n = gpu_count()
    if n >= 2:
        return torch.device("cuda:0"), torch.device("cuda:1"), tr("01.two_gpus", "two GPUs: seq1 on cuda:0, seq2 on "
                                                                                 "cuda:1")
    if n == 1:
        return (torch.device("cuda:0"), torch.device("cuda:0"),
                tr("01.one_gpu", "one GPU: both halves on cuda:0 (the code is the same; with two GPUs they would be "
                                 "on two)"))
    return (torch.device("cpu"), torch.device("cpu"),
            tr("01.no_gpu", "no GPU: both halves on the CPU (the code is the same; with two GPUs they would be on "
                            "two)"))


class TwoDeviceModel(nn.Module):
    """The model parallel split of PyTorch's tutorial: ``seq1`` on ``dev0``, ``seq2`` on ``dev1`` (01)."""

    def __init__(self, dev0: torch.device | str = "cpu", dev1: torch.device | str = "cpu", width: int = 256,
                 in_features: int = 64, num_classes: int = 10) -> None:
        super().__init__()
        self.dev0, self.dev1 = torch.device(dev0), torch.device(dev1)
        self.seq1 = nn.Sequential(nn.Flatten(), nn.Linear(in_features, width), nn.ReLU(),
                                  nn.Linear(width, width), nn.ReLU()).to(self.dev0)
        self.seq2 = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, num_classes)).to(self.dev1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.seq1(x.to(self.dev0))
        return self.seq2(x.to(self.dev1))  # the activation crosses devices here


def parameters_per_device(model: nn.Module) -> dict[str, int]:
    """How many parameters live on each device (01)."""
    out: dict[str, int] = {}
    for p in model.parameters():
        out[str(p.device)] = out.get(str(p.device), 0) + p.numel()
    return out


def make_stages(width: int = 512, depth: int = 4, num_classes: int = 10, seed: int = 0) -> list[nn.Sequential]:
    """Two stages, each ``depth`` Linear+ReLU layers of ``width`` (01).

    Equal in their ``depth`` layers only: the second also has a ``width`` → ``num_classes`` head, so more
    parameters, and in a pipeline its backward also computes its input's gradient, so more work (section 3).
    """
    for name, v in (("width", width), ("depth", depth)):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    torch.manual_seed(seed)

    def block() -> list[nn.Module]:
        return [nn.Linear(width, width), nn.ReLU()]

    s0 = nn.Sequential(*sum((block() for _ in range(depth)), []))
    s1 = nn.Sequential(*sum((block() for _ in range(depth)), []), nn.Linear(width, num_classes))
    return [s0, s1]


def synthetic_batch(batch: int, width: int = 512, num_classes: int = 10, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A fixed random batch (inputs and class targets) for timing the pipeline (01)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, width, generator=g), torch.randint(0, num_classes, (batch,), generator=g)


def _check_split(batch: int, m: int) -> None:
    if not isinstance(m, int) or m < 1:
        raise ValueError(f"the number of micro-batches must be a positive int, got {m!r}")
    if batch % m:
        raise ValueError(f"batch {batch} does not split into {m} equal micro-batches; choose m dividing the batch")


def gpipe_step(rank: int, stage: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor, m: int,
               width: int, record=None) -> None:
    """One training step of a hand-written 2-stage GPipe: all forwards, then all backwards (01).

    Each stage is its own process; activations go forward with ``isend``/``irecv``, gradients
    come back the same way. ``record`` (optional) is called as ``record("F" or "B", i)`` around
    micro-batch ``i``'s forward or backward and gives a ``with`` block: the instruments pass one
    that notes when each ran (``helpers.pipeline.instruments.StageTimeline``).
    """
    record = record or (lambda kind, i: nullcontext())
    dev = x.device
    opt.zero_grad(set_to_none=True)
    mb = x.shape[0] // m
    pending = []
    if rank == 0:
        grads = [torch.empty(mb, width, device=dev) for _ in range(m)]
        outs = []
        for i, xi in enumerate(x.chunk(m)):
            with record("F", i):
                out = stage(xi)
            pending.append(dist.isend(out.detach(), dst=1))
            outs.append(out)
        recvs = [dist.irecv(g, src=1) for g in grads]
        for i in range(m):
            recvs[i].wait()
            with record("B", i):
                outs[i].backward(grads[i])
    else:
        acts = [torch.empty(mb, width, device=dev) for _ in range(m)]
        recvs = [dist.irecv(a, src=0) for a in acts]
        losses = []
        for i, yi in enumerate(y.chunk(m)):
            recvs[i].wait()
            acts[i].requires_grad_(True)
            with record("F", i):
                losses.append(nn.functional.cross_entropy(stage(acts[i]), yi) / m)
        for i in range(m):
            with record("B", i):
                losses[i].backward()
            pending.append(dist.isend(acts[i].grad, dst=0))
    for w in pending:
        w.wait()
    opt.step()


def build_schedule(module: nn.Module, rank: int, world_size: int, device: torch.device, schedule: str = "gpipe",
                   n_microbatches: int = 4) -> "PipelineSchedule":
    """``torch.distributed.pipelining``: wrap this rank's stage and hand it to a schedule (01).

    ``schedule``: ``"gpipe"`` (all forwards, then all backwards) or ``"1f1b"`` (one forward,
    one backward, once the pipe is full). The loss is computed on the last stage.
    """
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

    classes = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}
    if schedule not in classes:
        raise ValueError(f"unknown schedule {schedule!r}; choose 'gpipe' or '1f1b'")
    stage = PipelineStage(module, rank, world_size, device)
    return classes[schedule](stage, n_microbatches=n_microbatches, loss_fn=nn.functional.cross_entropy)


def schedule_step(sched: "PipelineSchedule", rank: int, world_size: int, x: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
    """One training step: the first stage feeds the batch, the last one gets the targets and losses (01)."""
    losses: list[torch.Tensor] = []
    if rank == 0:
        sched.step(x)
    elif rank == world_size - 1:
        sched.step(target=y, losses=losses)
    else:
        sched.step()
    return losses
