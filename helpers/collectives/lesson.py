"""Notebook 08 (collectives): its exercises and its benchmark."""
from __future__ import annotations

from ..core.answers import untouched_skeleton
from ..core.checks import Exercise
from ..core.i18n import tr
from ..launching.launcher import describe_launch
from .instruments import SWEEP_SIZES, run_sweep
from .ring_exercise import CHECK_RANKS, run_reduce_scatter_check
from .scratch_ddp import run_scratch_ddp


NOTEBOOK = "08_collectives"


def _reduce_scatter_behaviour(fn) -> str | None:
    """The student's ring reduce-scatter on 4 ranks, then on 3, judged message by message and by its result (08)."""
    from ..launching.failures import LaunchError
    from .stall import RingDeadlock

    if untouched_skeleton(fn):  # nothing to run yet: the check says ⏳ without starting processes
        return tr("lesson.reduce_scatter.skeleton", "your function is still the skeleton")
    for nprocs in CHECK_RANKS:  # 4 ranks, then 3: a schedule written for one world size only is refused
        try:
            res = run_reduce_scatter_check(fn, nprocs=nprocs)
        except LaunchError as e:
            return tr("lesson.reduce_scatter.rank_raised", "on {nprocs} ranks, a rank raised: {cause}", nprocs=nprocs,
                      cause=e.cause)
        except RingDeadlock as e:
            return str(e)
        except TimeoutError:
            return tr("lesson.reduce_scatter.timeout", "on {nprocs} ranks, the ranks waited for each other until the "
                      "timeout: does every rank send before it waits to receive (isend), and do all ranks make the "
                      "same number of steps?", nprocs=nprocs)
        if res["problem"]:
            return res["problem"]
    return None


EXERCISES = [
    Exercise("08.ring_ms_n8_16mb", "number", digits=3,
             digest="30e78b49f75f3afe5c5cb2c592c73ecaaf933a177952a155a557482dbb9c11c8",
             hint="Count the steps of the bandwidth-optimal ring on 8 ranks and the bytes each step sends; each step "
                  "costs α plus its bytes times β (answer in ms).",
             why="2(n − 1) steps of size/n: the bytes cost nearly 2 · size · β whatever n is, while the latency part, "
                 "2(n − 1) α, grows with every rank added."),
    Exercise("08.ring_crossover_kb_n8", "number", digits=3,
             digest="dfb7c467301a0791e821f80d84b67fe1a899258898bd5650b733f8f37ea75b68",
             hint="Split the ring's time into the part all its steps' α add up to and the part their bytes add up to; "
                  "at which message size are the two equal (answer in kB)?",
             why="n · α / β: the more ranks, the larger a message must be before bandwidth, not latency, sets the "
                 "ring's time."),
    Exercise("08.reduce_scatter", "code", behaviour=_reduce_scatter_behaviour,
             hint="Follow the chunk that must end complete on rank r: which rank has to send it first, at step 0, so "
                  "that it reaches r after n − 1 steps? Receive into a separate buffer, then add it.",
             why="n − 1 steps of size/n: half of the ring all-reduce, and on its own the collective FSDP and ZeRO-2 "
                 "use to shard gradients; which piece ends where is only a matter of where each chunk starts."),
    Exercise("08.chunk_sums_r2_n5", "ints", digest="346fbfb5651ac4fd9444575caad664f161130875d25d0283f6eaa5195aed8a14",
             hint="Follow the recipe's schedule step by step: at step s rank r sends its running sum of chunk r − s to "
                  "the right and adds what arrives from the left into chunk r − s − 1. A running sum carries every "
                  "value added into it so far; count them for each of rank 2's chunks.",
             why="After the reduce-scatter each rank holds one chunk complete and the others as partial sums of fewer "
                 "ranks (its own chunk, sent at step 0, never receives anything); the all-gather then overwrites those "
                 "with the finished chunks."),
]


def bench_collectives(repeats: int = 9) -> dict:
    """All-reduce and the hand-written ring over 1 KiB … 16 MiB on 2 ranks; α–β; DDP from scratch vs DDP (08)."""
    sweep = run_sweep(SWEEP_SIZES, nprocs=2, repeats=repeats)
    ddp = run_scratch_ddp(nprocs=2, timed_steps=10, repeats=repeats)
    keep = ("bytes", "library_s", "ring_s", "ring_model_s", "library_busbw_gbs", "ring_busbw_gbs")
    return {"device": describe_launch(2), "world_size": 2,
            "sizes": [{k: r[k] if k == "bytes" else round(r[k], 7) for k in keep} for r in sweep["sizes"]],
            "alpha_s": sweep["alpha_s"], "beta_s_per_byte": sweep["beta_s_per_byte"],
            "step_alpha_s": sweep["step_alpha_s"], "step_beta_s_per_byte": sweep["step_beta_s_per_byte"],
            "add_gamma_s_per_byte": sweep["add_gamma_s_per_byte"],
            "ring_prediction_error": round(sweep["ring_prediction_error"], 4),
            "ring_vs_library_busbw": round(sweep["ring_vs_library_busbw"], 4),
            "ddp_scratch": {"max_abs_diff": max(ddp["max_abs_diff"].values()),
                            "step_time_ratio": round(ddp["ratio"]["overlapped"], 4),
                            "ratios": {v: round(r, 4) for v, r in ddp["ratio"].items()},
                            "ddp_step_s": round(ddp["step_s"]["ddp"], 5), "parameters": ddp["parameters"]}}


BENCH = {"collectives": bench_collectives}


def readme_figures(results: dict) -> str:
    """The key figures of notebook 08 for the README's table, from ``bench_collectives``' JSON."""
    c = results["collectives"]
    big = c["sizes"][-1]
    d = c["ddp_scratch"]
    small = max((r["ring_s"] / r["ring_model_s"] for r in c["sizes"] if r["bytes"] < 4 * 2**20), default=1.0)
    return (f"{c['world_size']} ranks: all_reduce α = {c['alpha_s'] * 1e6:.0f} µs, 1/β = {1e-9 / c['beta_s_per_byte']:.2f} "
            f"GB/s; at {big['bytes'] / 2**20:.0f} MiB busbw {big['library_busbw_gbs']:.2f} GB/s, hand-written ring "
            f"{big['ring_busbw_gbs']:.2f} GB/s (≥ {c['ring_vs_library_busbw']:.3f} of it from 4 MiB), ring predicted from one "
            f"step to within {c['ring_prediction_error']:.0%} from 4 MiB (up to ×{small:.1f} the prediction below); "
            f"DDP from hooks+buckets+overlap {d['step_time_ratio']:.2f}× DDP's step time, parameters equal to "
            f"{d['max_abs_diff']:.0e}")
