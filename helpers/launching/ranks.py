"""Where each rank computes: the backend rule and the local-rank rule, in one place (01, 03, 05).

Every multi-process path of the course (the notebook launcher, the ``torchrun`` script, the
workers) asks these three functions, so the rules exist once:

- :func:`choose_backend`: ``nccl`` when this node has one GPU for each of its processes, else
  ``gloo`` (CPU tensors, works everywhere);
- :func:`local_rank`: the rank *on this node*, from ``LOCAL_RANK`` (``torchrun`` and
  :func:`helpers.launching.launcher.launch` set it). The global rank decides who prints and saves; the
  local rank decides which GPU. On node 1 of two 4-GPU nodes, global rank 5 is local rank 1 and
  computes on ``cuda:1``: there is no ``cuda:5``.
- :func:`local_device`: ``cuda:<local rank>`` under nccl, the CPU under gloo.
"""
from __future__ import annotations

import os

import torch
import torch.distributed as dist

from ..core.device import gpu_count
from ..core.i18n import tr


BACKENDS = ("gloo", "nccl")


def local_rank() -> int:
    """This process's rank on its node: ``LOCAL_RANK``, or 0 outside a launch (03)."""
    return int(os.environ.get("LOCAL_RANK", "0"))


def local_world_size() -> int:
    """How many processes run on this node: ``LOCAL_WORLD_SIZE``, or 1 outside a launch (03)."""
    return int(os.environ.get("LOCAL_WORLD_SIZE", "1"))


def choose_backend(nprocs: int, backend: str | None = None) -> str:
    """The backend for ``nprocs`` processes on this node: nccl with one GPU each, else gloo (01, 03).

    ``backend`` forces a choice, refused with the fix when it cannot work here.
    """
    if not isinstance(nprocs, int) or isinstance(nprocs, bool) or nprocs < 1:
        raise ValueError(f"nprocs must be a positive int, got {nprocs!r}")
    gpus = gpu_count()
    if backend is None:
        return "nccl" if gpus >= nprocs and dist.is_nccl_available() else "gloo"
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; use 'gloo' (CPU, works everywhere) or 'nccl' "
                         "(NVIDIA GPUs), or leave backend=None to choose automatically")
    if backend == "nccl":
        if gpus == 0:
            raise RuntimeError("backend 'nccl' needs NVIDIA GPUs and this machine has none; use backend='gloo' "
                               "(or backend=None, which picks gloo here)")
        if nprocs > gpus:
            raise RuntimeError(f"backend 'nccl' needs one GPU per process: {nprocs} processes but only {gpus} "
                               f"GPU(s); use nprocs<={gpus}, or backend='gloo'")
    return backend


def local_device(backend: str | None = None) -> torch.device:
    """The device this rank computes on: ``cuda:<local rank>`` under nccl, the CPU under gloo (01, 03).

    ``backend`` defaults to the running process group's, else to :func:`choose_backend` for the
    processes on this node.
    """
    if backend is None:
        backend = dist.get_backend() if dist.is_initialized() else choose_backend(local_world_size())
    return torch.device("cuda", local_rank()) if backend == "nccl" else torch.device("cpu")


def agree(value: float, op: str = "max") -> float:
    """The ``max`` (or ``min``) of ``value`` over all ranks, or rank 0's (``"rank0"``) (01, 03).

    What timed distributed steps need: the slowest rank sets a step's time, one clock start is
    shared, and rank 0 decides how many steps everyone runs. The scalar travels on this rank's
    device, since nccl reduces GPU tensors only.
    """
    if op not in ("max", "min", "rank0"):
        raise ValueError(tr("ranks.agree_op", "agree() takes op 'max', 'min' or 'rank0', got {op!r}", op=op))
    t = torch.tensor([value], dtype=torch.float64, device=local_device())
    if op == "rank0":
        dist.broadcast(t, 0)
    else:
        dist.all_reduce(t, op={"max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}[op])
    return t.item()
