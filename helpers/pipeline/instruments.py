"""Model parallelism and pipelining, measured: timelines, step times, the bound, the cost of small pieces (01).

The instruments of notebook 01: they run the recipe (``helpers.pipeline.recipe``) on two real
processes, record when each stage computes, time it against the bubble bound, and check the
library schedules against the unsplit model.
"""
from __future__ import annotations

import statistics
import time
from typing import Sequence

import torch
import torch.distributed as dist
from torch import nn

from ..core.measure import torch_threads
from ..dist.launcher import launch
from ..dist.ranks import agree, local_device
from .recipe import _check_split, build_schedule, gpipe_step, make_stages, schedule_step, synthetic_batch

__all__ = ["gpipe_worker", "busy_overlap", "ideal_speedup", "bubble_fraction", "run_gpipe", "stage_cost",
           "message_worker", "run_message_cost", "LiveCounter", "library_worker", "reference_gradients",
           "run_library", "gpipe_table"]



def gpipe_worker(rank: int, world_size: int, width: int, depth: int, batch: int, ms: Sequence[int],
                 repeats: int = 3) -> dict:
    """Time the hand-written 2-stage GPipe for each micro-batch count; keep the last step's events (01)."""
    if world_size != 2:
        raise ValueError("this pipeline has exactly 2 stages: launch it with nprocs=2")
    device = local_device()
    stage = make_stages(width, depth)[rank].to(device)
    opt = torch.optim.SGD(stage.parameters(), lr=1e-3)
    x, y = (t.to(device) for t in synthetic_batch(batch, width))
    out = {}
    for m in ms:
        _check_split(batch, m)
        gpipe_step(rank, stage, opt, x, y, m, width, [])  # warm-up
        times, events = [], []
        for _ in range(repeats):
            events = []
            dist.barrier()
            t0 = time.perf_counter()
            gpipe_step(rank, stage, opt, x, y, m, width, events)
            times.append(agree(time.perf_counter() - t0, "max"))
        t_start = agree(min(e[3] for e in events), "min")  # one clock (CLOCK_MONOTONIC is shared on one machine)
        out[m] = {"step_s": statistics.median(times),
                  "events": [(s, k, i, a - t_start, b - t_start) for s, k, i, a, b in events]}
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
              repeats: int = 5, timeout: float = 120) -> list[dict]:
    """Measured step time of the hand-written GPipe for each m, against the ideal (01).

    Rows: micro-batches, step seconds, speedup over m = 1, ideal speedup, efficiency = their ratio,
    and the events of one step on both stages (for the timeline).
    """
    ms = list(ms)
    if 1 not in ms:
        ms = [1, *ms]
    for m in ms:
        _check_split(batch, m)
    res = launch(gpipe_worker, 2, args=(width, depth, batch, ms, repeats), timeout=timeout, verbose=False)
    base = res[0][1]["step_s"]
    rows = []
    for m in ms:
        speed = base / res[0][m]["step_s"]
        rows.append({"microbatches": m, "microbatch_rows": batch // m, "step_s": res[0][m]["step_s"],
                     "speedup": speed, "ideal_speedup": ideal_speedup(m), "efficiency": speed / ideal_speedup(m),
                     "events": sorted(res[0][m]["events"] + res[1][m]["events"], key=lambda e: e[3])})
    return rows


