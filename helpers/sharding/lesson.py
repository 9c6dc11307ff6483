"""Notebook 09 (sharding): its exercises and its benchmark."""
from __future__ import annotations

import random
from typing import Callable

from ..core.checks import Exercise
from ..dist.launcher import describe_launch
from .recipe import model_parameters
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
            return f"your function raised {type(e).__name__}: {e} for numels={numels}, world_size={n}"
        finally:
            shares._zero1_watch = None
        if called:
            return ("zero1_partition calls the course's own partition (memory_per_rank or the rule behind it): the "
                    "exercise is to write the rule yourself, from numels and world_size")
        if not isinstance(got, (list, tuple)) or len(got) != n:
            return f"for world_size={n} return a list of {n} numbers (elements per rank); got {got!r}"
        if sum(got) != sum(numels):
            return f"for numels={numels} your ranks hold {sum(got)} elements in all, not {sum(numels)}"
        if list(got) != want:
            return (f"for numels={numels}, world_size={n} your split {list(got)} differs from "
                    "ZeroRedundancyOptimizer's: which tensor does it place first, and on which rank?")
    return None


EXERCISES = [
    Exercise("09.replica_gb_13b", "number", digits=3, digest="b2b31f2bb4f464b76a5e9e8f2c3280d22d62cf33716082628b15ec9b642f8b9d",
             hint="Section 1's table: what do parameters, gradients and Adam's state cost per parameter under each "
                  "accounting, and what does DDP divide? (answer in GB, 10⁹ bytes)",
             why="16 bytes per parameter under either accounting, before a single activation: no single GPU holds a "
                 "13B model's training state."),
    Exercise("09.zero3_gb_13b_32", "number", digits=3, digest="b9921cc5b743522f2862a9234e1482ef75cb77a7c745c0ac05135325c138cf0a",
             hint="Which of the three parts does ZeRO-3 shard? (answer in GB)",
             why="The same under either accounting. Sharded 32 ways the state leaves most of a 40 GB GPU for "
                 "the gathered layers and activations; ZeRO-1 alone would leave the weights and gradients whole on "
                 "every GPU: 52 GB in DeepSpeed's fp16 accounting, 104 GB in PyTorch's fp32 one."),
    Exercise("09.zero1_partition", "code", behaviour=_partition_behaviour,
             hint="Read ZeroRedundancyOptimizer._partition_parameters in torch/distributed/optim/"
                  "zero_redundancy_optimizer.py: in which order does it take the tensors, and how does it pick the rank "
                  "for each?",
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
