"""Inside ``nn.DataParallel``: the four steps, the output device's extra load, threads vs processes (02).

``nn.DataParallel`` runs one training step as: **scatter** the batch over the devices,
**replicate** the model onto each, **parallel_apply** the replicas in Python threads, **gather**
the outputs onto the output device; then the loss there, and backward through the replicas,
which sums the gradients onto the original model. On GPUs this module uses
``torch.nn.parallel``'s own primitives; those need CUDA (on a CPU even ``parallel_apply`` fails
with "Found no NVIDIA driver"), so on a CPU it runs the same steps with plain tensor
operations and Python threads, and says so.
"""
from __future__ import annotations

import copy
import threading
import time
from typing import Callable

import torch
from torch import nn
from torch.func import functional_call

from .data import load_datasets, tensors
from .device import gpu_count
from .models import DigitsCNN
from .utils import torch_threads
from .checks import Exercise


def digits_batch(batch: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch`` training digits (repeated if needed), the same for every variant compared (02)."""
    x, y = tensors(load_datasets("digits")["train"])
    reps = -(-batch // len(x))
    return x.repeat(reps, 1, 1, 1)[:batch], y.repeat(reps)[:batch]


def wrap_data_parallel(model: nn.Module) -> nn.DataParallel:
    """``nn.DataParallel(model)`` on the GPUs there are; on a CPU it is a pass-through (``device_ids == []``)."""
    if gpu_count():
        model = model.to("cuda:0")
    return nn.DataParallel(model)


# --- one step, opened up -------------------------------------------------------------------------

def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _timed(times: dict, name: str, fn: Callable):
    _sync()
    t0 = time.perf_counter()
    out = fn()
    _sync()
    times[name] = times.get(name, 0.0) + time.perf_counter() - t0
    return out


def four_steps_gpu(model: nn.Module, x: torch.Tensor, y: torch.Tensor, device_ids: list[int]) -> dict:
    """One step with ``torch.nn.parallel``'s scatter/replicate/parallel_apply/gather (02, ≥ 2 GPUs)."""
    from torch.nn.parallel import gather, parallel_apply, replicate, scatter

    times: dict[str, float] = {}
    out_dev = device_ids[0]
    torch.cuda.reset_peak_memory_stats()
    inputs = _timed(times, "scatter", lambda: scatter(x, device_ids))
    replicas = _timed(times, "replicate", lambda: replicate(model, device_ids[:len(inputs)]))
    outputs = _timed(times, "apply", lambda: parallel_apply(replicas, [(i,) for i in inputs]))
    out = _timed(times, "gather", lambda: gather(outputs, out_dev))
    loss = nn.functional.cross_entropy(out, y.to(out_dev))
    _timed(times, "backward", loss.backward)
    peaks = {f"cuda:{d}": torch.cuda.max_memory_allocated(d) for d in device_ids}
    return {"path": f"torch.nn.parallel on {len(device_ids)} GPUs", "times": times, "loss": loss.item(),
            "peak_bytes": peaks}


_SHELLS: dict[tuple[int, int], list[nn.Module]] = {}


def _shells(model: nn.Module, n: int) -> list[nn.Module]:
    """Structural copies of ``model``, one per thread, made once (parameters come from the replicas)."""
    key = (id(model), n)
    if key not in _SHELLS:
        _SHELLS[key] = [copy.deepcopy(model) for _ in range(n)]
    return _SHELLS[key]


def four_steps_cpu(model: nn.Module, x: torch.Tensor, y: torch.Tensor, n: int = 2) -> dict:
    """The same four steps on a CPU: chunks, autograd-connected parameter copies, threads, a concat (02).

    ``p.clone()`` is what ``replicate`` does per device (a copy that autograd connects back to
    the original), so ``backward`` sums the replicas' gradients onto the original parameters.
    """
    times: dict[str, float] = {}
    inputs = _timed(times, "scatter", lambda: list(x.chunk(n)))
    params = dict(model.named_parameters())
    replicas = _timed(times, "replicate", lambda: [{k: p.clone() for k, p in params.items()} for _ in inputs])
    outputs: list[torch.Tensor | None] = [None] * len(inputs)
    shells = _shells(model, len(inputs))  # one module per thread: functional_call swaps parameters in place

    def run(i: int) -> None:
        outputs[i] = functional_call(shells[i], replicas[i], (inputs[i],))

    def apply() -> None:
        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(inputs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    _timed(times, "apply", apply)
    out = _timed(times, "gather", lambda: torch.cat(outputs))  # onto the output device (here: the same CPU)
    loss = nn.functional.cross_entropy(out, y)
    _timed(times, "backward", loss.backward)
    return {"path": f"plain tensor ops and {len(inputs)} Python threads on the CPU", "times": times,
            "loss": loss.item(), "accounting": output_device_accounting(model, x, out, n)}


def output_device_accounting(model: nn.Module, x: torch.Tensor, out: torch.Tensor, n: int) -> dict:
    """Bytes DataParallel leaves on each of ``n`` devices in a step, device 0 being the output device (02).

    Every device holds its input chunk, a replica of the parameters, the activations its replica
    saves for backward (measured with ``helpers.memory.SavedTensorTracker``) and its outputs. The
    output device also holds the gathered outputs, the targets, the loss and — after backward —
    every gradient, reduced onto the original model that lives there.
    """
    from .memory import SavedTensorTracker

    batch = x.shape[0]
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    with SavedTensorTracker() as t:
        probe = model(x[:batch // n])
        act = t.peak
    del probe
    per_sample = (x[0].numel() * x.element_size() + out[0].numel() * out.element_size()) + act / (batch // n)
    per_device = [param_bytes + per_sample * batch / n for _ in range(n)]
    extra = batch * (out[0].numel() * out.element_size() + 8) + 4 + param_bytes
    per_device[0] += extra
    return {"per_device_bytes": [int(b) for b in per_device], "output_device_extra_bytes": int(extra),
            "output_device_share": per_device[0] / sum(per_device), "param_bytes": param_bytes,
            "per_sample_bytes": per_sample, "per_sample_extra_bytes": out[0].numel() * out.element_size() + 8,
            "devices": n}


def largest_batches(budget_bytes: int, acc: dict) -> dict:
    """Largest global batch when every device has ``budget_bytes``: limited by the output device (02).

    ``data_parallel``: the batch at which the output device is full; ``if_balanced``: the batch the
    devices could hold if none carried the output device's extra load.
    """
    n, p = acc["devices"], acc["param_bytes"]
    dp = (budget_bytes - 2 * p - 4) / (acc["per_sample_bytes"] / n + acc["per_sample_extra_bytes"])
    balanced = n * (budget_bytes - p) / acc["per_sample_bytes"]
    return {"data_parallel": max(0, int(dp)), "if_balanced": max(0, int(balanced))}


def run_four_steps(batch: int = 256, seed: int = 0) -> dict:
    """One DataParallel step opened into its four steps, checked against one device on the whole batch (02)."""
    x, y = digits_batch(batch)
    torch.manual_seed(seed)
    model = DigitsCNN()
    reference = copy.deepcopy(model)
    nn.functional.cross_entropy(reference(x), y).backward()
    n = gpu_count()
    if n >= 2:
        model = model.to("cuda:0")
        res = four_steps_gpu(model, x.to("cuda:0"), y, list(range(n)))
        total = sum(res["peak_bytes"].values())
        res["output_device_share"] = res["peak_bytes"]["cuda:0"] / total
    else:
        res = four_steps_cpu(model, x, y, n=2)
        res["output_device_share"] = res["accounting"]["output_device_share"]
    res["grad_max_abs_diff"] = max((a.grad.cpu() - b.grad).abs().max().item()
                                   for a, b in zip(model.parameters(), reference.parameters()))
    return res


def time_four_steps(batch: int = 256, repeats: int = 20) -> dict:
    """Mean seconds per step spent in scatter, replicate, apply, gather and backward (02)."""
    x, y = digits_batch(batch)
    model = DigitsCNN()
    n = gpu_count()
    totals: dict[str, float] = {}
    with torch_threads(1):  # one core per "device" on a CPU, as if each were its own
        for r in range(repeats + 2):
            model.zero_grad(set_to_none=True)
            if n >= 2:
                res = four_steps_gpu(model.to("cuda:0"), x.to("cuda:0"), y, list(range(n)))
            else:
                res = four_steps_cpu(model, x, y, n=2)
            if r >= 2:  # the first two are warm-up
                for k, v in res["times"].items():
                    totals[k] = totals.get(k, 0.0) + v
    return {"path": res["path"], "step_seconds": {k: v / repeats for k, v in totals.items()}}


# --- threads vs processes -------------------------------------------------------------------------------

def _throughput(step: Callable[[], None], batch: int, seconds: float) -> float:
    for _ in range(2):
        step()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        step()
        n += 1
    return n * batch / (time.perf_counter() - t0)


def thread_variants(batch: int = 256, seconds: float = 1.0, threads: int = 2) -> dict:
    """Samples/s of one training step done three ways in this process, torch on 1 thread each (02).

    - ``single``: one thread, the whole batch.
    - ``threads_forward_only``: DataParallel's way: replicas' forwards in threads, loss and
      backward on the main thread.
    - ``threads_forward_backward``: each thread runs forward *and* backward on its own replica;
      the main thread sums the gradients.
    """
    x, y = digits_batch(batch)
    torch.manual_seed(0)
    model = DigitsCNN()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    replicas = [copy.deepcopy(model) for _ in range(threads)]

    def single() -> None:
        opt.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    def forward_only() -> None:
        opt.zero_grad(set_to_none=True)
        four_steps_cpu(model, x, y, n=threads)
        opt.step()

    xs, ys = x.chunk(threads), y.chunk(threads)

    def work(i: int) -> None:
        replicas[i].zero_grad(set_to_none=True)
        (nn.functional.cross_entropy(replicas[i](xs[i]), ys[i]) / threads).backward()

    def forward_backward() -> None:
        ts = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        with torch.no_grad():
            for p, *rs in zip(model.parameters(), *(r.parameters() for r in replicas)):
                p.grad = sum(r.grad for r in rs)
        opt.step()
        with torch.no_grad():  # the replicas take the new weights, as DataParallel's replicate would
            for r in replicas:
                for p, q in zip(model.parameters(), r.parameters()):
                    q.copy_(p)

    with torch_threads(1):
        return {"single": _throughput(single, batch, seconds),
                "threads_forward_only": _throughput(forward_only, batch, seconds),
                "threads_forward_backward": _throughput(forward_backward, batch, seconds)}


def gil_probe(batches: tuple[int, ...] = (1, 4, 16, 64, 256), seconds: float = 0.5) -> list[dict]:
    """Speedup of 2 threads over 1 running forward+backward, at each per-thread batch size (02).

    With tiny batches a step is mostly Python (module calls, autograd bookkeeping), which holds
    the GIL, so two threads take turns; with large batches it is mostly inside operators, which
    release the GIL, so the threads really run in parallel.
    """
    rows = []
    for b in batches:
        x, y = digits_batch(b)
        models = [DigitsCNN() for _ in range(2)]

        def step(i: int) -> None:
            nn.functional.cross_entropy(models[i](x), y).backward()

        def one() -> None:
            step(0)

        def two() -> None:
            ts = [threading.Thread(target=step, args=(i,)) for i in range(2)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()

        with torch_threads(1):
            t1 = _throughput(one, b, seconds)
            t2 = _throughput(two, 2 * b, seconds)
        rows.append({"batch_per_thread": b, "one_thread": t1, "two_threads": t2, "speedup": t2 / t1})
    return rows


# --- plots -------------------------------------------------------------------------------------------

def plot_step_times(step_seconds: dict, label: str = ""):
    """Time per training step in each of DataParallel's steps, as a stacked bar (02)."""
    import matplotlib.pyplot as plt

    from .plots import finish

    fig, ax = plt.subplots(figsize=(7, 2.2))
    left = 0.0
    for i, (k, v) in enumerate(step_seconds.items()):
        ax.barh(0, v * 1e3, left=left, color=f"C{i}", label=f"{k} {v * 1e3:.2f} ms")
        left += v * 1e3
    ax.set(yticks=[], xlabel="milliseconds per training step", title="where a DataParallel step spends its time")
    ax.legend(ncol=5, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.45))
    if label:
        fig.suptitle(label, fontsize=9)
    fig.tight_layout()
    return finish(fig)


def plot_throughputs(results: dict, gil_rows: list[dict], label: str = ""):
    """Samples/s of each way to use two cores, and the 2-threads speedup against the batch (02)."""
    import matplotlib.pyplot as plt

    from .plots import finish

    fig, ax = plt.subplots(1, 2, figsize=(11, 3.4))
    names = list(results)
    ax[0].barh(names, [results[n] for n in names], color=[f"C{i}" for i in range(len(names))])
    for i, n in enumerate(names):
        ax[0].text(results[n], i, f" {results[n] / results['single']:.2f}×", va="center", fontsize=8)
    ax[0].set(xlabel="samples / s (global batch 256)", title="same work, four ways")
    ax[0].invert_yaxis()
    ax[1].plot([r["batch_per_thread"] for r in gil_rows], [r["speedup"] for r in gil_rows], "o-")
    ax[1].axhline(2, color="gray", ls=":", label="ideal 2×")
    ax[1].axhline(1, color="C3", ls=":", label="no gain")
    ax[1].set(xscale="log", xlabel="batch per thread", ylabel="2 threads / 1 thread",
              title="the GIL: small steps are mostly Python")
    ax[1].legend(fontsize=8)
    for a in ax:
        a.grid(alpha=0.3)
    if label:
        fig.suptitle(label, fontsize=9)
    fig.tight_layout()
    return finish(fig)


EXERCISES = [
    Exercise("02.chunks_10_on_4", "ints", digest="b7cd62fdcc78976335891d93b91e586712b51bc80718dc4f07aa980b2937730c",
             hint="torch.chunk makes chunks of ceil(n / k) rows and gives the last one what is left: try "
                  "[len(c) for c in torch.arange(10).chunk(4)].",
             why="Chunks are not always equal: the last device can get less work."),
    Exercise("02.gathered_bytes", "int", digest="bc143d107c5be96e1d85e7c34c2d5c7a8456889e545b65ad42ae2d8af509248a",
             hint="Every sample's output has one float32 (4 bytes) per class, and gather collects all of them on "
                  "one device.",
             why="Hundreds of MB on GPU 0 alone: why DataParallel users shrink the batch."),
]
