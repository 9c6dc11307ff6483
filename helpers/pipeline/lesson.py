"""Notebook 01 (model parallelism and pipelining): its exercises and its benchmark."""
from __future__ import annotations

from typing import Callable

from ..core.checks import Exercise, digest
from ..core.device import hardware_label
from ..dist.ranks import choose_backend
from .instruments import run_gpipe, run_library


NOTEBOOK = "01_model_parallel"
_ONE_F_ONE_B_ID = "01.one_f_one_b"


EXERCISES = [
    Exercise("01.bubble_p4_m6", "number", digits=2, digest="0a4050d0a78a0ebea8f6a9b02fc8a09ba9bd6f644b41275288c1ba06e64e7a7c",
             hint="Draw the schedule: how many time slots does a stage wait while the pipe fills and drains, out "
                  "of all the slots of the step?",
             why="(p − 1)/(m + p − 1): with 4 stages, 6 micro-batches leave a third of the step idle."),
    Exercise("01.ideal_p4_m8", "number", digits=3, digest="f5f9be7f2a19dcf4c21b484b8f7282734de2e5d34604337915bcd737e196820a",
             hint="Count time slots: the naive split runs every stage's work for every micro-batch one after "
                  "another; how many slots does the pipelined step need from the first forward of stage 0 to the "
                  "last one of the last stage?",
             why="It approaches p only as m grows: the bubble never quite disappears."),
    Exercise("01.peak_1f1b_stage2", "int", digest="1e3082c467eb1429604d1f492974b0c3e1a93e6b6e49ed74b393db22dadbd9fa",
             hint="Follow one stage under 1F1B: it starts backwards as soon as the first micro-batch has come back "
                  "from the last stage. How many forwards has the third stage run by then, and does that number "
                  "ever grow afterwards?",
             why="A stage holds as many micro-batches as there are stages from it to the end: the last one holds one."),
    Exercise(_ONE_F_ONE_B_ID, "code", behaviour=lambda fn: _one_f_one_b_behaviour(fn),
             hint="A stage cannot run a backward until that micro-batch has passed every later stage and come "
                  "back: how many forwards can stage s start before the first one returns? After that, alternate.",
             why="Warm-up forwards, then one forward and one backward in turn, then the drain: the order "
                 "Schedule1F1B runs: memory no longer grows with m."),
]


_ONE_F_ONE_B = {  # digests of the reference order for (m, p, stage); the orders themselves are the exercise
    (4, 2, 0): "c55df297680954b215917097ffbea85de6d20fcb97bbbe09e800cef29e1de287",
    (4, 2, 1): "f94685f1acaa70f534c89b65382b0aad5c633eb6191efc800f8b25f8e6a1aa56",
    (6, 4, 0): "834f885583b5c4660e4c3d87c5f1ca61eefc14739de5e39a75499708b47b2e73",
    (6, 4, 3): "524662a22ee6c698719a957c3eb565b024ccd5ff9f316732af8946b4d3b9e3ad",
    (8, 4, 1): "d601a6e671abe98d88aa532bf9eef8f8584fdcf4da1cc97392cea8a1eacc83d0",
    (3, 4, 0): "20e180dfffc7eec1e9e04d2760cd9cb6589e8c0cb2630c015d4f6aa4c3594053",
}


def _one_f_one_b_behaviour(fn: Callable) -> str | None:
    """The student's ``one_f_one_b(m, p, stage)`` against 1F1B's order on each stage (01)."""
    for (m, p, s), want in _ONE_F_ONE_B.items():
        got = fn(m, p, s)
        if not isinstance(got, (list, tuple)) or not all(isinstance(x, str) for x in got):
            return f"one_f_one_b({m}, {p}, {s}) returned {got!r}; return a list of strings like ['F0', 'F1', 'B0', …]"
        got = [x.strip().upper() for x in got]
        if sorted(got) != sorted([f"F{i}" for i in range(m)] + [f"B{i}" for i in range(m)]):
            return f"one_f_one_b({m}, {p}, {s}) must list each of F0…F{m - 1} and B0…B{m - 1} exactly once"
        if any(got.index(f"B{i}") < got.index(f"F{i}") for i in range(m)):
            return f"in one_f_one_b({m}, {p}, {s}) a micro-batch runs its backward before its forward"
        if [x for x in got if x[0] == "F"] != [f"F{i}" for i in range(m)] or \
                [x for x in got if x[0] == "B"] != [f"B{i}" for i in range(m)]:
            return f"in one_f_one_b({m}, {p}, {s}) the forwards (and the backwards) must run in micro-batch order"
        if digest(_ONE_F_ONE_B_ID, f"{(m, p, s)}:" + ",".join(got)) != want:
            return (f"one_f_one_b({m}, {p}, {s}) = {got} is a valid order but not 1F1B's: it holds "
                    f"{_peak(got)} micro-batches at its peak")
    return None


def _peak(order: list[str]) -> int:
    live = peak = 0
    for x in order:
        live += 1 if x[0] == "F" else -1
        peak = max(peak, live)
    return peak


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
