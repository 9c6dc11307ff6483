"""Execute the course notebooks top to bottom on this machine and print one verdict line each.

Used by ``tests/gpu/run.sh``. Outputs are not compared (the committed ones come from a CPU run);
a notebook passes when every cell, including its asserts, runs without an error. A notebook that
stops on a missing package is reported SKIP with the package's name, not FAIL.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_one(path: Path, timeout: int) -> dict:
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})
    t0 = time.perf_counter()
    verdict, why = "PASS", ""
    try:
        client.execute()
    except CellExecutionError as e:
        text = str(e)
        last = [line for line in text.strip().splitlines() if line.strip()][-1]
        if "ModuleNotFoundError" in text:
            verdict, why = "SKIP", f"missing package ({last.split(':', 1)[-1].strip()})"
        else:
            verdict, why = "FAIL", last[:300]
    except (CellTimeoutError, DeadKernelError, TimeoutError) as e:
        verdict, why = "FAIL", f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
    return {"notebook": path.stem, "verdict": verdict, "seconds": round(time.perf_counter() - t0, 1), "why": why, "nb": nb}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="notebook name prefixes (default: every notebook)")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per cell")
    parser.add_argument("--out", default=os.environ.get("GPU_OUT"), help="folder for the executed notebooks and verdicts")
    args = parser.parse_args(argv)
    paths = sorted((ROOT / "notebooks").glob("*.ipynb"))
    if args.names:  # in the order named, so the notebooks that matter most can go first on a time-limited machine
        paths = [p for n in args.names for p in paths if p.stem.startswith(n)]
        paths = list(dict.fromkeys(paths))
    results = []
    for p in paths:
        r = run_one(p, args.timeout)
        results.append(r)
        print(f"{r['verdict']:<4} {r['notebook']:<28} {r['seconds']:>6.1f} s  {r['why']}", flush=True)
        if args.out:  # after every notebook: a run stopped by a time limit keeps what it finished
            save(results, Path(args.out))
    return 1 if any(r["verdict"] == "FAIL" for r in results) else 0


def save(results: list[dict], out: Path) -> None:
    """The executed notebooks (``executed_notebooks.zip``) and one verdict each (``verdicts.json``)."""
    import nbformat

    out.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out / "executed_notebooks.zip", "w", zipfile.ZIP_DEFLATED) as z:
        for r in results:
            z.writestr(f"{r['notebook']}.ipynb", nbformat.writes(r["nb"]))
    (out / "verdicts.json").write_text(json.dumps([{k: v for k, v in r.items() if k != "nb"} for r in results], indent=1))


if __name__ == "__main__":
    sys.exit(main())
