"""Notebook 08 (collectives): its exercises and its benchmark."""
from __future__ import annotations

from ..core.answers import untouched_skeleton
from ..core.checks import Exercise
from ..dist.launcher import describe_launch
from .instruments import SWEEP_SIZES, run_sweep
from .ring_exercise import run_reduce_scatter_check
from .scratch_ddp import run_scratch_ddp


NOTEBOOK = "08_collectives"


def _reduce_scatter_behaviour(fn) -> str | None:
    """The student's ring reduce-scatter on 4 ranks, judged message by message and by its result (08)."""
    from ..dist.failures import LaunchError
    from .stall import RingDeadlock

    if untouched_skeleton(fn):  # nothing to run yet: the check says ⏳ without starting processes
        return "your function is still the skeleton"
    try:
        res = run_reduce_scatter_check(fn, nprocs=4)
    except LaunchError as e:
        return f"a rank raised: {e.cause}"
    except RingDeadlock as e:
        return str(e)
    except TimeoutError:
        return ("the ranks waited for each other until the timeout: does every rank send before it waits to "
                "receive (isend), and do all ranks make the same number of steps?")
    return res["problem"]


EXERCISES = [
    Exercise("08.ring_steps_n8", "int", digest="dbf57d29596343f9b4d97cbb7d8b06f80f08a0538d4b9aff253f33364c824280",
             hint="Count the steps of each half of the bandwidth-optimal ring: how many does a chunk need to visit "
                  "every other rank once?",
             why="2(n − 1) steps, each of size/n: more ranks mean more (smaller) messages, so α matters more."),
    Exercise("08.bytes_sent_n4_100mb", "int", digest="5657c52e97e10e55c47d9089c7ef476ce17cd2e802c3525a6912bbade92259ae",
             hint="Multiply the number of ring steps by the size of the chunk sent at each step (answer in MB).",
             why="2(n − 1)/n of the message: close to twice its size however many ranks share it. That factor is "
                 "also what turns algorithm bandwidth into bus bandwidth."),
    Exercise("08.reduce_scatter", "code", behaviour=_reduce_scatter_behaviour,
             hint="Follow the chunk that must end complete on rank r: which rank has to send it first, at step 0, so "
                  "that it reaches r after n − 1 steps? Then shift the recipe's schedule by as much. Receive into a "
                  "separate buffer, then add it.",
             why="n − 1 steps of size/n: half of the ring all-reduce, and on its own the collective FSDP and ZeRO-2 "
                 "use to shard gradients; which piece ends where is only a matter of where each chunk starts."),
    Exercise("08.owned_chunk_r2_n5", "int", digest="95bbde8983b116dd877be9e1eb32a9d13257b64860ff7d264a45ba02d30bafe0",
             hint="Follow one chunk: at each step a rank adds what arrives from its left neighbour and passes it on. "
                  "Which chunk has gathered all five contributions when it reaches rank 2?",
             why="Each rank ends up owning a different chunk, which is exactly what all-gather then passes round."),
]


def bench_collectives(repeats: int = 9) -> dict:
    """All-reduce and the hand-written ring over 1 KiB … 16 MiB on 2 ranks; α–β; DDP from scratch vs DDP (08)."""
    sweep = run_sweep(SWEEP_SIZES, nprocs=2, repeats=repeats)
    ddp = run_scratch_ddp(nprocs=2, timed_steps=10, repeats=repeats)
    keep = ("bytes", "gloo_s", "ring_s", "ring_model_s", "gloo_busbw_gbs", "ring_busbw_gbs")
    return {"device": describe_launch(2), "world_size": 2,
            "sizes": [{k: r[k] if k == "bytes" else round(r[k], 7) for k in keep} for r in sweep["sizes"]],
            "alpha_s": sweep["alpha_s"], "beta_s_per_byte": sweep["beta_s_per_byte"],
            "step_alpha_s": sweep["step_alpha_s"], "step_beta_s_per_byte": sweep["step_beta_s_per_byte"],
            "add_gamma_s_per_byte": sweep["add_gamma_s_per_byte"],
            "ring_prediction_error": round(sweep["ring_prediction_error"], 4),
            "ring_vs_gloo_busbw": round(sweep["ring_vs_gloo_busbw"], 4),
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
    return (f"{c['world_size']} ranks: all_reduce α = {c['alpha_s'] * 1e6:.0f} µs, 1/β = {1e-9 / c['beta_s_per_byte']:.2f} "
            f"GB/s; at {big['bytes'] / 2**20:.0f} MiB busbw {big['gloo_busbw_gbs']:.2f} GB/s, hand-written ring "
            f"{big['ring_busbw_gbs']:.2f} GB/s (≥ {c['ring_vs_gloo_busbw']:.2f} of it from 4 MiB), ring predicted from one "
            f"step to {c['ring_prediction_error']:.0%}; DDP from hooks+buckets+overlap {d['step_time_ratio']:.2f}× DDP's "
            f"step time, parameters equal to {d['max_abs_diff']:.0e}")
