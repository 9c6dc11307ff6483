"""Model parallelism and pipelining, measured: timelines, step times, the bound, the cost of small pieces (01).

The instruments of notebook 01: they run the recipe (``helpers.pipeline.recipe``) on two real
processes, record when each stage computes, time it against the bubble bound, and check the
library schedules against the unsplit model.
"""
from __future__ import annotations

import contextlib
import statistics
import time
from typing import Iterator, Sequence

import torch
import torch.distributed as dist

from ..core.i18n import tr
from ..core.measure import torch_threads
from ..launching.launcher import launch
from ..launching.ranks import agree, local_device
from .recipe import _check_split, gpipe_step, make_stages, synthetic_batch

__all__ = ["rotated_rounds", "StageTimeline", "gpipe_worker", "ping_pong_rounds", "busy_share", "busy_overlap", "ideal_speedup",
           "bubble_fraction", "run_gpipe", "stage_cost"]



def rotated_rounds(items: Sequence, repeats: int) -> list[list]:
    """The order of a timing run (01): round 0, untimed, takes every item once; then ``repeats`` timed rounds, each
    taking every item once in an order rotated by one from round to round, so that whatever else the machine does
    (and whatever the first or last place in a round costs) falls on all items alike."""
    items = list(items)
    return [items[r % len(items):] + items[:r % len(items)] for r in range(repeats + 1)]


class StageTimeline:
    """The ``record`` hook of ``gpipe_step``: when each forward and backward ran on one stage (01).

    ``events`` collects ``(stage, "F"|"B", micro-batch, start, end)``, the timeline of who computed
    what, when. On a GPU each clock reading waits for the device's kernels first
    (``torch.cuda.synchronize``), so the timeline shows when they really ran, not their launch.
    """

    def __init__(self, stage: int, device: torch.device) -> None:
        self.stage, self.device = stage, torch.device(device)
        self.events: list[tuple] = []

    def now(self) -> float:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter()

    @contextlib.contextmanager
    def __call__(self, kind: str, i: int) -> Iterator[None]:
        t0 = self.now()
        yield
        self.events.append((self.stage, kind, i, t0, self.now()))


