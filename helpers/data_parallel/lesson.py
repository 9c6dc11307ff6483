"""Notebook 02 (inside nn.DataParallel): its exercises and its benchmark."""
from __future__ import annotations

from ..core.checks import Exercise
from ..core.device import hardware_label
from ..dist.throughput import run_throughput
from .instruments import run_four_steps, thread_variants, time_four_steps


NOTEBOOK = "02_data_parallel"


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
