"""Notebook 01 (model parallelism and pipelining): its exercises and its benchmark."""
from __future__ import annotations

from ..core.checks import Exercise
from ..core.device import hardware_label
from ..dist.ranks import choose_backend
from .instruments import run_gpipe, run_library


NOTEBOOK = "01_model_parallel"


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


def bench_pipeline(batch: int = 2048, width: int = 512, depth: int = 4) -> dict:
    """Hand-written 2-stage GPipe for m = 1, 2, 4, 8 against the bound, plus the library schedules (01)."""
    rows = run_gpipe(ms=(1, 2, 4, 8), batch=batch, width=width, depth=depth)
    lib = run_library(ms=(1, 2, 4, 8), batch=batch, width=width, depth=depth)
    backend = choose_backend(2)
    keep = ("microbatches", "microbatch_rows", "step_s", "speedup", "ideal_speedup", "efficiency")
    return {"device": hardware_label("cpu" if backend == "gloo" else "cuda:0", processes=2, threads=1),
            "backend": backend, "processes": 2, "batch": batch, "width": width, "depth_per_stage": depth,
            "results": [{k: round(r[k], 4) if isinstance(r[k], float) else r[k] for k in keep} for r in rows],
            "library": [{"schedule": r["schedule"], "microbatches": r["microbatches"], "step_s": round(r["step_s"], 4),
                         "speedup": round(r["speedup"], 3), "efficiency": round(r["efficiency"], 3),
                         "peak_live_microbatches": r["peak_live"], "grad_max_abs_diff": r["grad_max_abs_diff"]}
                        for r in lib]}


BENCH = {"pipeline": bench_pipeline}


def readme_figures(results: dict) -> str:
    """The key figures of notebook 01 for the README's table, from ``bench_pipeline``'s JSON."""
    p = results["pipeline"]
    m8 = next(x for x in p["results"] if x["microbatches"] == 8)
    lib = max((x for x in p["library"] if x["microbatches"] > 1), key=lambda x: x["efficiency"])
    return (f"batch {p['batch']}, 2 stages × {p['depth_per_stage']} layers of width {p['width']}: hand-written GPipe "
            f"m = 8 ({m8['microbatch_rows']}-row micro-batches) {m8['speedup']:.2f}× over naive = "
            f"{m8['efficiency']:.2f} of the ideal {m8['ideal_speedup']:.2f}×; pipelining best {lib['schedule']} "
            f"m = {lib['microbatches']}: {lib['speedup']:.2f}× ({lib['efficiency']:.2f} of ideal)")
