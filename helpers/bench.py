"""Benchmarks behind the README's results table: ``python -m helpers.bench NAME`` prints one JSON object.

Every lesson declares its own benchmarks (``BENCH`` in ``helpers/<lesson>/lesson.py``, with
``readme_figures`` for its row of the table); this module finds them by looking, so a new
notebook needs no edit here. ``all`` runs every benchmark, times every notebook in a fresh kernel
and rewrites the results table in README.md. Each benchmark runs the same code the notebook
runs, on this machine, and labels its result with the hardware.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Callable

from .core.device import hardware_label
from .course import lesson_modules

DEFAULT_LIMIT_S = 90  # every notebook's run-time limit, unless its lesson declares LIMIT_S


def benches() -> dict[str, Callable[[], dict]]:
    """Every benchmark of the course by name, as the lessons declare them (``BENCH``) (README)."""
    out: dict[str, Callable[[], dict]] = {}
    for module in lesson_modules():
        out.update(getattr(module, "BENCH", {}))
    return out


def time_notebooks(folder: str | Path = "notebooks") -> dict[str, float]:
    """Execute each notebook top to bottom in a fresh kernel (as nbval does) and time it (README)."""
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


def results_table(results: dict, times: dict[str, float]) -> str:
    """The README's results table (markdown), with the hardware it ran on (README)."""
    import platform

    import torch

    by_notebook = {m.NOTEBOOK: m for m in lesson_modules()}
    lines = [f"Measured by `python -m helpers.bench all` on {hardware_label('cpu')}, "
             f"{'no GPU' if not torch.cuda.is_available() else torch.cuda.get_device_name(0)}, Python "
             f"{platform.python_version()}, torch {torch.__version__.split('+')[0]}, {time.strftime('%Y-%m-%d')}. Run time: "
             "each notebook executed top to bottom in a fresh kernel.", "",
             "| notebook | run time | limit | key figures |", "|---|---|---|---|"]
    for name, sec in times.items():
        lesson = by_notebook.get(name)
        limit = getattr(lesson, "LIMIT_S", DEFAULT_LIMIT_S)
        figures = getattr(lesson, "readme_figures", None)
        cell = figures(results) if figures is not None and all(k in results for k in lesson.BENCH) else \
            "see the notebook's asserts"
        lines.append(f"| {name} | {sec:.0f} s | {limit} s | {cell} |")
    return "\n".join(lines)


def write_readme_table(table: str, readme: str | Path = "README.md") -> None:
    """Replace the text between the README's results markers with ``table`` (README)."""
    path = Path(readme)
    text = path.read_text()
    start, end = "<!-- results:start -->", "<!-- results:end -->"
    if start not in text or end not in text:
        raise RuntimeError(f"{path} has no {start} … {end} markers to write the table between")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    path.write_text(f"{head}{start}\n{table}\n{end}{tail}")


def bench_all(readme: str | Path = "README.md") -> dict:
    """Every benchmark and every notebook's run time; writes the README's results table (README)."""
    results = {}
    for name, fn in benches().items():
        print(f"bench {name} …", file=sys.stderr)
        results[name] = fn()
    times = time_notebooks(Path(readme).parent / "notebooks")
    write_readme_table(results_table(results, times), readme)
    return {"benchmarks": results, "notebook_seconds": {k: round(v, 1) for k, v in times.items()}}


def main(argv: list[str] | None = None) -> int:
    """``python -m helpers.bench NAME|all`` (README)."""
    available = benches()
    parser = argparse.ArgumentParser(prog="python -m helpers.bench", description=__doc__.splitlines()[0])
    parser.add_argument("name", choices=sorted(available) + ["all"],
                        help="which benchmark to run; 'all' runs every one, times every notebook and rewrites README.md's table")
    args = parser.parse_args(argv)
    result = bench_all() if args.name == "all" else available[args.name]()
    print(json.dumps(result, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":  # the guard matters: spawned ranks import this module as __mp_main__
    sys.exit(main())
