"""Collectives, measured: who holds what before and after each one, the hand-written ring checked, and timed (08).

The instruments of notebook 08: they run ``torch.distributed``'s collectives and the recipe's
ring on real processes, check the ring against ``all_reduce``, sweep message sizes, fit the α–β
cost model and convert times to bus bandwidth the way nccl-tests does.
"""
from __future__ import annotations

import contextlib
import tempfile
import time
from typing import Callable, Sequence

import numpy as np
import torch
import torch.distributed as dist

from ..core.i18n import tr
from ..core.measure import fit_alpha_beta, max_abs_diff  # fit_alpha_beta: exported here too (08)
from ..dist.launcher import LaunchError, check_importable, launch
from ..dist.ranks import agree, local_device
from .recipe import _exchange, owned_chunk, ring_all_reduce, ring_all_reduce_naive, ring_reduce_scatter
from .stall import StallWatch, gave_up, watch_ranks

__all__ = ["COLLECTIVES", "all_to_all", "collectives_worker", "run_collectives", "ring_check_worker", "run_ring_check",
           "reduce_scatter_check_worker", "run_reduce_scatter_check", "sweep_worker", "run_sweep", "fit_alpha_beta",
           "alpha_beta_time", "two_point_alpha_beta", "bus_bandwidth", "ring_model_time", "SWEEP_SIZES"]

COLLECTIVES = ("broadcast", "reduce", "all_reduce", "all_gather", "reduce_scatter", "all_to_all")
SWEEP_SIZES = tuple(4**k * 2**10 for k in range(8))  # 1 KiB, 4 KiB, … 16 MiB


def all_to_all(outputs: list[torch.Tensor], inputs: list[torch.Tensor]) -> str:
    """``dist.all_to_all``, or the same exchange with ``isend``/``recv`` where the backend lacks it (08).

    gloo has all-to-all only in recent torch (2.11 refuses it); the result is the same: rank r's
    ``outputs[j]`` is rank j's ``inputs[r]``. Returns how it was done.
    """
    try:
        dist.all_to_all(outputs, inputs)
        return "all_to_all"
    except RuntimeError as e:
        if "does not support" not in str(e):
            raise
    rank = dist.get_rank()
    sends = [dist.isend(inputs[j], j) for j in range(len(inputs)) if j != rank]
    for j in range(len(outputs)):
        if j == rank:
            outputs[j].copy_(inputs[j])
        else:
            dist.recv(outputs[j], j)
    for req in sends:
        req.wait()
    return "isend/recv"


def collectives_worker(rank: int, world_size: int) -> dict:
    """Run each collective once on small tensors; return what this rank held before and after (08).

    Rank ``r`` starts with ``[10r, 10r + 1, …]`` (one value per rank), so every number says where it
    came from. ``reduce`` defines the result on its destination only (rank 0): the other ranks'
    ``after`` is None. The list forms (``all_gather``, ``reduce_scatter``, ``all_to_all``) are used;
    where gloo lacks all-to-all (older torch), :func:`all_to_all` does it with ``isend``/``recv``.
    """
    dev, n = local_device(), world_size
    start = (10.0 * rank + torch.arange(n, dtype=torch.float32)).to(dev)
    own = start[rank:rank + 1].clone()  # one value each, for all_gather
    out: dict[str, dict] = {}
    for op in COLLECTIVES:
        before = own if op == "all_gather" else start
        t = before.clone()
        if op == "broadcast":
            dist.broadcast(t, src=0)
        elif op == "reduce":
            dist.reduce(t, dst=0)
        elif op == "all_reduce":
            dist.all_reduce(t)
        elif op == "all_gather":
            parts = [torch.empty_like(own) for _ in range(n)]
            dist.all_gather(parts, own)
            t = torch.cat(parts)
        elif op == "reduce_scatter":
            t = torch.empty(1, device=dev)
            dist.reduce_scatter(t, list(start.clone().chunk(n)))
        elif op == "all_to_all":
            parts = [torch.empty(1, device=dev) for _ in range(n)]
            all_to_all(parts, list(start.clone().chunk(n)))
            t = torch.cat(parts)
        after = None if (op == "reduce" and rank != 0) else t.cpu().tolist()
        out[op] = {"before": before.cpu().tolist(), "after": after}
    return out


