"""DataParallel's steps on any machine, timed and accounted; threads against processes (02).

On a CPU, ``torch.nn.parallel``'s primitives do not run (even ``parallel_apply`` needs CUDA), so
:func:`four_steps_cpu` does the same four steps with plain tensor operations and Python threads
(a simulation of DataParallel's design, said wherever it runs). The rest measures: what each
step costs, the bytes each device holds, and where the GIL stops threads.
"""
from __future__ import annotations

import copy
import time
from typing import Callable

import torch
from torch import nn
from torch.func import functional_call

from ..core.data import digits_batch
from ..core.device import gpu_count
from ..core.measure import max_abs_diff, run_threads, torch_threads
from ..core.models import DigitsCNN
from ..core.saved import SavedTensorTracker
from .recipe import four_steps_gpu
from .timing import timed

__all__ = ["four_steps_cpu", "output_device_accounting", "largest_batches", "run_four_steps", "time_four_steps",
           "thread_variants", "gil_probe", "LABELS"]


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
    inputs = timed(times, "scatter", lambda: list(x.chunk(n)))
    params = dict(model.named_parameters())
    replicas = timed(times, "replicate", lambda: [{k: p.clone() for k, p in params.items()} for _ in inputs])
    outputs: list[torch.Tensor | None] = [None] * len(inputs)
    shells = _shells(model, len(inputs))  # one module per thread: functional_call swaps parameters in place

    def run(i: int) -> None:
        outputs[i] = functional_call(shells[i], replicas[i], (inputs[i],))

    timed(times, "apply", lambda: run_threads(run, len(inputs)))
    out = timed(times, "gather", lambda: torch.cat(outputs))  # onto the output device (here: the same CPU)
    loss = nn.functional.cross_entropy(out, y)
    timed(times, "backward", loss.backward)
    return {"path": f"plain tensor ops and {len(inputs)} Python threads on the CPU", "times": times,
            "loss": loss.item(), "accounting": output_device_accounting(model, x, out, n)}


def output_device_accounting(model: nn.Module, x: torch.Tensor, out: torch.Tensor, n: int) -> dict:
    """Bytes DataParallel leaves on each of ``n`` devices in a step, device 0 being the output device (02).

    Every device holds its input chunk, a replica of the parameters, the activations its replica
    saves for backward (measured with ``helpers.memory.SavedTensorTracker``) and its outputs. The
    output device also holds the gathered outputs, the targets, the loss and — after backward —
    every gradient, reduced onto the original model that lives there.
    """
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
    res["grad_max_abs_diff"] = max_abs_diff((p.grad for p in model.parameters()), (p.grad for p in reference.parameters()))
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


def _throughput(step: Callable[[], None], batch: int, seconds: float) -> float:
    for _ in range(2):
        step()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        step()
        n += 1
    return n * batch / (time.perf_counter() - t0)


LABELS = {"single": "1 thread, whole batch", "threads_forward_only": "2 threads, forward only",
          "threads_forward_backward": "2 threads, forward + backward"}  # human names for the keys below


def thread_variants(batch: int = 256, seconds: float = 1.0, threads: int = 2) -> dict:
    """Samples/s of one training step done three ways in this process, torch on 1 thread each (02).

    - ``single``: one thread, the whole batch.
    - ``threads_forward_only``: replicas' forwards in threads, then one ``backward`` call from the
      main thread; on a CPU autograd runs all of it on one thread (on GPUs, DataParallel's only
      home, autograd runs each device's part on that device's own worker thread).
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
        run_threads(work, threads)
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
            run_threads(step, 2)

        with torch_threads(1):
            t1 = _throughput(one, b, seconds)
            t2 = _throughput(two, 2 * b, seconds)
        rows.append({"batch_per_thread": b, "one_thread": t1, "two_threads": t2, "speedup": t2 / t1})
    return rows
