"""Model parallelism and pipelining, measured (01_model_parallel).

- :class:`TwoDeviceModel`: the lecture's plain split, ``seq1`` on one device, ``seq2`` on another.
- :func:`gpipe_worker`: a hand-written GPipe schedule over two real processes (one stage each,
  ``torch.distributed`` send/recv), recording when every forward and backward ran.
- :func:`library_worker`: the same model with ``torch.distributed.pipelining``'s ``PipelineStage``
  and ``ScheduleGPipe`` / ``Schedule1F1B``, checked against the unsplit model.
"""
from __future__ import annotations

import statistics
import time
from typing import Sequence

import torch
import torch.distributed as dist
from torch import nn

from .device import gpu_count
from .launch import launch
from .ranks import agree, local_device
from .utils import torch_threads
from .checks import Exercise


# --- the plain split ------------------------------------------------------------------------------

def two_devices() -> tuple[torch.device, torch.device, str]:
    """Two devices for the two halves: cuda:0/cuda:1 when there are two GPUs, else what exists, said (01)."""
    n = gpu_count()
    if n >= 2:
        return torch.device("cuda:0"), torch.device("cuda:1"), "two GPUs: seq1 on cuda:0, seq2 on cuda:1"
    if n == 1:
        return (torch.device("cuda:0"), torch.device("cuda:0"),
                "one GPU: both halves on cuda:0 (the code is the same; with two GPUs they would be on two)")
    return (torch.device("cpu"), torch.device("cpu"),
            "no GPU: both halves on the CPU (the code is the same; with two GPUs they would be on two)")


class TwoDeviceModel(nn.Module):
    """The lecture's model parallel split: ``seq1`` on ``dev0``, ``seq2`` on ``dev1`` (01)."""

    def __init__(self, dev0: torch.device | str = "cpu", dev1: torch.device | str = "cpu", width: int = 256,
                 in_features: int = 64, num_classes: int = 10) -> None:
        super().__init__()
        self.dev0, self.dev1 = torch.device(dev0), torch.device(dev1)
        self.seq1 = nn.Sequential(nn.Flatten(), nn.Linear(in_features, width), nn.ReLU(),
                                  nn.Linear(width, width), nn.ReLU()).to(self.dev0)
        self.seq2 = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, num_classes)).to(self.dev1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.seq1(x.to(self.dev0))
        return self.seq2(x.to(self.dev1))  # the activation crosses devices here


def parameters_per_device(model: nn.Module) -> dict[str, int]:
    """How many parameters live on each device (01)."""
    out: dict[str, int] = {}
    for p in model.parameters():
        out[str(p.device)] = out.get(str(p.device), 0) + p.numel()
    return out


# --- the pipelined model --------------------------------------------------------------------------

def make_stages(width: int = 512, depth: int = 4, num_classes: int = 10, seed: int = 0) -> list[nn.Sequential]:
    """Two equal stages of ``depth`` Linear+ReLU layers of ``width``; the second adds a small head (01)."""
    for name, v in (("width", width), ("depth", depth)):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    torch.manual_seed(seed)

    def block() -> list[nn.Module]:
        return [nn.Linear(width, width), nn.ReLU()]

    s0 = nn.Sequential(*sum((block() for _ in range(depth)), []))
    s1 = nn.Sequential(*sum((block() for _ in range(depth)), []), nn.Linear(width, num_classes))
    return [s0, s1]


def synthetic_batch(batch: int, width: int = 512, num_classes: int = 10, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A fixed random batch (inputs and class targets) for timing the pipeline (01)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, width, generator=g), torch.randint(0, num_classes, (batch,), generator=g)


def _check_split(batch: int, m: int) -> None:
    if not isinstance(m, int) or m < 1:
        raise ValueError(f"the number of micro-batches must be a positive int, got {m!r}")
    if batch % m:
        raise ValueError(f"batch {batch} does not split into {m} equal micro-batches; choose m dividing the batch")


def _gpipe_step(rank: int, stage: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor, m: int,
                width: int, events: list) -> None:
    """One training step of a 2-stage GPipe: all forwards, then all backwards, micro-batch by micro-batch."""
    dev = x.device
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda *a: None)

    def now() -> float:
        sync(dev)  # on a GPU, wait for the kernels so the timeline shows when they really ran
        return time.perf_counter()

    opt.zero_grad(set_to_none=True)
    mb = x.shape[0] // m
    pending = []
    if rank == 0:
        grads = [torch.empty(mb, width, device=dev) for _ in range(m)]
        outs = []
        for i, xi in enumerate(x.chunk(m)):
            t0 = now()
            out = stage(xi)
            events.append((0, "F", i, t0, now()))
            pending.append(dist.isend(out.detach(), dst=1))
            outs.append(out)
        recvs = [dist.irecv(g, src=1) for g in grads]
        for i in range(m):
            recvs[i].wait()
            t0 = now()
            outs[i].backward(grads[i])
            events.append((0, "B", i, t0, now()))
    else:
        acts = [torch.empty(mb, width, device=dev) for _ in range(m)]
        recvs = [dist.irecv(a, src=0) for a in acts]
        losses = []
        for i, yi in enumerate(y.chunk(m)):
            recvs[i].wait()
            acts[i].requires_grad_(True)
            t0 = now()
            losses.append(nn.functional.cross_entropy(stage(acts[i]), yi) / m)
            events.append((1, "F", i, t0, now()))
        for i in range(m):
            t0 = now()
            losses[i].backward()
            events.append((1, "B", i, t0, now()))
            pending.append(dist.isend(acts[i].grad, dst=0))
    for w in pending:
        w.wait()
    opt.step()
    sync(dev)


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
        _gpipe_step(rank, stage, opt, x, y, m, width, [])  # warm-up
        times, events = [], []
        for _ in range(repeats):
            events = []
            dist.barrier()
            t0 = time.perf_counter()
            _gpipe_step(rank, stage, opt, x, y, m, width, events)
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


