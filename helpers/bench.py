"""Benchmarks behind the README's results table: ``python -m helpers.bench NAME`` prints one JSON object.

Names: ``pipeline`` (01), ``data_parallel`` (02), ``ddp`` (03), ``tuning`` (04), ``memory`` (06). Each benchmark runs the same helpers the notebook runs, on this machine, and
labels its result with the hardware.
"""
from __future__ import annotations

import argparse
import json
import sys

from .device import hardware_label


def bench_ddp(global_batch: int = 1024, seconds: float = 2.0) -> dict:
    """1 vs 2 single-threaded DDP processes at the same global batch, plus the equivalence error (03)."""
    from .ddp import run_ddp_equivalence_check, run_throughput
    from .launch import choose_backend

    rows = run_throughput(nprocs_list=(1, 2), batches=(global_batch,), seconds=seconds)
    eq = run_ddp_equivalence_check(nprocs=2, batch=64)
    t1 = next(r for r in rows if r["processes"] == 1)
    t2 = next(r for r in rows if r["processes"] == 2)
    return {"backend": choose_backend(2), "device": hardware_label("cpu" if choose_backend(2) == "gloo" else "cuda:0",
                                                                  threads=1),
            "model": "DigitsCNN", "global_batch": global_batch, "throughput_1": round(t1["samples_per_s"], 1),
            "throughput_2": round(t2["samples_per_s"], 1), "speedup": round(t2["samples_per_s"] / t1["samples_per_s"], 3),
            "max_abs_diff": eq["max_abs_diff"], "allreduce_bytes_per_step": t2["allreduce_bytes_per_step"]}


def bench_pipeline(batch: int = 2048, width: int = 512, depth: int = 4) -> dict:
    """Hand-written 2-stage GPipe for m = 1, 2, 4, 8 against the bound, plus the library schedules (01)."""
    from .launch import choose_backend
    from .pipeline import run_gpipe, run_library

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


def bench_memory(blocks: int = 16) -> dict:
    """The leak's bytes per iteration (bug, fix) and the saved bytes of each remedy (06)."""
    from .memory import leak_curve, remedies

    bug, fix = leak_curve(False), leak_curve(True)
    rem = remedies(blocks=blocks)
    return {"device": hardware_label("cpu"), "measured_with": "SavedTensorTracker (saved_tensors_hooks)",
            "leak_bytes_per_iter": {"bug": bug["bytes_per_iter"], "fix": fix["bytes_per_iter"]},
            "saved_activation_bytes": {k: rem[k] for k in ("plain", "no_grad", "inference_mode", "autocast", "checkpoint")},
            "checkpoint_blocks": rem["checkpoint_blocks"], "checkpoint_segments": rem["checkpoint_segments"],
            "checkpoint_expected_bytes": rem["checkpoint_expected"], "autocast_dtype": rem["autocast_dtype"]}


def bench_data_parallel(batch: int = 256) -> dict:
    """DataParallel's four steps timed, the output device's byte share, threads vs processes (02)."""
    from .data_parallel import run_four_steps, thread_variants, time_four_steps
    from .ddp import run_throughput

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


def bench_tuning(trials: int = 24, max_t: int = 16, rf: int = 4) -> dict:
    """ASHA vs every trial to the end on the same configurations, and each searcher on the same budget (04)."""
    import tempfile

    from .tuning import init_ray, run_tuner, shutdown_ray

    init_ray()
    try:
        with tempfile.TemporaryDirectory() as store:
            asha = run_tuner("asha", trials, max_t, reduction_factor=rf, storage=store, verbose=0)
            full = run_tuner("full", trials, max_t, scheduler="fifo", storage=store, verbose=0)
            searchers = {name: run_tuner(name, trials, max_t, reduction_factor=rf, searcher=name,
                                         scheduler="bohb" if name == "bohb" else "asha", storage=store, verbose=0)
                         for name in ("hyperopt", "optuna", "bohb")}
    finally:
        shutdown_ray()

    def short(r: dict) -> dict:
        return {"epochs": r["epochs"], "best_accuracy": round(r["best_accuracy"], 4), "best_config": r["best_config"],
                "seconds": round(r["seconds"], 1)}

    return {"device": hardware_label("cpu"), "trials": trials, "max_t": max_t, "reduction_factor": rf,
            "asha": short(asha), "full": short(full), "asha_epoch_share": round(asha["epochs"] / full["epochs"], 3),
            "searchers": {k: short(v) for k, v in searchers.items()}}


BENCHES = {"pipeline": bench_pipeline, "data_parallel": bench_data_parallel, "ddp": bench_ddp, "tuning": bench_tuning,
           "memory": bench_memory}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m helpers.bench", description=__doc__.splitlines()[0])
    parser.add_argument("name", choices=sorted(BENCHES), help="which benchmark to run")
    args = parser.parse_args(argv)
    result = BENCHES[args.name]()
    print(json.dumps(result, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":  # the guard matters: spawned ranks import this module as __mp_main__
    sys.exit(main())
