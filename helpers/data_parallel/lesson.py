"""Notebook 02 (inside nn.DataParallel): its exercises and its benchmark."""
from __future__ import annotations

from typing import Callable

from ..core.checks import Exercise
from ..core.device import hardware_label
from ..dist.throughput import run_throughput
from .instruments import run_four_steps, thread_variants, time_four_steps


NOTEBOOK = "02_data_parallel"


EXERCISES = [
    Exercise("02.gpus_idle_6_on_4", "int", digest="cd0d9dbc98e75c11a68faea66f39c24e0d221c338576a66acfb563f67e2f7d9c",
             hint="DataParallel scatters with torch.chunk: read its documentation on how big each chunk is, and "
                  "whether it always returns as many chunks as you ask for.",
             why="torch.chunk makes chunks of ceil(n / k) rows, so it can return fewer than k: DataParallel then "
                 "runs only as many replicas as there are chunks."),
    Exercise("02.gathered_bytes", "int", digest="bc143d107c5be96e1d85e7c34c2d5c7a8456889e545b65ad42ae2d8af509248a",
             hint="Every sample's output has one float32 (4 bytes) per class, and gather collects all of them on "
                  "one device.",
             why="Hundreds of MB on GPU 0 alone: why DataParallel users shrink the batch."),
    Exercise("02.reduce_gradients", "code", behaviour=lambda fn: _reduce_behaviour(fn),
             hint="Each replica's backward left its share of the gradient in its own parameters' .grad; the model "
                  "needs the whole. Walk the model's parameters and the replicas' parameters side by side, and "
                  "mind parameters whose .grad is still None.",
             why="That sum is the backward of replicate: autograd does it on the output device every step, which "
                 "is one more reason GPU 0 works harder than the others."),
]


def _reduce_behaviour(reduce_gradients: Callable) -> str | None:
    """The student's ``reduce_gradients(model, replicas)`` against the whole batch's gradients (02)."""
    import copy

    import torch
    from torch import nn

    for rows, n in ((12, 3), (10, 4)):
        torch.manual_seed(rows)
        model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3))
        x, y = torch.randn(rows, 8), torch.randint(0, 3, (rows,))
        nn.functional.cross_entropy(model(x), y).backward()
        want = [p.grad.clone() for p in model.parameters()]
        model.zero_grad(set_to_none=True)
        replicas = [copy.deepcopy(model) for _ in x.chunk(n)]
        for r, xi, yi in zip(replicas, x.chunk(n), y.chunk(n)):  # each chunk's share of the batch-mean loss
            (nn.functional.cross_entropy(r(xi), yi, reduction="sum") / rows).backward()
        kept = [[p.grad.clone() for p in r.parameters()] for r in replicas]
        reduce_gradients(model, replicas)
        got = [p.grad for p in model.parameters()]
        if any(g is None for g in got):
            return "after your function some of the model's parameters have no .grad"
        if max((g - w).abs().max().item() for g, w in zip(got, want)) > 1e-6:
            return (f"with {rows} rows on {len(replicas)} replicas the model's gradients differ from one device's "
                    "on the whole batch")
        if any((p.grad - k).abs().max().item() > 0 for r, ks in zip(replicas, kept) for p, k in zip(r.parameters(), ks)):
            return "your function changed the replicas' gradients; only the model's should change"
    return None


def bench_data_parallel(batch: int = 256) -> dict:
    """DataParallel's four steps timed, the output device's byte share, threads vs processes (02)."""
    steps = time_four_steps(batch=batch)
    share = run_four_steps(batch=batch)["output_device_share"]
    threads = thread_variants(batch=batch, seconds=2.0)
    procs = run_throughput(nprocs_list=(1, 2), batches=(batch,), seconds=2.0)
    return {"device": hardware_label("cpu", threads=1), "path": steps["path"], "global_batch": batch,
            "step_seconds": {k: round(v, 6) for k, v in steps["step_seconds"].items()},
            "output_device_byte_share": round(share, 4),
            "throughput": {"single": round(threads["single"], 1),
                           "threads_forward_only": round(threads["threads_forward_only"], 1),
                           "threads": round(threads["threads_forward_backward"], 1),
                           "processes": round(next(r["samples_per_s"] for r in procs if r["processes"] == 2), 1)}}


BENCH = {"data_parallel": bench_data_parallel}


def readme_figures(results: dict) -> str:
    """The key figures of notebook 02 for the README's table, from ``bench_data_parallel``'s JSON."""
    d = results["data_parallel"]
    t, s = d["throughput"], d["step_seconds"]
    return (f"batch {d['global_batch']}: apply {1e3 * s['apply']:.1f} ms, backward {1e3 * s['backward']:.1f} ms, "
            f"scatter+replicate+gather {1e3 * (s['scatter'] + s['replicate'] + s['gather']):.2f} ms per step; output "
            f"device {d['output_device_byte_share']:.1%} of the bytes; vs 1 thread: forward-only threads "
            f"{t['threads_forward_only'] / t['single']:.2f}×, forward+backward threads {t['threads'] / t['single']:.2f}×, "
            f"2 processes {t['processes'] / t['single']:.2f}×")