def run_collectives(nprocs: int = 4, timeout: float = 60) -> dict[str, list[dict]]:
    """Each collective on ``nprocs`` ranks: ``{op: [rank 0's {before, after}, rank 1's, …]}`` (08)."""
    ranks = launch(collectives_worker, nprocs, timeout=timeout, verbose=False)
    return {op: [r[op] for r in ranks] for op in COLLECTIVES}


def ring_check_worker(rank: int, world_size: int, numel: int) -> dict:
    """The recipe's rings against ``dist.all_reduce`` and ``dist.reduce_scatter`` on the same random data (08)."""
    dev = local_device()
    x = torch.randn(numel, generator=torch.Generator().manual_seed(rank)).to(dev)
    ref = x.clone()
    dist.all_reduce(ref)
    naive, ring, rs = ring_all_reduce_naive(x.clone()), ring_all_reduce(x.clone()), x.clone()
    i = ring_reduce_scatter(rs)
    rs_ref = torch.empty_like(x.tensor_split(world_size)[i])
    parts = list(x.tensor_split(world_size))
    if len({p.numel() for p in parts}) == 1:
        dist.reduce_scatter(rs_ref, [parts[(j + 1) % world_size].clone() for j in range(world_size)])  # r gets r+1
    else:  # reduce_scatter needs equal chunks: take the owned chunk of the full all-reduce instead
        rs_ref = ref.tensor_split(world_size)[i]
    diffs = torch.tensor([max_abs_diff([naive], [ref]), max_abs_diff([ring], [ref]),
                          max_abs_diff([rs.tensor_split(world_size)[i]], [rs_ref])], dtype=torch.float64, device=dev)
    dist.all_reduce(diffs, op=dist.ReduceOp.MAX)
    return {"naive_vs_all_reduce": diffs[0].item(), "ring_vs_all_reduce": diffs[1].item(),
            "reduce_scatter_vs_dist": diffs[2].item(), "owned_chunk": i, "scale": ref.abs().max().item()}


def run_ring_check(nprocs: int = 4, numel: int = 10_000, timeout: float = 60) -> dict:
    """Max |ring − all_reduce| over all ranks for both rings, and the reduce-scatter half (08)."""
    return launch(ring_check_worker, nprocs, args=(numel,), timeout=timeout, verbose=False)[0]


def reduce_scatter_check_worker(rank: int, world_size: int, fn: Callable, numel: int, folder: str | None = None,
                                patience: float = 5.0, give_up: float = 20.0) -> dict:
    """Run a student's ``fn(t) -> owned chunk index`` and the recipe's ring_reduce_scatter on the same data (08).

    With ``folder``, a :class:`~helpers.collectives.stall.StallWatch` notes there where this rank
    stands still for ``patience`` s, and ends it after ``give_up`` s (a deadlocked ring).
    """
    with StallWatch(folder, rank, patience, give_up) if folder else contextlib.nullcontext():
        return _compare_reduce_scatter(rank, world_size, fn, numel)


def _compare_reduce_scatter(rank: int, world_size: int, fn: Callable, numel: int) -> dict:
    x = torch.randn(numel, generator=torch.Generator().manual_seed(rank)).to(local_device())
    theirs, mine = x.clone(), x.clone()
    i_theirs, i_mine = fn(theirs), ring_reduce_scatter(mine)
    if i_theirs != i_mine:
        return {"same_chunk": False, "owned": i_theirs, "expected": owned_chunk(rank, world_size), "max_abs_diff": None}
    i = i_mine
    diff = max_abs_diff([theirs.tensor_split(world_size)[i]], [mine.tensor_split(world_size)[i]])
    return {"same_chunk": True, "owned": i, "expected": i, "max_abs_diff": agree(diff, "max")}