def gpipe_worker(rank: int, world_size: int, width: int, depth: int, batch: int, ms: Sequence[int],
                 repeats: int = 3, message_rounds: int = 0) -> dict:
    """Time the hand-written 2-stage GPipe for each micro-batch count, in rounds; keep the median round's events (01).

    Each round takes every m once, in an order rotated from round to round, so whatever else the
    machine does falls on all m alike. ``compute_rounds``: this stage's summed forward and backward
    seconds inside each timed step.

    With ``message_rounds``, also time one send/recv of each micro-batch's activation size
    (``message_rounds`` rounds, the sizes taken in turn in each round), under ``"messages"``.
    """
    if world_size != 2:
        raise ValueError("this pipeline has exactly 2 stages: launch it with nprocs=2")
    device = local_device()
    stage = make_stages(width, depth)[rank].to(device)
    opt = torch.optim.SGD(stage.parameters(), lr=1e-3)
    x, y = (t.to(device) for t in synthetic_batch(batch, width))
    ms = list(ms)
    for m in ms:
        _check_split(batch, m)
    times: dict[int, list[float]] = {m: [] for m in ms}
    rounds_events: dict[int, list[list]] = {m: [] for m in ms}
    for r, order in enumerate(rotated_rounds(ms, repeats)):  # round 0 warms up; every round takes every m, rotated
        for m in order:
            timeline = StageTimeline(rank, device)
            dist.barrier()
            t0 = time.perf_counter()
            gpipe_step(rank, stage, opt, x, y, m, width, record=timeline)
            if device.type == "cuda":
                torch.cuda.synchronize(device)  # the step ends when its kernels have run, not when they are queued
            t = agree(time.perf_counter() - t0, "max")
            if r:
                times[m].append(t)
                rounds_events[m].append(timeline.events)
    out = {}
    for m in ms:
        k = sorted(range(repeats), key=lambda i: times[m][i])[(repeats - 1) // 2]  # the median round's events
        events = rounds_events[m][k]
        t_start = agree(min(e[3] for e in events), "min")  # one clock (CLOCK_MONOTONIC is shared on one machine)
        out[m] = {"step_s": statistics.median(times[m]), "step_rounds": times[m], "shown_round_s": times[m][k],
                  "events": [(s, kd, i, a - t_start, b - t_start) for s, kd, i, a, b in events],
                  "compute_rounds": [{kd: sum(b - a for _, kk, _, a, b in ev if kk == kd) for kd in "FB"}
                                     for ev in rounds_events[m]]}
    if message_rounds:
        out["messages"] = ping_pong_rounds(rank, [batch // m * width * 4 for m in ms], message_rounds)
    return out


def ping_pong_rounds(rank: int, sizes: Sequence[int], rounds: int = 7, per_round: int = 5) -> dict[int, list[float]]:
    """One-way send/recv seconds for each size in bytes, once per round, sizes in turn within a round (01).

    Each figure is the mean of ``per_round`` ping-pongs between ranks 0 and 1; taking the sizes in
    turn spreads whatever else the machine is doing over all of them alike.
    """
    device = local_device()
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda *a: None)
    bufs = {size: torch.zeros(size // 4, device=device) for size in sizes}
    out: dict[int, list[float]] = {size: [] for size in sizes}
    for r in range(rounds + 1):  # round 0 warms up
        for size, buf in bufs.items():
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(per_round):
                if rank == 0:
                    dist.send(buf, 1)
                    dist.recv(buf, 1)
                else:
                    dist.recv(buf, 0)
                    dist.send(buf, 0)
            sync(device)
            if r:
                out[size].append((time.perf_counter() - t0) / per_round / 2)
    return out


def busy_overlap(events: list[tuple]) -> float:
    """Seconds during which both stages computed at the same time, from one step's events (01).

    Zero for the naive split, whatever the machine: each stage waits for the other's result.
    Above zero once micro-batches let the stages work side by side.
    """
    def spans(stage: int) -> list[tuple[float, float]]:
        return [(a, b) for s, _, _, a, b in events if s == stage]

    return sum(max(0.0, min(b0, b1) - max(a0, a1)) for a0, b0 in spans(0) for a1, b1 in spans(1))


def ideal_speedup(m: int, p: int = 2) -> float:
    """GPipe's best case over the naive split: bubble fraction (p−1)/(m+p−1), i.e. p·m/(m+p−1) (01)."""
    return p * m / (m + p - 1)


def bubble_fraction(m: int, p: int = 2) -> float:
    """Fraction of a pipelined step each stage sits idle, in GPipe's ideal model (01)."""
    if m < 1 or p < 1:
        raise ValueError(f"need m >= 1 and p >= 1, got m={m}, p={p}")
    return (p - 1) / (m + p - 1)


def run_gpipe(ms: Sequence[int] = (1, 2, 4, 8), width: int = 512, depth: int = 4, batch: int = 2048,
              repeats: int = 5, timeout: float = 120, message_rounds: int = 0) -> list[dict]:
    """Measured step time of the hand-written GPipe for each m, against the ideal (01).

    Rows: micro-batches, step seconds (median, every round, the shown round), speedup over m = 1, ideal
    speedup, efficiency = their ratio, the events of the median round on both stages (for the timeline),
    and ``compute_rounds[stage]``: that stage's summed forward and backward seconds in each round. With ``message_rounds``, each row
    also has ``message_bytes`` (one micro-batch's activation, the size of each of its two messages)
    and ``message_s`` (one-way seconds of a send/recv of that size, one figure per round).
    """
    ms = list(ms)
    if 1 not in ms:
        ms = [1, *ms]
    for m in ms:
        _check_split(batch, m)
    res = launch(gpipe_worker, 2, args=(width, depth, batch, ms, repeats, message_rounds), timeout=timeout,
                 verbose=False)
    base = res[0][1]["step_s"]
    rows = []
    for m in ms:
        speed = base / res[0][m]["step_s"]
        rows.append({"microbatches": m, "microbatch_rows": batch // m, "step_s": res[0][m]["step_s"],
                     "step_range": (min(res[0][m]["step_rounds"]), max(res[0][m]["step_rounds"])),
                     "step_rounds": res[0][m]["step_rounds"], "shown_round_s": res[0][m]["shown_round_s"],
                     "compute_rounds": [res[0][m]["compute_rounds"], res[1][m]["compute_rounds"]],
                     "speedup": speed, "ideal_speedup": ideal_speedup(m), "efficiency": speed / ideal_speedup(m),
                     "events": sorted(res[0][m]["events"] + res[1][m]["events"], key=lambda e: e[3])})
        if message_rounds:
            rows[-1]["message_bytes"] = batch // m * width * 4
            rows[-1]["message_s"] = res[0]["messages"][batch // m * width * 4]
    return rows


def busy_share(events: list[tuple], stage: int) -> float:
    """Fraction of one step (first start to last end, over both stages) that ``stage`` spent computing (01)."""
    span = max(e[4] for e in events) - min(e[3] for e in events)
    return sum(b - a for s, _, _, a, b in events if s == stage) / span


def stage_cost(width: int = 512, depth: int = 4, batch: int = 2048, ms: Sequence[int] = (1, 2, 4, 8, 16),
               repeats: int = 5, device: torch.device | str | None = None) -> list[dict]:
    """Time stage 0's forward+backward over the whole batch cut into m pieces, where rank 0 computes (01).

    ``device``: by default the one rank 0 of ``run_gpipe``'s two-process launch computes on
    (``local_device(choose_backend(2))``: ``cuda:0`` under nccl, else the CPU), so the pieces are
    timed where the pipelined steps ran; on the CPU with one thread, as each rank runs, and on a GPU
    with a ``torch.cuda.synchronize`` before each clock reading, so the kernels are timed, not their
    launch. A pipeline only helps if cutting the batch costs little. ``cost_vs_m1``: the median
    time over ``repeats`` rounds (each taking every m, in an order rotated from round to round) against the first m's median; ``cost_range``: the fastest and
    slowest round on the same scale (the spread to read the median against), ``cost_rounds`` every round on it; ``ratio_range``: the
    ratio's range when m = 1's own rounds are taken at their fastest and slowest too.
    """
    from ..launching.ranks import choose_backend
    device = torch.device(device) if device is not None else local_device(choose_backend(2))
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda *a: None)
    stage = make_stages(width, depth)[0].to(device)
    x, _ = synthetic_batch(batch, width)
    x = x.to(device)
    ms = list(ms)
    for m in ms:
        _check_split(batch, m)
    times: dict[int, list[float]] = {m: [] for m in ms}
    with torch_threads(1):
        for r, order in enumerate(rotated_rounds(ms, repeats)):  # round 0 warms up; every round takes every m, rotated
            for m in order:
                sync(device)
                t0 = time.perf_counter()
                for xi in x.chunk(m):
                    stage(xi).sum().backward()
                sync(device)
                if r:
                    times[m].append(time.perf_counter() - t0)
    base = statistics.median(times[ms[0]])
    t1 = times[ms[0]]
    where = (tr("01.where_cpu", "on the CPU with one thread") if device.type == "cpu" else
             tr("01.where_device", "on {device}", device=device))
    return [{"microbatches": m, "microbatch_rows": batch // m, "seconds": statistics.median(times[m]), "stage": 0,
             "where": where, "cost_vs_m1": statistics.median(times[m]) / base,
             "cost_range": (min(times[m]) / base, max(times[m]) / base),
             "cost_rounds": [t / base for t in times[m]],
             "ratio_range": (min(times[m]) / max(t1), max(times[m]) / min(t1))} for m in ms]
