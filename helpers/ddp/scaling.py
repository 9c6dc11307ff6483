"""Is DDP faster? 1 against N processes at several global batches, repeated, and what the numbers say (03).

:func:`measure_scaling` times both sides in one launch, next to each other, ``repeats`` times;
:func:`scaling_summary` turns the medians and ranges into the sentences (and the plot title)
the notebook prints, so no conclusion is written before the data.
"""
from __future__ import annotations

import statistics
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from ..core.data import digits_batch
from ..core.i18n import tr
from ..core.models import DigitsCNN
from ..launching.launcher import launch
from ..launching.ranks import agree, local_device
from ..launching.throughput import BucketCounter, rank_share
from ..launching.timing import slowest_seconds_per_call
from .instruments import gloo_worker_threads
from .recipe import ddp_wrap
from .explain import _baseline_lines, _between_lines, _time_lines
from .verdicts import _batch_lines, _names, _takeaway, thresholds_said

__all__ = ["scaling_worker", "measure_scaling", "scaling_summary", "scaling_table"]


def scaling_worker(rank: int, world_size: int, batches: list[int], repeats: int, seconds: float,
                   channels: tuple[int, int], hidden: int) -> dict:
    """Step times of 1 process and of ``world_size`` processes at each global batch, ``repeats`` times (03).

    Both are measured in the same launch, in turn: "1 process" is rank 0 training alone on the
    whole batch (DDP over a group of one: its reducer still all-reduces, within that group) while the other ranks wait at a
    barrier; then every rank trains on its share. Each repeat measures every batch once, taking
    turns (1 first, then N first), so a burst of outside load hits both sides alike. Both timed
    models are plain DDP: the bytes all-reduced per step are counted on a third, untimed model
    with a counting communication hook. Also times a bare all-reduce of the gradients' bytes.
    """
    device = local_device()
    alone = dist.new_group([0])  # every rank must create it; only rank 0 is in it
    torch.manual_seed(0)
    models = {world_size: ddp_wrap(DigitsCNN(channels=channels, hidden=hidden).to(device), device)}
    if rank == 0:
        models[1] = DDP(DigitsCNN(channels=channels, hidden=hidden).to(device), process_group=alone,
                        device_ids=[device.index] if device.type == "cuda" else None)
    counted = ddp_wrap(DigitsCNN(channels=channels, hidden=hidden).to(device), device)  # untimed: counts bytes
    counter = BucketCounter()
    counted.register_comm_hook(counter, BucketCounter.hook)
    opts = {n: torch.optim.SGD(m.parameters(), lr=0.01) for n, m in models.items()}

    def run(n: int, x: torch.Tensor, y: torch.Tensor, steps: int) -> float:
        """Seconds for ``steps`` steps with ``n`` processes (the slowest rank's), 0 on a rank that waits."""
        dist.barrier()
        if n == 1 and rank != 0:
            dist.barrier()  # wait while rank 0 trains alone
            return 0.0
        t0 = time.perf_counter()
        for _ in range(steps):
            opts[n].zero_grad(set_to_none=True)
            nn.functional.cross_entropy(models[n](x), y).backward()
            opts[n].step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        dt = time.perf_counter() - t0
        if n == 1:
            dist.barrier()  # let the waiting ranks go
        return dt

    data, steps, counts = {}, {}, {}
    for gb in batches:
        whole = tuple(t.to(device) for t in digits_batch(gb))
        data[gb] = {1: whole, world_size: tuple(t.to(device) for t in rank_share(gb, world_size, rank))}
        for _ in range(2):  # the second step: DDP may regroup its buckets after the first
            counter.calls = counter.bytes = 0
            nn.functional.cross_entropy(counted(data[gb][world_size][0]), data[gb][world_size][1]).backward()
        counts[gb] = (counter.bytes, counter.calls)  # one step's all-reduced bytes and buckets
        run(1, *data[gb][1], 2)  # warm-up
        run(world_size, *data[gb][world_size], 2)
        probe = run(1, *data[gb][1], 2) / 2
        steps[gb] = int(agree(max(3, int(seconds / max(probe, 1e-6))), "rank0"))  # rank 0 decides for everyone
    times = {(n, gb): [] for n in (1, world_size) for gb in batches}
    for r in range(repeats):
        for gb in batches:
            for n in ((1, world_size) if r % 2 == 0 else (world_size, 1)):
                dt = agree(run(n, *data[gb][n], steps[gb]), "max")
                times[n, gb].append(dt / steps[gb])
    grads = torch.zeros(max(1, counts[batches[0]][0] // 4), device=device)  # one step's gradient bytes
    dist.all_reduce(grads)  # warm-up
    allreduce_s = slowest_seconds_per_call(lambda: dist.all_reduce(grads), 20, device)
    return {"batches": list(batches), "steps": steps, "times": {f"{n}x{gb}": v for (n, gb), v in times.items()},
            "world_size": world_size, "counts": {str(gb): c for gb, c in counts.items()}, "allreduce_s": allreduce_s,
            "gloo": gloo_worker_threads()}


def measure_scaling(nprocs: int = 2, batches: tuple[int, ...] = (64, 256, 1024, 2048), repeats: int = 5,
                    seconds: float = 0.25, channels: tuple[int, int] = (16, 32), hidden: int = 64,
                    timeout: float = 300) -> list[dict]:
    """1 vs ``nprocs`` single-threaded DDP processes at each global batch: median and range over repeats (03).

    One row per batch: the median step time of each side, the speedup of every repeat (1-process
    step time / N-process step time, measured next to each other) and its median, min and max,
    the bytes all-reduced per step and the time of one bare all-reduce of those bytes.
    """
    if nprocs < 2:
        raise ValueError(f"measure_scaling compares 1 process with nprocs >= 2 processes, got nprocs={nprocs}")
    res = launch(scaling_worker, nprocs, args=(list(batches), repeats, seconds, channels, hidden), timeout=timeout,
                 verbose=False)[0]
    rows = []
    for gb in batches:
        t1, tn = res["times"][f"1x{gb}"], res["times"][f"{nprocs}x{gb}"]
        speedups = sorted(a / b for a, b in zip(t1, tn))
        rows.append({"global_batch": gb, "processes": nprocs, "repeats": repeats, "steps": res["steps"][gb],
                     "step_s_1": statistics.median(t1), "step_s_n": statistics.median(tn),
                     "samples_per_s_1": gb / statistics.median(t1), "samples_per_s_n": gb / statistics.median(tn),
                     "speedups": speedups, "speedup": statistics.median(speedups),
                     "speedup_min": speedups[0], "speedup_max": speedups[-1],
                     "allreduce_bytes_per_step": res["counts"][str(gb)][0],
                     "buckets_per_step": res["counts"][str(gb)][1], "allreduce_s": res["allreduce_s"], "gloo": res["gloo"]})
    return rows


def scaling_summary(rows: list[dict], margin: float = 0.03) -> dict:
    """What the measured speedups say, in sentences generated from them (03): for the text and the plot title.

    Per batch: N processes faster than 1 in every repeat (the lowest repeat above ``1 + margin``), slower in
    every repeat (the highest below ``1 / (1 + margin)``), mostly faster (or slower) in at least 3 in 4 repeats,
    or no clear difference, printed beside how many repeats were faster and slower, the interquartile range, and
    why a verdict is no stronger.
    Between batches: every pair (not only neighbours) whose ranges of repeats do not overlap, the others named.
    """
    by = {r["global_batch"]: r for r in rows}
    batches = sorted(by)
    best = max(batches, key=lambda b: by[b]["speedup"])
    worst = min(batches, key=lambda b: by[b]["speedup"])
    n, reps = rows[0]["processes"], rows[0]["repeats"]

    def counts(b: int) -> tuple[int, int]:
        return (sum(x > 1 + margin for x in by[b]["speedups"]), sum(x < 1 / (1 + margin) for x in by[b]["speedups"]))

    def verdict(b: int) -> str:
        if by[b]["speedup_min"] > 1 + margin:
            return "faster"
        if by[b]["speedup_max"] < 1 / (1 + margin):
            return "slower"
        up, down = counts(b)
        k = len(by[b]["speedups"])
        return "mostly faster" if 4 * up >= 3 * k else "mostly slower" if 4 * down >= 3 * k else "unclear"

    def label(b: int) -> str:  # a "mostly" verdict carries its count of repeats
        v, k = verdict(b), len(by[b]["speedups"])
        short = {"faster": "faster in every repeat", "slower": "slower in every repeat", "unclear": "no clear difference"}
        up, down = counts(b)
        if v == "unclear" and bool(up) != bool(down):   # one way only, too few repeats for "mostly"
            return (f"not faster (slower in {down} of {k} repeats, none faster)" if down else
                    f"not slower (faster in {up} of {k} repeats, none slower)")
        return short[v] if v in short else f"{v} ({max(counts(b))} of {k} repeats)"

    order = ("faster", "slower", "mostly faster", "mostly slower", "unclear")
    groups: dict[str, list[int]] = {}
    for b in sorted(batches, key=lambda b: (order.index(verdict(b)), b)):
        groups.setdefault(label(b), []).append(b)
    said = [(verdict(bs[0]), *counts(bs[0]), len(by[bs[0]]["speedups"]), _names(bs)) for bs in groups.values()]
    ideal, (hi, lo) = solo_step_ideal(rows), thresholds_said(margin)
    lines = [_takeaway(by, said, ideal, n), "",
             tr("ddp.speedup_intro", "Speedup of {n} processes over 1, per global batch, from {reps} repeats: the "
                "median, the interquartile range (the middle half of the repeats), all (lowest–highest).", n=n,
                reps=reps),
             tr("ddp.repeat_counts", "A repeat counts as faster above {hi}×, slower below {lo}×; the verdict calls a "
                "batch faster (or slower) only when every repeat is, mostly faster (or slower) when at least 3 in 4 "
                "are.",
                hi=hi, lo=lo)]
    for b in batches:
        lines += _batch_lines(by[b], verdict(b), margin)
    apart, close = {}, []
    for i, a in enumerate(batches):
        for b in batches[i + 1:]:
            if by[a]["speedup_max"] < by[b]["speedup_min"]:
                apart.setdefault((a, "higher"), []).append(b)
            elif by[b]["speedup_max"] < by[a]["speedup_min"]:
                apart.setdefault((a, "lower"), []).append(b)
            else:
                close.append(f"{a}–{b}")
    moves = [f"{way} at {_names(bs)} than at {a}" for (a, way), bs in apart.items()]
    lines += _between_lines(apart, close)
    trend = "; ".join(moves) if moves else "no pair of batches told apart"
    title = f"{n} vs 1 process: " + "; ".join(f"{v} at {_names(bs)}" for v, bs in groups.items())
    title += "\nspeedup " + ("; ".join(moves) if moves else "not told apart between any two batches")
    if moves and any(abs(ideal[b] / n - 1) > margin for b in ideal):
        lines.append(tr("ddp.not_all_ddp", "Those differences are not all DDP's: 1 process's own cost per sample "
                        "changes with the batch (next paragraph)."))
    lines += _baseline_lines(by, batches, n, reps, ideal, margin)
    lines += _time_lines(by, batches, n, ideal, rows[0])
    return {"best": best, "worst": worst, "verdicts": {b: verdict(b) for b in batches}, "trend": trend,
            "title": title, "ideal": ideal, "text": "\n".join(lines)}


def solo_step_ideal(rows: list[dict]) -> dict:
    """Per global batch B whose share B/N was timed too: the speedup N processes would reach stepping alone (03).

    Each of the N processes steps on B/N samples; 1 process took ``step_s_1[B/N]`` for that whole step (forward,
    backward, optimizer step). With no other rank to all-reduce with, and each process as fast as 1 process alone,
    N processes would take that long a step, so the
    ideal is ``step_s_1[B] / step_s_1[B/N]`` = N × (1 process's time per sample at B) / (at B/N): N× only when
    1 process's time per sample is the same at B and at B/N.
    """
    by = {r["global_batch"]: r for r in rows}
    n = rows[0]["processes"]
    return {b: by[b]["step_s_1"] / by[b // n]["step_s_1"] for b in sorted(by) if b % n == 0 and b // n in by}


def scaling_table(rows: list[dict]) -> str:
    """The 1-vs-N-process measurements as aligned text, medians with the range of repeats (03)."""
    n = rows[0]["processes"]
    head = (f"{'global batch':>12} {'1 proc ms':>10} {f'{n} procs ms':>11} {'ms ratio':>9} {'speedup':>8} "
            f"{'range':>13} {'all-reduce KB/step':>19}")
    lines = [head]
    for r in rows:
        lines.append(f"{r['global_batch']:>12} {1e3 * r['step_s_1']:>10.1f} {1e3 * r['step_s_n']:>11.1f} "
                     f"{r['step_s_1'] / r['step_s_n']:>8.2f}× {r['speedup']:>7.2f}× "
                     f"{r['speedup_min']:>5.2f}–{r['speedup_max']:.2f}× {r['allreduce_bytes_per_step'] / 1e3:>19.0f}")
    lines.append(tr("ddp.ms_ratio", "ms ratio: 1 proc ms / {n} procs ms, two medians that may come from different "
                    "repeats (so it can differ from the speedup). speedup: the median of each repeat's own ratio "
                    "(1-process time / {n}-process time, timed next to each other), range: the lowest and highest of "
                    "those ratios. The verdicts below use the speedup and its range.", n=n))
    return "\n".join(lines)