def run_reduce_scatter_check(fn: Callable, nprocs: int = 4, numel: int = 1000, timeout: float = 60,
                             patience: float = 5.0, give_up: float = 20.0) -> dict:
    """Check a student's ring reduce-scatter against the recipe's on ``nprocs`` ranks (08's code exercise).

    ``fn`` must live in a file (``%%writefile my_ring.py``), since the ranks import it. Returns
    ``{"ok", "max_abs_diff", "per_rank"}``; ok when every rank owns the right chunk and its sum
    matches to float rounding. Ranks that stand still for ``patience`` s are said to wait, with
    where; after ``give_up`` s they are ended and :class:`~helpers.collectives.stall.RingDeadlock`
    (a ``TimeoutError``) says why, long before ``timeout``.
    """
    check_importable(fn)
    if not 0 < patience <= give_up:
        raise ValueError(f"need 0 < patience <= give_up (seconds), got patience={patience!r}, give_up={give_up!r}")
    with tempfile.TemporaryDirectory(prefix="ring-check-") as folder, watch_ranks(folder, patience, give_up):
        try:
            ranks = launch(reduce_scatter_check_worker, nprocs, args=(fn, numel, folder, patience, give_up),
                           timeout=timeout, verbose=False)
        except LaunchError:
            deadlock = gave_up(folder, give_up)
            if deadlock is None:
                raise
            raise deadlock from None
    ok = all(r["same_chunk"] for r in ranks) and ranks[0]["max_abs_diff"] < 1e-4
    return {"ok": ok, "max_abs_diff": ranks[0]["max_abs_diff"], "per_rank": ranks}


def _best_times(fns: dict[str, Callable[[], object]], repeats: int, inner: int) -> dict[str, float]:
    """Best (over ``repeats``) of the slowest rank's seconds per call of each function, taken in turn.

    The functions alternate within every repeat, so a burst of outside load hits them alike.
    """
    best = {name: float("inf") for name in fns}
    for fn in fns.values():
        fn()  # warm-up: connections, allocations
    for _ in range(repeats):
        for name, fn in fns.items():
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            best[name] = min(best[name], agree((time.perf_counter() - t0) / inner, "max"))
    return best


