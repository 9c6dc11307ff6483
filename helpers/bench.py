"""Benchmarks behind the README's results table: ``python -m helpers.bench NAME`` prints one JSON object.

Names: ``pipeline`` (01), ``data_parallel`` (02), ``ddp`` (03), ``tuning`` (04), ``memory`` (06), and
``all``, which runs every benchmark, times every notebook and rewrites the results table in
README.md. Each benchmark runs the same helpers the notebook runs, on this machine, and labels
its result with the hardware.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from .device import hardware_label


def bench_ddp(global_batch: int = 2048, seconds: float = 2.0) -> dict:
    """1 vs 2 single-threaded DDP processes at the same global batch, plus the equivalence error (03)."""
    from .ddp import run_ddp_equivalence_check, run_throughput
    from .launch import choose_backend

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


NOTEBOOK_LIMITS = {"04_hyperparameter_tuning": 180}  # seconds; every other notebook: 90


def time_notebooks(folder: str | Path = "notebooks") -> dict[str, float]:
    """Execute each notebook top to bottom in a fresh kernel (as nbval does) and time it."""
    import nbformat
    from nbclient import NotebookClient

    times = {}
    for path in sorted(Path(folder).glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})
        t0 = time.perf_counter()
        client.execute()
        times[path.stem] = time.perf_counter() - t0
        print(f"{path.stem}: {times[path.stem]:.0f} s", file=sys.stderr)
    return times


def _figures(name: str, r: dict) -> str:
    """The key figures of one notebook, as one table cell, from its benchmark's JSON."""
    if name == "01_model_parallel" and "pipeline" in r:
        p = r["pipeline"]
        m8 = next(x for x in p["results"] if x["microbatches"] == 8)
        lib = max((x for x in p["library"] if x["microbatches"] > 1), key=lambda x: x["efficiency"])
        return (f"batch {p['batch']}, 2 stages × {p['depth_per_stage']} layers of width {p['width']}: hand-written GPipe "
                f"m = 8 ({m8['microbatch_rows']}-row micro-batches) {m8['speedup']:.2f}× over naive = "
                f"{m8['efficiency']:.2f} of the ideal {m8['ideal_speedup']:.2f}×; pipelining best {lib['schedule']} "
                f"m = {lib['microbatches']}: {lib['speedup']:.2f}× ({lib['efficiency']:.2f} of ideal)")
    if name == "02_data_parallel" and "data_parallel" in r:
        d = r["data_parallel"]
        t, s = d["throughput"], d["step_seconds"]
        return (f"batch {d['global_batch']}: apply {1e3 * s['apply']:.1f} ms, backward {1e3 * s['backward']:.1f} ms, "
                f"scatter+replicate+gather {1e3 * (s['scatter'] + s['replicate'] + s['gather']):.2f} ms per step; output "
                f"device {d['output_device_byte_share']:.1%} of the bytes; vs 1 thread: forward-only threads "
                f"{t['threads_forward_only'] / t['single']:.2f}×, forward+backward threads {t['threads'] / t['single']:.2f}×, "
                f"2 processes {t['processes'] / t['single']:.2f}×")
    if name == "03_ddp" and "ddp" in r:
        d = r["ddp"]
        by = ", ".join(f"{s:.2f}× at {b}" for b, s in d["speedup_by_batch"].items())
        return (f"DigitsCNN, {d['backend']}, 2 vs 1 single-threaded processes by global batch: {by} "
                f"({d['throughput_1']:.0f} → {d['throughput_2']:.0f} samples/s at {d['global_batch']}); DDP step = "
                f"single-process step to {d['max_abs_diff']:.0e}")
    if name == "04_hyperparameter_tuning" and "tuning" in r:
        t = r["tuning"]
        s = t["searchers"]
        return (f"{t['trials']} trials, max_t {t['max_t']}, rf {t['reduction_factor']}: ASHA {t['asha']['epochs']} epochs = "
                f"{t['asha_epoch_share']:.0%} of full runs ({t['full']['epochs']}), best accuracy "
                f"{t['asha']['best_accuracy']:.3f} vs {t['full']['best_accuracy']:.3f}; HyperOpt "
                f"{s['hyperopt']['best_accuracy']:.3f}, Optuna {s['optuna']['best_accuracy']:.3f}, BOHB "
                f"{s['bohb']['best_accuracy']:.3f}")
    if name == "06_oom_troubleshooting" and "memory" in r:
        m = r["memory"]
        b = m["saved_activation_bytes"]
        return (f"leak {m['leak_bytes_per_iter']['bug']:,} B/iteration, fix {m['leak_bytes_per_iter']['fix']} B; one forward "
                f"of {m['checkpoint_blocks']} blocks keeps {b['plain'] / 1e6:.1f} MB plain, {b['no_grad']} under no_grad, "
                f"{b['autocast'] / b['plain']:.0%} under {m['autocast_dtype']} autocast, {b['checkpoint'] / b['plain']:.0%} "
                f"with {m['checkpoint_segments']} checkpoint segments")
    return "see the notebook's asserts"


def results_table(results: dict, times: dict[str, float]) -> str:
    """The README's results table (markdown), with the hardware it ran on."""
    import platform

    import torch

    lines = [f"Measured by `python -m helpers.bench all` on {hardware_label('cpu')}, "
             f"{'no GPU' if not torch.cuda.is_available() else torch.cuda.get_device_name(0)}, Python "
             f"{platform.python_version()}, torch {torch.__version__.split('+')[0]}, {time.strftime('%Y-%m-%d')}. Run time: "
             "each notebook executed top to bottom in a fresh kernel.", "",
             "| notebook | run time | limit | key figures |", "|---|---|---|---|"]
    for name, sec in times.items():
        lines.append(f"| {name} | {sec:.0f} s | {NOTEBOOK_LIMITS.get(name, 90)} s | {_figures(name, results)} |")
    return "\n".join(lines)


def write_readme_table(table: str, readme: str | Path = "README.md") -> None:
    """Replace the text between the README's results markers with ``table``."""
    path = Path(readme)
    text = path.read_text()
    start, end = "<!-- results:start -->", "<!-- results:end -->"
    if start not in text or end not in text:
        raise RuntimeError(f"{path} has no {start} … {end} markers to write the table between")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    path.write_text(f"{head}{start}\n{table}\n{end}{tail}")


def bench_all(readme: str | Path = "README.md") -> dict:
    """Every benchmark and every notebook's run time; writes the README's results table."""
    results = {}
    for name, fn in BENCHES.items():
        print(f"bench {name} …", file=sys.stderr)
        results[name] = fn()
    times = time_notebooks(Path(readme).parent / "notebooks")
    write_readme_table(results_table(results, times), readme)
    return {"benchmarks": results, "notebook_seconds": {k: round(v, 1) for k, v in times.items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m helpers.bench", description=__doc__.splitlines()[0])
    parser.add_argument("name", choices=sorted(BENCHES) + ["all"],
                        help="which benchmark to run; 'all' runs every one, times every notebook and rewrites README.md's table")
    args = parser.parse_args(argv)
    result = bench_all() if args.name == "all" else BENCHES[args.name]()
    print(json.dumps(result, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":  # the guard matters: spawned ranks import this module as __mp_main__
    sys.exit(main())
