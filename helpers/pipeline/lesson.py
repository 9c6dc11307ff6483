"""Notebook 01 (model parallelism and pipelining): its exercises and its benchmark."""
from __future__ import annotations

import random
from typing import Callable

from ..core.checks import Exercise
from ..core.device import hardware_label
from ..core.i18n import tr
from ..launching.ranks import choose_backend
from .instruments import run_gpipe
from .library import run_library


NOTEBOOK = "01_model_parallel"
_ONE_F_ONE_B_ID = "01.one_f_one_b"


EXERCISES = [
    Exercise("01.bubble_slow_stage", "number", digits=2,
             digest="00a48f7a2b2ba094083e98ed79581fb937822a8c71416c707718548d07b38b34",
             hint="GPipe's formula assumes stages of equal cost, so it does not apply here: draw the two stages' "
                  "timelines, one box per forward and backward, each starting as soon as its input has arrived and "
                  "its stage is free. How long is the step, and for how much of it does stage 0 compute?",
             why="The slower stage sets the pace: the fast one waits for it in both phases, far more than GPipe's "
                 "equal-stage bubble says."),
    Exercise("01.ideal_p4_m8", "number", digits=3,
             digest="0d3a826830f3036248a94da3732112c328cf5aee74fb9f699131a94ff007e5c7",
             hint="Count each step's length in the time one stage needs for the whole batch: how many slots does "
                  "the pipelined step take at m = 4, how many at m = 8, and how long is one slot in each?",
             why="Doubling m does not halve the step: it only shrinks the bubble, the p − 1 slots at the ends."),
    Exercise("01.peak_1f1b_stage2", "int", digest="e3644c53892dd99bedb12e2b40e32ba0a032b9154df7fffadc0bf224815f7e53",
             hint="First count the micro-batches the third stage holds at its peak under 1F1B (while m is small, "
                  "that count depends on m), then how many rows each of them has; try the m that divide 64 in turn.",
             why="Under 1F1B a stage's peak is a fixed number of micro-batches, so at a fixed batch more micro-batches "
                 "mean fewer rows held; under GPipe a stage holds the whole batch's activations, however large m is."),
    Exercise(_ONE_F_ONE_B_ID, "code", behaviour=lambda fn: _one_f_one_b_behaviour(fn),
             hint="A stage holds each micro-batch from its forward until its backward, and 1F1B caps how many it "
                  "holds (section 5 printed the cap on stage s), even if the stage must then wait for a backward: "
                  "that sets how many forwards come first. After that, alternate.",
             why="Warm-up forwards, then one forward and one backward in turn, then the drain: the order "
                 "Schedule1F1B runs: memory no longer grows with m."),
]


def _one_f_one_b_behaviour(fn: Callable, rng: random.Random | None = None) -> str | None:
    """The student's ``one_f_one_b(m, p, stage)`` run on every stage of varied pipelines, judged by rule (01).

    No stored orders: for each (m, p) it runs the student's order on all p stages in a simulated
    pipeline (a forward takes 1 time slot, a backward 2) and asks what 1F1B promises: every
    micro-batch once, in order, a backward after its forward, no stage waiting forever, the step
    as short as GPipe's, (m + p − 1) × 3 slots, and no stage holding more micro-batches than the
    ones still in flight below it. Only 1F1B's order meets all of these (checked by enumerating
    every order for p ≤ 4, m ≤ 4 in tests/test_pipeline_exercises.py). A few fixed cases first (m < p,
    p = 1, one micro-batch), then random ones beyond any short table.
    """
    rng = rng or random.Random()
    cases = [(4, 2), (6, 4), (3, 4), (1, 3), (5, 1), (2, 2)]
    cases += [(rng.randint(1, 16), rng.randint(2, 8)) for _ in range(12)]
    for m, p in cases:
        orders = []
        for s in range(p):
            got = fn(m, p, s)
            problem = _one_stage_problem(got, m, p, s)
            if problem:
                return problem
            orders.append([x.strip().upper() for x in got])
        problem = _pipeline_problem(orders, m, p)
        if problem:
            return problem
    return None


def _one_stage_problem(got: object, m: int, p: int, s: int) -> str | None:
    call = f"one_f_one_b({m}, {p}, {s})"
    if not isinstance(got, (list, tuple)) or not all(isinstance(x, str) for x in got):
        return tr("lesson.one_f_one_b.not_strings", "{call} returned {got!r}; return a list of strings like "
                  "['F0', 'F1', 'B0', …]", call=call, got=got)
    got = [x.strip().upper() for x in got]
    if sorted(got) != sorted([f"F{i}" for i in range(m)] + [f"B{i}" for i in range(m)]):
        return tr("lesson.one_f_one_b.each_once", "{call} must list each of F0…F{last} and B0…B{last} exactly once "
                  "(it returned {got})", call=call, last=m - 1, got=got)
    if any(got.index(f"B{i}") < got.index(f"F{i}") for i in range(m)):
        return tr("lesson.one_f_one_b.backward_first", "in {call} a micro-batch runs its backward before its forward",
                  call=call)
    if [x for x in got if x[0] == "F"] != [f"F{i}" for i in range(m)] or \
            [x for x in got if x[0] == "B"] != [f"B{i}" for i in range(m)]:
        return tr("lesson.one_f_one_b.order", "in {call} the forwards (and the backwards) must run in micro-batch "
                  "order", call=call)
    if _peak(got) > min(p - s, m):
        return tr("lesson.one_f_one_b.peak", "{call} holds {peak} micro-batches at once at its peak, more than 1F1B "
                  "ever holds on that stage: 1F1B runs that stage's next backward first, even if it must wait for it, "
                  "to keep memory from growing with m", call=call, peak=_peak(got))
    return None


def _pipeline_problem(orders: list[list[str]], m: int, p: int) -> str | None:
    """Run every stage's order together; say what goes wrong, or None (01)."""
    end: dict[tuple[str, int, int], int] = {}
    free, pos = [0] * p, [0] * p
    while any(pos[s] < 2 * m for s in range(p)):
        moved = False
        for s in range(p):
            if pos[s] == 2 * m:
                continue
            kind, i = orders[s][pos[s]][0], int(orders[s][pos[s]][1:])
            need = [("F", s - 1, i)] if kind == "F" and s else [("B", s + 1, i)] if kind == "B" and s < p - 1 else []
            if all(n in end for n in need):
                free[s] = max([free[s]] + [end[n] for n in need]) + (1 if kind == "F" else 2)
                end[(kind, s, i)] = free[s]
                pos[s] += 1
                moved = True
        if not moved:
            stuck = ", ".join(tr("lesson.one_f_one_b.stuck_stage", "stage {stage} at {op}", stage=s,
                                 op=orders[s][pos[s]]) for s in range(p) if pos[s] < 2 * m)
            return tr("lesson.one_f_one_b.deadlock", "with p = {p} stages and m = {m} micro-batches, your orders wait "
                      "on each other forever ({stuck}): a backward needs the later stage's backward first, a forward "
                      "the earlier stage's forward", p=p, m=m, stuck=stuck)
    if max(free) > (m + p - 1) * 3:
        return tr("lesson.one_f_one_b.too_slow", "with p = {p} stages and m = {m} micro-batches (a forward taking 1 "
                  "time slot, a backward 2) your orders take {slots} slots, where GPipe and 1F1B take "
                  "(m + p − 1) × 3 = {best}: a stage waits while it could be computing", p=p, m=m, slots=max(free),
                  best=(m + p - 1) * 3)
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