def stage_cost(width: int = 512, depth: int = 4, batch: int = 2048, ms: Sequence[int] = (1, 2, 4, 8, 16),
               repeats: int = 5) -> list[dict]:
    """Time one stage's forward+backward over the whole batch cut into m pieces, on one thread (01).

    A pipeline only helps if cutting the batch costs little: small matrix products run less
    efficiently, so the same rows cost more in many small pieces.
    """
    stage = make_stages(width, depth)[0]
    x, _ = synthetic_batch(batch, width)
    rows = []
    with torch_threads(1):
        for m in ms:
            _check_split(batch, m)
            times = []
            for r in range(repeats + 1):
                t0 = time.perf_counter()
                for xi in x.chunk(m):
                    stage(xi).sum().backward()
                if r:  # the first is a warm-up
                    times.append(time.perf_counter() - t0)
            rows.append({"microbatches": m, "microbatch_rows": batch // m, "seconds": statistics.median(times)})
    for r in rows:
        r["cost_vs_m1"] = r["seconds"] / rows[0]["seconds"]
    return rows


def message_worker(rank: int, world_size: int, sizes: Sequence[int], repeats: int = 20) -> list[dict]:
    """One-way time of a send/recv of each size in bytes, from a ping-pong between ranks 0 and 1 (01)."""
    out = []
    device = local_device()
    for size in sizes:
        buf = torch.zeros(size // 4, device=device)
        for r in range(repeats + 2):
            if r == 2:
                dist.barrier()
                t0 = time.perf_counter()
            if rank == 0:
                dist.send(buf, 1)
                dist.recv(buf, 1)
            else:
                dist.recv(buf, 0)
                dist.send(buf, 0)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        out.append({"bytes": size, "one_way_s": (time.perf_counter() - t0) / repeats / 2})
    return out


def run_message_cost(sizes: Sequence[int] = (4 * 2**10, 64 * 2**10, 256 * 2**10, 2**20), timeout: float = 60) -> list[dict]:
    """Per-message cost of ``torch.distributed`` send/recv between two processes on this machine (01)."""
    return launch(message_worker, 2, args=(list(sizes),), timeout=timeout, verbose=False)[0]


class LiveCounter(nn.Module):
    """Wraps a stage and counts the micro-batches whose activations it holds (forward done, backward not)."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner
        self.live = 0
        self.peak = 0

    def _backward_done(self, grad: torch.Tensor) -> torch.Tensor:
        self.live -= 1
        return grad

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.inner(x)
        if out.requires_grad:
            self.live += 1
            self.peak = max(self.peak, self.live)
            out.register_hook(self._backward_done)
        return out


def library_worker(rank: int, world_size: int, width: int, depth: int, batch: int, schedules: Sequence[str],
                   ms: Sequence[int], repeats: int = 3) -> dict:
    """Train with ``PipelineStage`` + ``ScheduleGPipe``/``Schedule1F1B``; gradients, losses, peaks, times (01)."""
    device = local_device()
    x, y = synthetic_batch(batch, width)
    x, y = x.to(device), y.to(device)
    out: dict = {}
    for name in schedules:
        for m in ms:
            if name == "1f1b" and m < world_size:
                continue  # 1F1B needs at least as many micro-batches as stages
            mod = LiveCounter(make_stages(width, depth)[rank].to(device))
            sched = build_schedule(mod, rank, world_size, device, name, m)

            def step() -> list:
                return schedule_step(sched, rank, world_size, x, y)

            losses = step()  # the first step: its gradients are compared with the unsplit model
            grads = [p.grad.detach().clone() for p in mod.inner.parameters()]
            mod.live = mod.peak = 0  # forget the first step's shape-inference forward
            times = []
            for _ in range(repeats):
                mod.zero_grad(set_to_none=True)
                dist.barrier()
                t0 = time.perf_counter()
                step()
                times.append(agree(time.perf_counter() - t0, "max"))
            out[(name, m)] = {"step_s": statistics.median(times), "peak_live": mod.peak,
                              "grads": [g.cpu() for g in grads],
                              "loss": (sum(l.item() for l in losses) / len(losses)) if losses else None}
    return out


def reference_gradients(width: int, depth: int, batch: int) -> tuple[float, list[torch.Tensor]]:
    """Loss and gradients of the *unsplit* model on the whole batch, for comparison (01)."""
    s0, s1 = make_stages(width, depth)
    x, y = synthetic_batch(batch, width)
    loss = nn.functional.cross_entropy(s1(s0(x)), y)
    loss.backward()
    return loss.item(), [p.grad for p in [*s0.parameters(), *s1.parameters()]]


def run_library(schedules: Sequence[str] = ("gpipe", "1f1b"), ms: Sequence[int] = (1, 2, 4, 8), width: int = 512,
                depth: int = 4, batch: int = 2048, repeats: int = 3, timeout: float = 180) -> list[dict]:
    """``torch.distributed.pipelining`` on 2 processes: equivalence, peak live micro-batches, speedup (01)."""
    for name in schedules:
        if name not in ("gpipe", "1f1b"):
            raise ValueError(f"unknown schedule {name!r}; choose 'gpipe' or '1f1b'")
    for m in ms:
        _check_split(batch, m)
    ms = sorted(set(ms) | {1})
    res = launch(library_worker, 2, args=(width, depth, batch, list(schedules), ms, repeats), timeout=timeout,
                 verbose=False)
    ref_loss, ref_grads = reference_gradients(width, depth, batch)
    base = max(res[0][("gpipe", 1)]["step_s"], res[1][("gpipe", 1)]["step_s"]) if "gpipe" in schedules else None
    rows = []
    for key in res[0]:
        name, m = key
        grads = res[0][key]["grads"] + res[1][key]["grads"]
        step_s = max(res[0][key]["step_s"], res[1][key]["step_s"])
        row = {"schedule": name, "microbatches": m, "step_s": step_s,
               "loss_diff": abs(res[1][key]["loss"] - ref_loss),
               "grad_max_abs_diff": max((a - b).abs().max().item() for a, b in zip(grads, ref_grads)),
               "peak_live": [res[0][key]["peak_live"], res[1][key]["peak_live"]],
               "ideal_speedup": ideal_speedup(m)}
        if base:
            row["speedup"] = base / step_s
            row["efficiency"] = row["speedup"] / row["ideal_speedup"]
        rows.append(row)
    return rows


def gpipe_table(rows: list[dict]) -> str:
    """The measured-vs-ideal table (01)."""
    lines = [f"{'m':>3} {'rows/mb':>8} {'step ms':>8} {'speedup':>8} {'ideal':>6} {'efficiency':>10} {'bubble':>7}"]
    for r in rows:
        lines.append(f"{r['microbatches']:>3} {r['microbatch_rows']:>8} {1e3 * r['step_s']:>8.1f} {r['speedup']:>7.2f}× "
                     f"{r['ideal_speedup']:>5.2f}× {r['efficiency']:>10.2f} {bubble_fraction(r['microbatches']):>7.2f}")
    return "\n".join(lines)