# --- why small micro-batches stop paying ------------------------------------------------------------

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


# --- torch.distributed.pipelining ---------------------------------------------------------------------

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
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

    classes = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}
    device = local_device()
    x, y = synthetic_batch(batch, width)
    x, y = x.to(device), y.to(device)
    out: dict = {}
    for name in schedules:
        for m in ms:
            if name == "1f1b" and m < world_size:
                continue  # 1F1B needs at least as many micro-batches as stages
            mod = LiveCounter(make_stages(width, depth)[rank].to(device))
            stage = PipelineStage(mod, rank, world_size, device)
            sched = classes[name](stage, n_microbatches=m, loss_fn=nn.functional.cross_entropy)

            def step() -> list:
                losses: list = []
                if rank == 0:
                    sched.step(x)
                else:
                    sched.step(target=y, losses=losses)
                return losses

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


# --- plots and tables ----------------------------------------------------------------------------------

def gpipe_table(rows: list[dict]) -> str:
    """The measured-vs-ideal table (01)."""
    lines = [f"{'m':>3} {'rows/mb':>8} {'step ms':>8} {'speedup':>8} {'ideal':>6} {'efficiency':>10} {'bubble':>7}"]
    for r in rows:
        lines.append(f"{r['microbatches']:>3} {r['microbatch_rows']:>8} {1e3 * r['step_s']:>8.1f} {r['speedup']:>7.2f}× "
                     f"{r['ideal_speedup']:>5.2f}× {r['efficiency']:>10.2f} {bubble_fraction(r['microbatches']):>7.2f}")
    return "\n".join(lines)


def plot_timelines(rows: list[dict], label: str = ""):
    """Gantt charts of one step per micro-batch count: which stage computes what, when (01)."""
    import matplotlib.pyplot as plt

    from .plots import finish

    fig, axes = plt.subplots(len(rows), 1, figsize=(10, 1.3 * len(rows) + 0.6), squeeze=False)
    t_max = max(e[4] for r in rows for e in r["events"])
    colors = {"F": "#4C72B0", "B": "#DD8452"}
    for ax, r in zip(axes[:, 0], rows):
        for s, kind, i, a, b in r["events"]:
            ax.barh(1 - s, b - a, left=a * 1e3 / 1e3, color=colors[kind], edgecolor="white")
            if r["microbatches"] <= 8:
                ax.text(a + (b - a) / 2, 1 - s, f"{kind}{s}.{i}", ha="center", va="center", fontsize=6, color="white")
        ax.set_yticks([1, 0], ["stage 0", "stage 1"])
        ax.set_xlim(0, t_max * 1.02)
        ax.set_title(f"m = {r['microbatches']}: step {1e3 * r['step_s']:.0f} ms", fontsize=9, loc="left")
    axes[-1, 0].set_xlabel("seconds since the step began (blue: forward, orange: backward, gaps: idle)")
    if label:
        fig.suptitle(label, fontsize=9)
    fig.tight_layout()
    return finish(fig)


