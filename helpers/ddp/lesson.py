"""Notebook 03 (DistributedDataParallel): its exercises and its benchmark."""
from __future__ import annotations

from ..core.checks import Exercise
from ..core.device import hardware_label
from ..dist.ranks import choose_backend
from ..dist.throughput import run_throughput
from .instruments import run_ddp_equivalence_check


NOTEBOOK = "03_ddp"


EXERCISES = [
    Exercise("03.rank3_n10_k4", "int", digest="9a5bcd552aaadc3f8701ccb90fe40d73566a92beda416d3dd0c17d81881c32ba",
             hint="The sampler pads the dataset to a multiple of the number of ranks, then deals it out like cards.",
             why="Every rank gets the same number of samples, so no rank waits at the all-reduce."),
    Exercise("03.padding_n10_k4", "int", digest="ef42eaa49ef601f793eaf5c5f383534409aebf15f3fe4aac3656b2220acd904d",
             hint="Round the dataset size up to the next multiple of the number of ranks.",
             why="Padding repeats samples; drop_last=True drops the tail instead."),
    Exercise("03.allreduce_8", "int", digest="f532e3e731f475049d439455a19a9f7e483ca09da04242755b6898bfb35fc470",
             hint="all_reduce with the default op sums what every rank contributes; each rank contributes rank + 1.",
             why="Every rank ends with the same sum: that is what makes DDP's replicas identical."),
]


def bench_ddp(global_batch: int = 2048, seconds: float = 2.0) -> dict:
    """1 vs 2 single-threaded DDP processes at the same global batch, plus the equivalence error (03)."""
    batches = tuple(sorted({256, 1024, global_batch}))
    rows = run_throughput(nprocs_list=(1, 2), batches=batches, seconds=seconds, repeats=3)
    eq = run_ddp_equivalence_check(nprocs=2, batch=64)
    t1 = next(r for r in rows if r["processes"] == 1 and r["global_batch"] == global_batch)
    t2 = next(r for r in rows if r["processes"] == 2 and r["global_batch"] == global_batch)
    return {"backend": choose_backend(2), "device": hardware_label("cpu" if choose_backend(2) == "gloo" else "cuda:0",
                                                                  threads=1),
            "model": "DigitsCNN", "global_batch": global_batch, "throughput_1": round(t1["samples_per_s"], 1),
            "throughput_2": round(t2["samples_per_s"], 1), "speedup": round(t2["samples_per_s"] / t1["samples_per_s"], 3),
            "max_abs_diff": eq["max_abs_diff"], "allreduce_bytes_per_step": t2["allreduce_bytes_per_step"],
            "speedup_by_batch": {r["global_batch"]: round(r["speedup"], 3) for r in rows if r["processes"] == 2}}


BENCH = {"ddp": bench_ddp}


def readme_figures(results: dict) -> str:
    """The key figures of notebook 03 for the README's table, from ``bench_ddp``'s JSON."""
    d = results["ddp"]
    by = ", ".join(f"{s:.2f}× at {b}" for b, s in d["speedup_by_batch"].items())
    return (f"DigitsCNN, {d['backend']}, 2 vs 1 single-threaded processes by global batch: {by} "
            f"({d['throughput_1']:.0f} → {d['throughput_2']:.0f} samples/s at {d['global_batch']}); DDP step = "
            f"single-process step to {d['max_abs_diff']:.0e}")
