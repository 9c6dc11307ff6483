"""Collectives, measured: who holds what before and after each one, the hand-written ring checked, and timed (08).

The instruments of notebook 08: they run ``torch.distributed``'s collectives and the recipe's
ring on real processes, check the ring against ``all_reduce``, sweep message sizes, fit the α–β
cost model and convert times to bus bandwidth the way nccl-tests does.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import torch
import torch.distributed as dist

from ..core.i18n import tr
from ..core.measure import fit_alpha_beta, max_abs_diff  # fit_alpha_beta: exported here too (08)
from ..launching.launcher import launch
from ..launching.ranks import local_device
from ..launching.timing import seconds_per_call, slowest_seconds_per_call, synchronize  # the first two exported here too (08)
from .ring_exercise import MessageLog
from .recipe import ring_all_reduce, ring_all_reduce_naive, ring_reduce_scatter, ring_step

__all__ = ["COLLECTIVES", "COMPOSED", "all_to_all", "collectives_worker", "run_collectives", "ring_check_worker", "run_ring_check",
           "synchronize", "seconds_per_call", "sweep_worker", "run_sweep", "fit_alpha_beta",
           "alpha_beta_time", "two_point_alpha_beta", "bus_bandwidth", "ring_model_time", "SWEEP_SIZES"]

COLLECTIVES = ("broadcast", "reduce", "all_reduce", "all_gather", "reduce_scatter", "all_to_all")
COMPOSED = "reduce_scatter_then_all_gather"
SWEEP_SIZES = tuple(4**k * 2**10 for k in range(8))  # 1 KiB, 4 KiB, … 16 MiB


def all_to_all(outputs: list[torch.Tensor], inputs: list[torch.Tensor]) -> str:
    """``dist.all_to_all``, or the same exchange by ``isend``/``recv`` where the backend refuses it; returns which (08).

    gloo gained the list form, ``dist.all_to_all``, in https://github.com/pytorch/pytorch/pull/165435
    (``all_to_all_single`` worked on gloo before). Either way rank r's
    ``outputs[j]`` ends as rank j's ``inputs[r]``.
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
    """Each collective once; what this rank held before and after, and reduce-scatter then all-gather (08).

    Rank ``r`` starts with ``[10r, 10r + 1, …]``. ``reduce``'s result is defined on rank 0 only.
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
            how = all_to_all(parts, list(start.clone().chunk(n)))
            t = torch.cat(parts)
        after = None if (op == "reduce" and rank != 0) else t.cpu().tolist()
        out[op] = {"before": before.cpu().tolist(), "after": after}
    out["all_to_all"]["how"] = how  # "all_to_all" or "isend/recv": which path the wrapper took
    piece = torch.empty(1, device=dev)  # all-reduce composed of the two halves, really called
    dist.reduce_scatter(piece, list(start.clone().chunk(n)))
    parts = [torch.empty(1, device=dev) for _ in range(n)]
    dist.all_gather(parts, piece)
    out[COMPOSED] = {"before": start.cpu().tolist(), "after": torch.cat(parts).cpu().tolist()}
    return out


def run_collectives(nprocs: int = 4, timeout: float = 60) -> dict[str, list[dict]]:
    """Each collective on ``nprocs`` ranks: ``{op: [rank 0's {before, after}, rank 1's, …]}`` (08).

    Besides the six of :data:`COLLECTIVES`, ``"reduce_scatter_then_all_gather"``: what each rank
    holds after ``dist.reduce_scatter`` followed by ``dist.all_gather`` of its piece.
    """
    ranks = launch(collectives_worker, nprocs, timeout=timeout, verbose=False)
    return {op: [r[op] for r in ranks] for op in (*COLLECTIVES, COMPOSED)}


def ring_check_worker(rank: int, world_size: int, numel: int) -> dict:
    """The recipe's rings against ``dist.all_reduce`` and ``dist.reduce_scatter`` on the same random data (08).

    ``dist.reduce_scatter`` gives rank ``r`` the sum of piece ``r``, and is handed pieces of equal size here;
    the recipe's ring leaves rank ``r`` another chunk complete. So the comparison runs on the first
    ``n · (numel // n)`` values, and hands ``dist.reduce_scatter`` the pieces in the order that puts
    the ring's chunk on each rank. ``sent_naive``/``sent_ring``: the values the busiest rank sent (a
    ``MessageLog`` counts them); ``*_between_ranks``: the largest |any rank's result − rank 0's|, per ring.
    """
    dev, n = local_device(), world_size
    x = torch.randn(numel, generator=torch.Generator().manual_seed(rank)).to(dev)
    ref = x.clone()
    dist.all_reduce(ref)
    with MessageLog() as naive_log:
        naive = ring_all_reduce_naive(x.clone())
    with MessageLog() as ring_log:
        ring = ring_all_reduce(x.clone())
    sent = torch.tensor([sum(d.numel() for _, d in log.sent) for log in (naive_log, ring_log)], device=dev)
    dist.all_reduce(sent, op=dist.ReduceOp.MAX)  # values sent by the busiest rank
    rs = x[:n * (numel // n)].clone()
    mine = ring_reduce_scatter(rs)
    owners = torch.tensor([mine if r == rank else 0 for r in range(n)], device=dev)
    dist.all_reduce(owners)  # which chunk each rank's ring owns
    pieces = list(x[:n * (numel // n)].chunk(n))
    rs_ref = torch.empty_like(pieces[0])
    dist.reduce_scatter(rs_ref, [pieces[i].clone() for i in owners.tolist()])  # rank r gets piece owners[r]
    firsts = [naive.clone(), ring.clone()]
    for f in firsts: dist.broadcast(f, 0)  # noqa: E701  (rank 0's results, to compare every rank's with)
    diffs = torch.tensor([max_abs_diff([naive], [ref]), max_abs_diff([ring], [ref]),
                          max_abs_diff([rs.chunk(n)[mine]], [rs_ref]), max_abs_diff([naive], [firsts[0]]),
                          max_abs_diff([ring], [firsts[1]])], dtype=torch.float64, device=dev)
    dist.all_reduce(diffs, op=dist.ReduceOp.MAX)
    return {"naive_vs_all_reduce": diffs[0].item(), "ring_vs_all_reduce": diffs[1].item(),
            "reduce_scatter_vs_dist": diffs[2].item(), "naive_between_ranks": diffs[3].item(),
            "ring_between_ranks": diffs[4].item(), "scale": ref.abs().max().item(),
            "sent_naive": int(sent[0]), "sent_ring": int(sent[1]), "numel": numel, "world_size": n}


def run_ring_check(nprocs: int = 4, numel: int = 10_000, timeout: float = 60) -> dict:
    """Max |ring − all_reduce| over all ranks for both rings, and the reduce-scatter half (08)."""
    return launch(ring_check_worker, nprocs, args=(numel,), timeout=timeout, verbose=False)[0]


def _best_times(fns: dict[str, Callable[[], object]], repeats: int, inner: int,
                device: torch.device = torch.device("cpu")) -> dict[str, float]:
    """Best (over ``repeats``) of the slowest rank's seconds per call of each function, taken in turn.

    The functions alternate within every repeat, so a burst of outside load hits them alike; on a
    GPU each timing waits for the device (:func:`helpers.launching.timing.slowest_seconds_per_call`).
    """
    best = {name: float("inf") for name in fns}
    for fn in fns.values():
        fn()  # warm-up: connections, allocations
    for _ in range(repeats):
        for name, fn in fns.items():
            best[name] = min(best[name], slowest_seconds_per_call(fn, inner, device))
    return best


def sweep_worker(rank: int, world_size: int, sizes: Sequence[int], repeats: int) -> list[dict]:
    """Seconds per call of ``all_reduce``, the recipe's ring, one ring step and one chunk addition, per size (08).

    One ring step (send ``bytes / n`` to the right while receiving as much from the left) and one
    addition of a received chunk are the ring's building blocks: timed alone, they give the α, β
    and γ of the ring model (:func:`ring_model_time`). Every repeat times every size in turn, in a
    fresh order each repeat, so neither a burst of outside load nor a place in the order (or the size
    timed just before) falls on all repeats of one size; each time is the best of ``repeats``
    (``<name>_worst``: the slowest). ``library_s`` times ``dist.all_reduce``, the library's own, on
    whichever backend runs (gloo or nccl). The tensors hold zeros: every call sums or adds in place,
    and a sum of zeros stays zero (ones would double at each call and overflow float32 to inf after
    128 of them); they are asserted finite at the end.
    """
    dev = local_device()
    plans, data = [], []
    for size in sizes:
        x = torch.zeros(size // 4, device=dev)
        part, recv = x[:size // 4 // world_size].clone(), torch.empty(size // 4 // world_size, device=dev)
        fns = {"library_s": lambda x=x: dist.all_reduce(x), "ring_s": lambda x=x: ring_all_reduce(x),
               "step_s": lambda p=part, r=recv: ring_step(p, r), "add_s": lambda p=part, r=recv: p.add_(r)}
        for fn in fns.values():
            fn()  # warm-up: connections, allocations
        plans.append((size, max(2, min(50, 2**20 // size)), fns))  # more calls per timing for small messages
        data.append((x, part, recv))
    times = [{name: [] for name in fns} for _, _, fns in plans]
    for k in range(repeats):   # a fresh order each repeat, seeded by k, so the same on every rank
        for (size, inner, fns), t in [(plans[i], times[i]) for i in np.random.default_rng(k).permutation(len(plans))]:
            for name, fn in fns.items():
                t[name].append(slowest_seconds_per_call(fn, inner, dev))
    assert all(bool(torch.isfinite(a).all()) for ts in data for a in ts), "the timed tensors left the finite range"
    return [{"bytes": size, **{k: min(v) for k, v in t.items()}, **{k[:-2] + "_worst": max(v) for k, v in t.items()}}
            for (size, _, _), t in zip(plans, times)]


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
    fitted over all its sizes by :func:`fit_alpha_beta`, as for all_reduce) and chunk addition (γ, the
    large sizes' best), never the ring's own times; ``ring_prediction_error`` is its largest relative
    error at ``≥ big`` bytes, and ``ring_vs_library_busbw`` the ring's lowest bus bandwidth there as a
    fraction of all_reduce's. Each row also holds ``step_model_s`` (the step line at that size) and
    ``ring_parts_s`` (the ring predicted from that size's measured step and addition, no line).
    """
    rows = launch(sweep_worker, nprocs, args=(list(sizes), repeats), timeout=timeout, verbose=False)[0]
    b = [r["bytes"] for r in rows]
    alpha, beta = fit_alpha_beta(b, [r["library_s"] for r in rows])
    alpha_p, beta_p = fit_alpha_beta([x / nprocs for x in b], [r["step_s"] for r in rows])
    gamma = min(r["add_s"] / (r["bytes"] / nprocs) for r in rows if r["bytes"] >= big // 4) if nprocs > 1 else 0.0
    for r in rows:
        r["library_busbw_gbs"] = bus_bandwidth(r["bytes"], r["library_s"], nprocs) / 1e9
        r["ring_busbw_gbs"] = bus_bandwidth(r["bytes"], r["ring_s"], nprocs) / 1e9
        r["library_model_s"] = alpha_beta_time(r["bytes"], alpha, beta)
        r["ring_model_s"] = ring_model_time(r["bytes"], nprocs, alpha_p, beta_p, gamma)
        r["step_model_s"] = alpha_beta_time(r["bytes"] / nprocs, alpha_p, beta_p)  # the step line at this size
        # the same ring recipe from this size's measured parts, no fitted line: 2(n − 1) steps + (n − 1) additions
        r["ring_parts_s"] = 2 * (nprocs - 1) * r["step_s"] + (nprocs - 1) * r["add_s"]
    large = [r for r in rows if r["bytes"] >= big] or rows[-1:]
    return {"world_size": nprocs, "repeats": repeats, "sizes": rows, "alpha_s": alpha, "beta_s_per_byte": beta,
            "step_alpha_s": alpha_p, "step_beta_s_per_byte": beta_p, "add_gamma_s_per_byte": gamma,
            "ring_prediction_error": max(abs(r["ring_model_s"] / r["ring_s"] - 1) for r in large),
            "ring_vs_library_busbw": min(r["ring_busbw_gbs"] / r["library_busbw_gbs"] for r in large)}

