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
from ..core.models import DigitsCNN
from ..dist.launcher import launch
from ..dist.ranks import agree, local_device
from ..dist.throughput import BucketCounter, rank_share
from .recipe import ddp_wrap

__all__ = ["scaling_worker", "measure_scaling", "scaling_summary", "scaling_table"]


def scaling_worker(rank: int, world_size: int, batches: list[int], repeats: int, seconds: float,
                   channels: tuple[int, int], hidden: int) -> dict:
    """Step times of 1 process and of ``world_size`` processes at each global batch, ``repeats`` times (03).

    Both are measured in the same launch, in turn: "1 process" is rank 0 training alone on the
    whole batch (DDP over a group of one: nothing to all-reduce) while the other ranks wait at a
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
    t0 = time.perf_counter()
    for _ in range(20):
        dist.all_reduce(grads)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    allreduce_s = agree((time.perf_counter() - t0) / 20, "max")
    return {"batches": list(batches), "steps": steps, "times": {f"{n}x{gb}": v for (n, gb), v in times.items()},
            "world_size": world_size, "counts": {str(gb): c for gb, c in counts.items()}, "allreduce_s": allreduce_s}


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
                     "buckets_per_step": res["counts"][str(gb)][1], "allreduce_s": res["allreduce_s"]})
    return rows


def scaling_summary(rows: list[dict]) -> dict:
    """What the measured speedups say, in sentences generated from them (03): for the text and the plot title."""
    by = {r["global_batch"]: r for r in rows}
    batches = sorted(by)
    best = max(batches, key=lambda b: by[b]["speedup"])
    worst = min(batches, key=lambda b: by[b]["speedup"])
    n, reps = rows[0]["processes"], rows[0]["repeats"]

    def rng(b: int) -> str:
        return f"{by[b]['speedup']:.2f}× (range {by[b]['speedup_min']:.2f}–{by[b]['speedup_max']:.2f}×)"

    def apart(a: int, b: int) -> bool:  # the ranges of repeats do not overlap
        lo, hi = sorted((a, b), key=lambda k: by[k]["speedup"])
        return by[lo]["speedup_max"] < by[hi]["speedup_min"]

    pairs = list(zip(batches, batches[1:]))
    moves = [(a, b, "rose" if by[b]["speedup"] > by[a]["speedup"] else "fell") for a, b in pairs if apart(a, b)]
    close = [f"{a} and {b}" for a, b in pairs if not apart(a, b)]
    dirs = {m for _, _, m in moves}
    if len(moves) == len(pairs) and len(dirs) == 1:  # every step told apart, all one way
        way = dirs.pop()
        trend = f"the median speedup {way} with every larger batch"
        end = best if way == "rose" else worst
        title = f"{n} processes: speedup {way} with every larger batch, to {by[end]['speedup']:.2f}× at {end}"
    elif moves:
        trend = "the median speedup " + "; ".join(f"{m} from batch {a} to {b}" for a, b, m in moves)
        if any(b == best and m == "rose" for a, b, m in moves) and any(a == best and m == "fell" for a, b, m in moves):
            trend += f"; it peaked at batch {best}, not at the largest"
        title = f"{n} processes: speedup " + ", ".join(f"{m} {a}→{b}" for a, b, m in moves)
        if close:
            title += "; ranges overlap " + ", ".join(c.replace(" and ", "–") for c in close)
    else:
        trend = "no change of the speedup from one batch to the next stands out from the spread of the repeats"
        title = f"{n} processes: speedup per batch, ranges overlap between all neighbouring batches"
    lines = [f"Speedup of {n} processes over 1, median of {reps} repeats: highest median at batch {best}, "
             f"{rng(best)}; lowest at batch {worst}, {rng(worst)}."]
    if moves:
        lines.append(f"Between neighbouring batches whose ranges of repeats do not overlap, {trend}.")
    else:
        lines.append(f"Across the batches {trend}.")
    if close:
        lines.append("The ranges of repeats overlap between batches " + ", ".join(close)
                     + ": this run cannot tell those apart.")
    else:
        lines.append("The ranges of repeats do not overlap between neighbouring batches.")
    ar_ms = rows[0]["allreduce_s"] * 1e3
    share = ", ".join(f"{100 * rows[0]['allreduce_s'] / by[b]['step_s_n']:.0f} % at {b}" for b in batches)
    small = batches[0]
    ideal_ms, got_ms = by[small]["step_s_1"] / n * 1e3, by[small]["step_s_n"] * 1e3
    lines.append(f"At batch {small}, 1/{n} of the 1-process step would be {ideal_ms:.2f} ms; {n} processes took "
                 f"{got_ms:.2f} ms a step, {got_ms - ideal_ms:+.2f} ms against perfect splitting.")
    lines.append(f"One bare all-reduce of the {rows[0]['allreduce_bytes_per_step'] / 1e3:.0f} KB of gradients took "
                 f"{ar_ms:.2f} ms, the same work at every batch; against the {n}-process step time that is {share}.")
    if got_ms - ideal_ms > ar_ms:
        lines.append(f"A bare all-reduce, timed alone, takes {ar_ms:.2f} of those {got_ms - ideal_ms:.2f} ms. The rest "
                     f"is not timed part by part here; candidates: what else does not split (the optimizer step, "
                     f"each step's fixed cost), a step lasting as long as its slower rank (the time kept is the "
                     f"slower rank's), and the all-reduce inside a step sharing the cores with the other "
                     f"process's compute.")
    above = [b for b in batches if by[b]["speedup_max"] > n]
    if above:
        lines.append(f"Repeats above the ideal {n}× (at batch {', '.join(map(str, above))}) are timing noise: the "
                     f"two sides of a repeat run one after the other, and each varies from run to run.")
    return {"best": best, "worst": worst, "trend": trend, "title": title, "text": "\n".join(lines)}


def scaling_table(rows: list[dict]) -> str:
    """The 1-vs-N-process measurements as aligned text, medians with the range of repeats (03)."""
    n = rows[0]["processes"]
    head = (f"{'global batch':>12} {'1 proc ms':>10} {f'{n} procs ms':>11} {'speedup':>8} {'range':>13} "
            f"{'all-reduce KB/step':>19}")
    lines = [head]
    for r in rows:
        lines.append(f"{r['global_batch']:>12} {1e3 * r['step_s_1']:>10.1f} {1e3 * r['step_s_n']:>11.1f} "
                     f"{r['speedup']:>7.2f}× {r['speedup_min']:>5.2f}–{r['speedup_max']:.2f}× "
                     f"{r['allreduce_bytes_per_step'] / 1e3:>19.0f}")
    lines.append("speedup: the median of each repeat's own ratio (1-process time / N-process time, timed next to "
                 "each other), so it need not equal the ratio of the median times beside it")
    return "\n".join(lines)