def plot_speedup(rows: list[dict], library_rows: list[dict] | None = None, label: str = ""):
    """Measured speedup over m = 1 against the ideal 2m/(m+1) (01)."""
    import matplotlib.pyplot as plt

    from .plots import finish

    fig, ax = plt.subplots(figsize=(6, 3.6))
    ms = [r["microbatches"] for r in rows]
    fine = [1 + k / 10 for k in range(0, 10 * (max(ms) - 1) + 1)]
    ax.plot(fine, [ideal_speedup(m) for m in fine], "k:", label="ideal 2m/(m+1)")
    ax.plot(ms, [r["speedup"] for r in rows], "o-", label="hand-written GPipe")
    for name in sorted({r["schedule"] for r in library_rows or []}):
        rs = [r for r in library_rows if r["schedule"] == name and "speedup" in r]
        ax.plot([r["microbatches"] for r in rs], [r["speedup"] for r in rs], "s--", label=f"pipelining {name}")
    ax.set(xlabel="micro-batches m", ylabel="speedup over m = 1", xscale="log", title="pipelining 2 stages")
    ax.set_xticks(ms, [str(m) for m in ms])
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    if label:
        fig.suptitle(label, fontsize=9)
    fig.tight_layout()
    return finish(fig)


def plot_split_sweep(rows: list[dict], cost_rows: list[dict], label: str = ""):
    """Efficiency of the pipeline and cost of one stage against micro-batch size, at a fixed batch (01)."""
    import matplotlib.pyplot as plt

    from .plots import finish

    fig, ax = plt.subplots(1, 2, figsize=(10, 3.4))
    ax[0].plot([r["microbatch_rows"] for r in rows], [r["speedup"] for r in rows], "o-", label="measured")
    ax[0].plot([r["microbatch_rows"] for r in rows], [r["ideal_speedup"] for r in rows], "k:", label="ideal 2m/(m+1)")
    ax[0].set(xscale="log", xlabel="rows per micro-batch", ylabel="speedup over m = 1", title="the split-size sweep")
    ax[0].invert_xaxis()
    ax[1].plot([r["microbatch_rows"] for r in cost_rows], [r["cost_vs_m1"] for r in cost_rows], "o-", color="C3")
    ax[1].axhline(1, color="gray", ls=":")
    ax[1].set(xscale="log", xlabel="rows per micro-batch", ylabel="stage time / time at m = 1",
              title="one stage alone: the same rows in smaller pieces")
    ax[1].invert_xaxis()
    for a in ax:
        a.grid(alpha=0.3)
    ax[0].legend()
    if label:
        fig.suptitle(label, fontsize=9)
    fig.tight_layout()
    return finish(fig)


EXERCISES = [
    Exercise("01.bubble_p4_m6", "number", digits=2, digest="0a4050d0a78a0ebea8f6a9b02fc8a09ba9bd6f644b41275288c1ba06e64e7a7c",
             hint="Draw the schedule: how many time slots does a stage wait while the pipe fills and drains, out "
                  "of all the slots of the step?",
             why="(p − 1)/(m + p − 1): with 4 stages, 6 micro-batches leave a third of the step idle."),
    Exercise("01.ideal_p2_m8", "number", digits=3, digest="2bca165c1c0440125246c175d2072b06e0a7d76d74e5e41b3d3d31732241d48c",
             hint="The naive split does p·m micro-batch slots' work in sequence; the pipeline needs m + p − 1 slots.",
             why="It approaches p only as m grows: the bubble never quite disappears."),
    Exercise("01.peak_1f1b_p4", "int", digest="9fddc51fe9297c9346b7a3a35ff6d88019e92bd74f63523e0bf807bc6cb6f27d",
             hint="Under 1F1B the first stage starts its first backward as soon as the first micro-batch has come "
                  "back from the last stage: how many forwards has it run by then?",
             why="1F1B holds at most p micro-batches, whatever m is: memory no longer grows with m."),
]
