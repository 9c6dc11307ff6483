"""Small worker functions for launched processes: notebook 03's demonstrations and its first failure (03).

Launched processes import the function they run, so workers live in a module like this one.
Each is called as ``fn(rank, world_size, *args)`` by :func:`helpers.launching.launcher.launch`.
The failure drills that only the tests run (a hung rank, a killed one, one that ignores SIGTERM, ...)
are in tests/launch_drills.py.
"""
from __future__ import annotations

import os

import torch
import torch.distributed as dist

from .ranks import local_device


def whoami(rank: int, world_size: int) -> dict:
    """Rank, world size, backend and process id of each rank, and the device its process group is bound to (03, 09)."""
    bound = getattr(dist.group.WORLD, "bound_device_id", None)
    return {"rank": rank, "world_size": world_size, "backend": dist.get_backend(), "pid": os.getpid(),
            "threads": torch.get_num_threads(), "bound_device": None if bound is None else str(bound)}


def all_reduce_sum(rank: int, world_size: int) -> float:
    """Each rank contributes rank+1; all_reduce sums them: every rank returns n(n+1)/2 (03)."""
    t = torch.tensor([float(rank + 1)], device=local_device())  # nccl reduces GPU tensors only
    dist.all_reduce(t)
    return t.item()


def fail_on_rank(rank: int, world_size: int, bad_rank: int = 1) -> int:
    """Rank ``bad_rank`` raises; the others wait in a collective that will never complete (03's failure drill)."""
    if rank == bad_rank:
        raise ValueError(f"rank {rank} hit a bug on purpose")
    dist.barrier()
    return rank