def sweep_worker(rank: int, world_size: int, sizes: Sequence[int], repeats: int) -> list[dict]:
    """Seconds per call of ``all_reduce``, the recipe's ring, one ring step and one chunk addition, per size (08).

    One ring step (send ``bytes / n`` to the right while receiving as much from the left) and one
    addition of a received chunk are the ring's building blocks: timed alone, they give the α, β
    and γ of the ring model (:func:`ring_model_time`).
    """
    dev = local_device()
    out = []
    for size in sizes:
        x = torch.ones(size // 4, device=dev)
        part, recv = x[:size // 4 // world_size].clone(), torch.empty(size // 4 // world_size, device=dev)
        inner = max(2, min(20, 2**20 // size))  # several calls per timing for small messages
        t = _best_times({"gloo_s": lambda: dist.all_reduce(x), "ring_s": lambda: ring_all_reduce(x),
                         "step_s": lambda: _exchange(part, recv), "add_s": lambda: part.add_(recv)}, repeats, inner)
        out.append({"bytes": size, **t})
    return out


def two_point_alpha_beta(nbytes: Sequence[float], seconds: Sequence[float]) -> tuple[float, float]:
    """α and β the way a ping-pong benchmark reads them: α the smallest message's time, β the slope to the largest (08).

    Large messages run at a lower bandwidth than mid-sized ones that still fit the CPU's caches,
    so one straight line through the whole sweep underestimates them; this line is exact at both
    ends, where latency and bandwidth each dominate.
    """
    i, j = int(np.argmin(nbytes)), int(np.argmax(nbytes))
    beta = (seconds[j] - seconds[i]) / (nbytes[j] - nbytes[i])
    return float(seconds[i]), float(beta)


def alpha_beta_time(nbytes: float, alpha: float, beta: float) -> float:
    """The α–β model: a message of ``nbytes`` costs ``α + nbytes · β`` seconds (08)."""
    return alpha + nbytes * beta


def ring_model_time(nbytes: float, world_size: int, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """The ring all-reduce's time: 2(n − 1) steps of ``nbytes / n``, plus n − 1 chunk additions (08).

    ``alpha``, ``beta``: one ring step's latency and seconds per byte; ``gamma``: seconds per byte
    to add a received chunk into one's own (memory-bound, small beside β on a slow link).
    """
    chunk = nbytes / world_size
    return 2 * (world_size - 1) * alpha_beta_time(chunk, alpha, beta) + (world_size - 1) * chunk * gamma


def bus_bandwidth(nbytes: float, seconds: float, world_size: int, op: str = "all_reduce") -> float:
    """Bus bandwidth in bytes/s as nccl-tests defines it: algbw × the op's factor (08).

    ``algbw = bytes / time``; all-reduce moves ``2 (n − 1) / n`` of the message through each rank's
    link, all-gather and reduce-scatter ``(n − 1) / n``, broadcast and reduce 1. The factor makes
    busbw comparable across ranks counts and with the link's peak.
    """
    if not isinstance(world_size, int) or isinstance(world_size, bool) or world_size < 1:
        raise ValueError(tr("collectives.world_size", "world_size must be a positive int (the number of ranks), got "
                            "{got!r}", got=world_size))
    factor = {"all_reduce": 2 * (world_size - 1) / world_size, "all_gather": (world_size - 1) / world_size,
              "reduce_scatter": (world_size - 1) / world_size, "broadcast": 1.0, "reduce": 1.0}
    if not isinstance(op, str) or op not in factor:
        raise UnknownChoice(tr("collectives.unknown_op", "bus_bandwidth knows no collective {op!r}; choose one of "
                               "{choices}", op=op, choices=", ".join(repr(k) for k in factor)))
    return nbytes / seconds * factor[op]


class UnknownChoice(ValueError, KeyError):
    """A name outside a fixed set of choices: a ValueError that lists them (a KeyError too, as it was before) (08)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def run_sweep(sizes: Sequence[int] = SWEEP_SIZES, nprocs: int = 2, repeats: int = 5, big: int = 4 * 2**20,
              timeout: float = 300) -> dict:
    """Sweep message sizes on ``nprocs`` ranks; fit α–β for all_reduce and for one ring step; predict the ring (08).

    The ring's prediction (:func:`ring_model_time`) uses only the separately timed ring step (α, β
    read from its smallest and largest sizes: :func:`two_point_alpha_beta`) and chunk addition (γ, the large sizes' best), never the ring's own
    times; ``ring_prediction_error`` is its largest relative error at ``≥ big`` bytes, and
    ``ring_vs_gloo_busbw`` the ring's lowest bus bandwidth there as a fraction of all_reduce's.
    """
    rows = launch(sweep_worker, nprocs, args=(list(sizes), repeats), timeout=timeout, verbose=False)[0]
    b = [r["bytes"] for r in rows]
    alpha, beta = fit_alpha_beta(b, [r["gloo_s"] for r in rows])
    alpha_p, beta_p = two_point_alpha_beta([x / nprocs for x in b], [r["step_s"] for r in rows])
    gamma = min(r["add_s"] / (r["bytes"] / nprocs) for r in rows if r["bytes"] >= big // 4) if nprocs > 1 else 0.0
    for r in rows:
        r["gloo_busbw_gbs"] = bus_bandwidth(r["bytes"], r["gloo_s"], nprocs) / 1e9
        r["ring_busbw_gbs"] = bus_bandwidth(r["bytes"], r["ring_s"], nprocs) / 1e9
        r["gloo_model_s"] = alpha_beta_time(r["bytes"], alpha, beta)
        r["ring_model_s"] = ring_model_time(r["bytes"], nprocs, alpha_p, beta_p, gamma)
    large = [r for r in rows if r["bytes"] >= big] or rows[-1:]
    return {"world_size": nprocs, "sizes": rows, "alpha_s": alpha, "beta_s_per_byte": beta,
            "step_alpha_s": alpha_p, "step_beta_s_per_byte": beta_p, "add_gamma_s_per_byte": gamma,
            "ring_prediction_error": max(abs(r["ring_model_s"] / r["ring_s"] - 1) for r in large),
            "ring_vs_gloo_busbw": min(r["ring_busbw_gbs"] / r["gloo_busbw_gbs"] for r in large)}
