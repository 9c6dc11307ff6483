"""Notebook 09 (sharding): its exercises and its benchmark."""
from __future__ import annotations

import random
import sys
import time
from typing import Callable

from ..core.checks import Exercise
from ..core.i18n import tr
from ..launching.launcher import describe_launch
from .recipe import BYTES_PER_PARAM, SHARDED, memory_per_rank, model_parameters
from .strategies import run_sharding, run_tp_block


NOTEBOOK = "09_sharding"


def _partition_cases() -> list[tuple[list[int], int]]:
    """Ties, one rank, more ranks than tensors, our model on 3 ranks, and fresh random models at every check (09)."""
    fixed = [([262144] * 8 + [512] * 8, 3), ([10, 7, 7, 3, 1], 2), ([5, 5, 5, 5], 4), ([100, 1, 1, 1, 1, 1], 3),
             ([8, 6, 4, 4, 2], 3), ([3, 9, 1, 9], 2), ([4, 2], 5), ([7], 1)]
    rnd = random.Random()  # new cases at every check: a table of answers cannot pass
    return fixed + [([rnd.choice((1, 2, 3, 4, 6, 8, 16, 64, 100)) * rnd.randint(1, 9) for _ in range(rnd.randint(1, 14))],
                     rnd.randint(1, 6)) for _ in range(30)]


def _partition_rule(numels: list[int], n: int) -> list[int]:
    """The check's copy of ZeroRedundancyOptimizer's rule (09)."""
    from . import shares

    if shares._zero1_watch is not None:  # called from inside the student's function: refused like the course's rule
        shares._zero1_watch.append(1)
    want = [0] * n
    for k in sorted(numels, reverse=True):  # torch: largest tensor first, to the least-loaded rank (lowest on ties)
        want[want.index(min(want))] += k
    return want


def _partition_behaviour(fn: Callable) -> str | None:
    """The student's ``zero1_partition(numels, world_size)`` against ZeroRedundancyOptimizer's rule (09)."""
    from . import shares

    for numels, n in _partition_cases():
        want = _partition_rule(numels, n)
        shares._zero1_watch = called = []
        try:
            got = fn(list(numels), n)
        except Exception as e:  # noqa: BLE001 (a student's bug, reported in words)
            return tr("lesson.zero1_partition.raised", "your function raised {error}: {message} for numels={numels}, "
                      "world_size={n}", error=type(e).__name__, message=e, numels=numels, n=n)
        finally:
            shares._zero1_watch = None
        if called:
            return tr("lesson.zero1_partition.uses_rule", "zero1_partition calls the course's own partition "
                      "(memory_per_rank or the rule behind it): the exercise is to write the rule yourself, from "
                      "numels and world_size")
        if not isinstance(got, (list, tuple)) or len(got) != n:
            return tr("lesson.zero1_partition.not_list", "for world_size={n} return a list of {n} numbers (elements "
                      "per rank); got {got!r}", n=n, got=got)
        if sum(got) != sum(numels):
            return tr("lesson.zero1_partition.total", "for numels={numels} your ranks hold {total} elements in all, "
                      "not {want}", numels=numels, total=sum(got), want=sum(numels))
        if list(got) != want:
            return tr("lesson.zero1_partition.split", "for numels={numels}, world_size={n} your split {got} differs "
                      "from ZeroRedundancyOptimizer's: which tensor does it place first, and on which rank?",
                      numels=numels, n=n, got=list(got))
    return None


_SIZING = (("ddp", "zero1", "zero2", "zero3"), ("amp", "deepspeed"))


def _per_param(strategy: str, precision: str) -> tuple[int, list[int]]:
    """The check's copy of section 1's tables: bytes per parameter left whole, and those of each sharded part (09)."""
    whole, sharded = 0, []
    for part, per in zip(("params", "grads", "optim"), BYTES_PER_PARAM[(precision, "adam")]):
        if part in SHARDED[strategy]:
            sharded.append(per)
        else:
            whole += per
    return whole, sharded


