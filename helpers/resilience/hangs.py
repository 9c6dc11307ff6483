"""When a job hangs instead of dying (10): ranks that call different collectives, a rank that skips one.

A collective waits until every rank of the group has called it. Two ranks that call *different* collectives
at the same point, or a rank that never arrives, leave the others waiting until the process group's
timeout. Two tools say who is to blame sooner: with ``TORCH_DISTRIBUTED_DEBUG=DETAIL`` every collective is
first checked against the other ranks' (a fingerprint of its type and its tensors' shapes), and a mismatch
raises on every rank naming both calls; ``dist.monitored_barrier`` (gloo) waits with a timeout and names
the ranks that did not arrive. Both are in ``torch.distributed``'s docs ("Debugging torch.distributed
applications").
"""
from __future__ import annotations

import os
import re
import time
from contextlib import contextmanager
from datetime import timedelta
from typing import Iterator

import torch
import torch.distributed as dist

from ..core.i18n import tr

__all__ = ["debug_detail", "mismatched_collectives", "skipped_barrier", "what_it_said"]


@contextmanager
def debug_detail() -> Iterator[None]:
    """``TORCH_DISTRIBUTED_DEBUG=DETAIL`` for the processes launched inside the block; the old value after (10).

    The variable is read when a process group is made, so it must be set before the launch, not in the rank.
    """
    old = os.environ.get("TORCH_DISTRIBUTED_DEBUG")
    os.environ["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TORCH_DISTRIBUTED_DEBUG", None)
        else:
            os.environ["TORCH_DISTRIBUTED_DEBUG"] = old


def mismatched_collectives(rank: int, world_size: int) -> str:
    """Rank 0 calls ``all_reduce``, the others ``broadcast``, at the same point: the bug that hangs a job (10)."""
    t = torch.ones(4)
    if rank == 0:
        dist.all_reduce(t)
    else:
        dist.broadcast(t, src=0)
    return "returned"


def skipped_barrier(rank: int, world_size: int, timeout_s: float = 2.0) -> str:
    """Every rank but the last reaches ``monitored_barrier``; the last is busy elsewhere (10).

    The barrier gives up after ``timeout_s`` and raises on rank 0, naming the ranks that did not arrive
    (``wait_all_ranks=True``: all of them, not only the first).
    """
    if rank == world_size - 1:
        time.sleep(4 * timeout_s)  # stuck in its own work: it never calls the barrier in time
        return "never arrived"
    dist.monitored_barrier(timeout=timedelta(seconds=timeout_s), wait_all_ranks=True)
    return "passed"


def what_it_said(message: str) -> list[str]:
    """The lines of a failed launch's error that name the culprit, shortened (10): each rank's collective from
    DETAIL's mismatch report (its type and sequence number), or the ranks ``monitored_barrier`` missed.
    """
    said = [tr("10.hang_collective", "rank {rank}: {op} (sequence number {seq} in the group)", rank=r, op=op, seq=seq)
            for r, seq, op in
            re.findall(r"Rank (\d+) is running collective: CollectiveFingerPrint\(SequenceNumber=(\d+), OpType=(\w+)",
                       message)]
    said += re.findall(r"Ranks [\d, ]+ failed to pass monitoredBarrier in \d+ ms", message)
    return list(dict.fromkeys(said))   # each rank's error repeats what the others said: once each, in order
