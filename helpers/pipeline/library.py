"""``torch.distributed.pipelining`` measured: the library's GPipe and 1F1B against the unsplit model (01).

Loss and gradients against the unsplit model, the most micro-batches each stage held at once, and
the step timed in rotated rounds like the hand-written GPipe (``instruments.rotated_rounds``).
"""
from __future__ import annotations

import statistics
import time
from fractions import Fraction
from typing import Sequence

import torch
import torch.distributed as dist
from torch import nn

from ..core.i18n import tr
from ..launching.launcher import launch
from ..launching.ranks import agree, local_device
from .instruments import ideal_speedup, rotated_rounds
from .recipe import _check_split, build_schedule, make_stages, schedule_step, synthetic_batch

__all__ = ["LiveCounter", "library_worker", "reference_gradients", "run_library", "held_rows_lines"]


class LiveCounter(nn.Module):
    """Wraps a stage and counts the micro-batches whose activations it holds: from the forward until the output's gradient arrives (01)."""

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
    """Train with ``PipelineStage`` + ``ScheduleGPipe``/``Schedule1F1B``; gradients, losses, peaks, times (01).

    Timed as ``gpipe_worker`` times the hand-written GPipe: round 0 runs every configuration
    (schedule, m) once, untimed (its first step, whose loss and gradients are compared with the
    unsplit model: it also warms up); then each of ``repeats`` rounds takes every configuration
    once, in an order rotated from round to round, so whatever else the machine does falls on all
    of them alike.
    """
    device = local_device()
    x, y = synthetic_batch(batch, width)
    x, y = x.to(device), y.to(device)
    configs = [(name, m) for name in schedules for m in ms
               if not (name == "1f1b" and m < world_size)]  # 1F1B needs at least as many micro-batches as stages
    runs: dict = {}
    out: dict = {}
    times: dict = {key: [] for key in configs}
    for r, order in enumerate(rotated_rounds(configs, repeats)):
        for key in order:
            if r == 0:  # round 0, untimed: each configuration's first step (no update yet)
                name, m = key
                mod = LiveCounter(make_stages(width, depth)[rank].to(device))
                sched = build_schedule(mod, rank, world_size, device, name, m)
                opt = torch.optim.SGD(mod.parameters(), lr=1e-3)
                losses = schedule_step(sched, rank, world_size, x, y)  # its gradients are compared with the unsplit model
                out[key] = {"grads": [p.grad.detach().cpu().clone() for p in mod.inner.parameters()],
                            "loss": (sum(l.item() for l in losses) / len(losses)) if losses else None}
                mod.live = mod.peak = 0  # forget the first step's shape-inference forward
                runs[key] = (mod, sched, opt)
                continue
            mod, sched, opt = runs[key]
            dist.barrier()
            t0 = time.perf_counter()  # timed: the same parts as gpipe_step (zero_grad, the step, the SGD update)
            opt.zero_grad(set_to_none=True)
            schedule_step(sched, rank, world_size, x, y)
            opt.step()
            if device.type == "cuda":
                torch.cuda.synchronize(device)  # as gpipe_worker does: time the kernels, not their launch
            times[key].append(agree(time.perf_counter() - t0, "max"))
    for key in configs:
        out[key].update(step_s=statistics.median(times[key]), step_rounds=times[key], peak_live=runs[key][0].peak)
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
        row = {"schedule": name, "microbatches": m, "step_s": step_s, "step_rounds": res[0][key]["step_rounds"],
               "step_range": (min(res[0][key]["step_rounds"]), max(res[0][key]["step_rounds"])),
               "loss_diff": abs(res[1][key]["loss"] - ref_loss),
               "grad_max_abs_diff": max((a - b).abs().max().item() for a, b in zip(grads, ref_grads)),
               "peak_live": [res[0][key]["peak_live"], res[1][key]["peak_live"]],
               "ideal_speedup": ideal_speedup(m)}
        if base:
            row["speedup"] = base / step_s
            row["efficiency"] = row["speedup"] / row["ideal_speedup"]
        rows.append(row)
    return rows


def held_rows_lines(lib: list[dict], batch: int) -> str:
    """The peak held micro-batches as rows of the batch: each micro-batch is batch / m rows (01).

    A stage's saved activations grow with the rows it holds (same layers, same width), so GPipe's
    m micro-batches of batch / m rows are the whole batch at every m, and 1F1B's p − s of them are
    (p − s)/m of it.
    """
    lines = [tr("01.held_head", "rows whose activations each stage held at its peak (peak held × {batch:,} / m rows "
                                "per "
                "micro-batch):", batch=batch)]
    for r in lib:
        m = r["microbatches"]
        held = [k * (batch // m) for k in r["peak_live"]]
        shares = [tr("01.whole_batch", "the whole batch") if h == batch else
                  tr("01.share_of_batch", "{share} of the batch", share=Fraction(h, batch)) for h in held]
        if len(held) == 2:   # one message for the line: its two stages' fields are cut out unambiguously
            lines.append(tr("01.held_line", "{schedule} m = {m}: stage 0 {k0} × {rows} = {h0} rows ({share0}), stage 1 "
                            "{k1} × {rows} = {h1} rows ({share1})", schedule=f"{r['schedule']:>6}", m=m,
                            k0=r["peak_live"][0], k1=r["peak_live"][1], rows=f"{batch // m:,}", h0=f"{held[0]:,}",
                            h1=f"{held[1]:,}", share0=shares[0], share1=shares[1]))
            continue
        lines.append(f"{r['schedule']:>6} m = {m}: " + ", ".join(   # other stage counts: said as before
            f"stage {s} {k} × {batch // m:,} = {h:,} rows (" + ("the whole batch" if h == batch else
                                                                f"{Fraction(h, batch)} of the batch") + ")"
            for s, (k, h) in enumerate(zip(r["peak_live"], held))))
    return "\n".join(lines)