def _state_bytes(params: int, n: int, strategy: str, precision: str) -> int:
    """One GPU's parameters, gradients and Adam state as the calculator counts them, from Ψ (09)."""
    whole, sharded = _per_param(strategy, precision)
    return whole * params + sum(-(-per * params // n) for per in sharded)


def _fewest_rule(params: int, gpu_gb: float, strategy: str, precision: str) -> int | None:
    """The fewest GPUs whose per-GPU state fits in ``gpu_gb`` × 10⁹ bytes; None when no number of GPUs does (09)."""
    cap = gpu_gb * 10**9
    if _state_bytes(params, 10**15, strategy, precision) > cap:   # as many GPUs as you like: the whole parts alone
        return None
    lo, hi = 1, 1
    while _state_bytes(params, hi, strategy, precision) > cap:
        hi *= 2
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if _state_bytes(params, mid, strategy, precision) <= cap else (mid + 1, hi)
    return lo


def _largest_rule(gpu_gb: float, n: int, strategy: str, precision: str) -> int:
    """The most parameters whose per-GPU state fits in ``gpu_gb`` × 10⁹ bytes on ``n`` GPUs (09)."""
    cap = gpu_gb * 10**9
    whole, sharded = _per_param(strategy, precision)
    psi = int(cap / (whole + sum(sharded) / n)) + 2
    while _state_bytes(psi, n, strategy, precision) > cap:
        psi -= 1
    return psi


def _sizing_cases(with_n: bool) -> list[tuple]:
    """Every strategy in both accountings, fresh sizes at every check (a table cannot pass), some that no N fits (09)."""
    rnd = random.Random()
    strategies, precisions = _SIZING
    cases = []
    for s in strategies:
        for p in precisions:
            for _ in range(3):
                gb = rnd.choice((16, 24, 40, 48, 80, 94, 141, 192)) + rnd.choice((0, 0.5))
                if with_n:
                    cases.append((gb, rnd.choice((1, 2, 3, 4, 6, 8, 12, 16, 32, 64, 100, 256)), s, p))
                else:
                    cases.append((int(gb * 10**9 / rnd.uniform(2, 40)) + rnd.randint(1, 999), gb, s, p))
    if not with_n:   # where 10⁹ and 2³⁰ bytes a GB give different answers
        cases += [(5_200_000_000, 80, "ddp", "amp"), (10_400_000_000, 80, "zero1", "deepspeed"),
                  (20_500_000_000, 80, "zero3", "amp"), (3_100_000_000, 40, "zero2", "amp"),
                  (15_100_000_000, 80, "zero2", "amp"), (9_300_000_000, 80, "zero1", "amp"),  # and fp32 against fp16
                  (1_003_000_000_000, 80, "zero3", "amp"), (3_001_000_000_000, 40, "zero3", "deepspeed"),
                  (19_910_000_000, 80, "zero1", "deepspeed"), (9_991_000_000, 80, "zero1", "amp"),
                  (39_890_000_000, 80, "zero2", "deepspeed")]   # hundreds to thousands of GPUs: no capped search passes
    rnd.shuffle(cases)
    return cases


def _watched_codes() -> frozenset:
    """The code objects a sizing answer may not reach: the calculator itself (not the argument-checking wrapper it
    shares with ``comm_per_step``) and the check's own rules, by any name or import route (09)."""
    return frozenset(f.__code__ for f in (memory_per_rank.__wrapped__, _fewest_rule, _largest_rule, _state_bytes,
                                          _per_param))


_TIME_LIMIT_S = 10.0  # one call of a sizing answer: a loop that never ends is stopped and refused, not waited for


class _TooSlow(BaseException):
    """A sizing answer still running at the time limit (a BaseException: ``except Exception`` in it cannot keep it going)."""


def _calculator_called(fn: Callable, *args) -> tuple[object, bool]:
    """``fn(*args)`` and whether it reached the course's calculator (memory_per_rank) or the check's rules (09).

    Raises :class:`_TooSlow` from inside ``fn`` at its first Python line after :data:`_TIME_LIMIT_S` seconds.
    """
    codes = _watched_codes()
    called = []
    old, old_trace = sys.getprofile(), sys.gettrace()
    deadline = time.monotonic() + _TIME_LIMIT_S

    def watch(frame, event, arg):  # noqa: ANN001 (sys.setprofile's signature)
        if event == "call" and frame.f_code in codes:
            called.append(1)

    def clock(frame, event, arg):  # noqa: ANN001 (sys.settrace's signature): every line, past the deadline: stop
        if time.monotonic() > deadline:
            raise _TooSlow
        return clock

    sys.setprofile(watch)
    sys.settrace(clock)
    try:
        got = fn(*args)
    finally:
        sys.settrace(old_trace)
        sys.setprofile(old)
    return got, bool(called)


def _sizing_behaviour(fn: Callable, name: str, rule: Callable, with_n: bool) -> str | None:
    """The student's sizing function against the rule on fresh cases; the calculator refused inside it (09)."""
    for case in _sizing_cases(with_n):
        want = rule(*case)
        call = f"{name}({', '.join(repr(a) for a in case)})"
        try:
            got, called = _calculator_called(fn, *case)
        except _TooSlow:
            if with_n:
                return tr("lesson.sizing.too_slow", "{call} was still running after {limit:g} s: does each loop in it "
                          "end?", call=call, limit=_TIME_LIMIT_S)
            return tr("lesson.sizing.too_slow_none", "{call} was still running after {limit:g} s: does each loop in it "
                      "end, also where no number of GPUs fits (return None there)?", call=call, limit=_TIME_LIMIT_S)
        except Exception as e:  # noqa: BLE001 (a student's bug, reported in words)
            return tr("lesson.sizing.raised", "your function raised {error}: {message} for {call}",
                      error=type(e).__name__, message=e, call=call)
        if called:
            return tr("lesson.sizing.uses_calculator", "{name} calls the course's calculator (memory_per_rank) or the "
                      "check's own rule: the exercise is to do the arithmetic yourself, from section 1's tables",
                      name=name)
        wrong = (tr("lesson.sizing.not_largest", "{call} returned {got!r}: not the most parameters whose state fits",
                    call=call, got=got) if with_n else
                 tr("lesson.sizing.not_fewest", "{call} returned {got!r}: not the fewest GPUs whose state fits (None "
                    "where no number does)", call=call, got=got))
        if want is None or got is None:
            if got != want:
                return wrong
            continue
        if isinstance(got, bool) or not isinstance(got, (int, float)) or got != got:
            if with_n:
                return tr("lesson.sizing.not_number", "{call} returned {got!r}: return a number", call=call, got=got)
            return tr("lesson.sizing.not_number_none", "{call} returned {got!r}: return a number (or None)",
                      call=call, got=got)
        if (abs(got - want) > 1e-6 * want) if with_n else got != want:
            return wrong
    return None


def _fewest_behaviour(fn: Callable) -> str | None:
    """The student's ``fewest_gpus(params, gpu_gb, strategy, precision)`` against the rule (09)."""
    return _sizing_behaviour(fn, "fewest_gpus", _fewest_rule, with_n=False)


def _largest_behaviour(fn: Callable) -> str | None:
    """The student's ``largest_params(gpu_gb, world_size, strategy, precision)`` against the rule (09)."""
    return _sizing_behaviour(fn, "largest_params", _largest_rule, with_n=True)


EXERCISES = [
    Exercise("09.fewest_gpus", "code", behaviour=_fewest_behaviour,
             hint="Section 1's tables: which bytes per parameter does this strategy leave whole on every GPU, in this "
                  "accounting, and which does it divide by N? Can adding GPUs ever shrink the whole part?",
             why="ZeRO-3 fits any model given enough GPUs; DDP, ZeRO-1 and ZeRO-2 stop where the parts they keep "
                 "whole fill the GPU alone, and PyTorch's fp32 weights and gradients reach that limit before "
                 "DeepSpeed's fp16 ones."),
    Exercise("09.largest_params", "code", behaviour=_largest_behaviour,
             hint="Exercise 1 the other way round: what is fixed now, and what do you solve for?",
             why="The same arithmetic read the other way: the memory a strategy leaves per parameter sets the largest "
                 "model a cluster can train, before activations."),
    Exercise("09.zero1_partition", "code", behaviour=_partition_behaviour,
             hint="Deal the tensors out one at a time, greedily, to keep the ranks even: in which order do you "
                  "take them, which rank gets the next one, and which rank wins when two hold the same?",
             why="Whole tensors balance well when there are many of similar size; with 3 ranks and 8 equal weights "
                 "one rank gets less, so the per-rank bytes are not Ψ/N exactly."),
]


def bench_sharding(repeats: int = 5) -> dict:
    """Bytes per rank, parameters and step times of DDP, ZeRO-1, FSDP2 and TP on 1, 2, 4 ranks, with predictions (09)."""
    rows = run_sharding((1, 2, 4), repeats=repeats)
    tp = run_tp_block(2)
    keep = ("strategy", "world_size", "measured_bytes", "predicted_bytes", "max_abs_diff_vs_unsharded")
    results = []
    for r in rows:
        out = {k: r[k] for k in keep}
        out["measured_bytes"] = {k: r["measured_bytes"][k] for k in ("params", "grads", "optim")}
        out["predicted_bytes"] = {k: r["predicted_bytes"][k] for k in ("params", "grads", "optim")}
        out["wire_bytes_per_step"] = round(r["comm"]["wire_bytes"])
        out["step_s"] = round(r["step_s"], 5) if "step_s" in r else None
        out["predicted_step_s"] = round(r["predicted_step_s"], 5) if "predicted_step_s" in r else None
        results.append(out)
    timed = [r for r in results if r["step_s"] and r["world_size"] > 1]
    worst = max(timed, key=lambda r: abs(r["predicted_step_s"] / r["step_s"] - 1))
    return {"device": describe_launch(2), "parameters": model_parameters(), "results": results,
            "bytes_exact": all(r["measured_bytes"] == r["predicted_bytes"] for r in results),
            "step_prediction_error": round(max(abs(r["predicted_step_s"] / r["step_s"] - 1) for r in timed), 4),
            "step_prediction_worst": {"strategy": worst["strategy"], "world_size": worst["world_size"],
                                      "signed": round(worst["predicted_step_s"] / worst["step_s"] - 1, 4)},
            "tp_block": {"output_diff": tp[0]["output_diff"], "weight_grad_diff": tp[0]["weight_grad_diff"],
                         "weight_bytes_fraction": tp[0]["weight_bytes"] / tp[0]["full_weight_bytes"],
                         "all_reduces": {"forward": tp[0]["forward"]["messages"],
                                         "backward": tp[0]["backward"]["messages"]}}}


BENCH = {"sharding": bench_sharding}


def readme_figures(results: dict) -> str:
    """The key figures of notebook 09 for the README's table, from ``bench_sharding``'s JSON."""
    s = results["sharding"]
    fsdp4 = next(r for r in s["results"] if r["strategy"] == "fsdp2" and r["world_size"] == 4)
    return (f"Ψ = {s['parameters']:,}: bytes per rank {'exactly' if s['bytes_exact'] else 'NOT'} as predicted for DDP, "
            f"ZeRO-1, FSDP2, TP on 1, 2, 4 ranks (FSDP2 on 4: {sum(fsdp4['measured_bytes'].values()) / 1e6:.1f} MB of "
            f"{16 * s['parameters'] / 1e6:.1f}); {_worst_step(s)}; "
            f"TP block: weights ×{s['tp_block']['weight_bytes_fraction']:.2f}, one all-reduce forward")


def _worst_step(s: dict) -> str:
    """The benchmark run's worst step-time prediction, named, in the words notebook 09 prints it (README)."""
    w = s.get("step_prediction_worst")
    if w is None:  # results from before the worst pair was recorded
        return f"that run's worst step-time prediction on 2 ranks off by {s['step_prediction_error']:.0%}"
    return (f"that run's worst step-time prediction: {w['strategy']} on {w['world_size']} ranks, "
            f"{abs(w['signed']):.0%} {'over' if w['signed'] > 0 else 'under'} the measured step")
