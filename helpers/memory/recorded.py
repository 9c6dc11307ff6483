"""What a GPU printed: the figures of a recorded GPU run, for the CPU path of notebook 06.

``tests/gpu/run.sh`` keeps the notebooks it executed on a GPU (``executed_notebooks.zip``, with
the GPU, torch version and date in its log); a cell that needs a GPU prints, where there is
none, what that run printed, labelled as such, instead of typed numbers.
"""
from __future__ import annotations

from pathlib import Path

__all__ = ["RECORDED_GPU_RUN", "recorded_gpu_run", "recorded_gpu_output", "recorded_gpu_intro"]

RECORDED_GPU_RUN = Path(__file__).resolve().parents[2] / "tests" / "gpu" / "recorded" / "2026-11-26-h100"


def recorded_gpu_run(folder: Path = RECORDED_GPU_RUN) -> str:
    """Where the recorded GPU figures come from: the GPU, torch and date, from the run's own log (06)."""
    log = (folder / "notebooks.log").read_text().splitlines()[0]  # "GPU run: torch …, 1 × NVIDIA …"
    return f"{log.removeprefix('GPU run: ')}, recorded {folder.name[:10]} by tests/gpu/run.sh ({folder.relative_to(folder.parents[3])})"


def _cell_source(nb: dict, cell_id: str) -> str | None:
    for cell in nb["cells"]:
        if cell.get("id") == cell_id:
            src = cell.get("source", "")
            return "".join(src) if isinstance(src, list) else src
    return None


def recorded_gpu_intro(cell_id: str, notebook: str = "06_oom_troubleshooting", folder: Path = RECORDED_GPU_RUN) -> str:
    """"On a GPU (…), this cell printed" — or "an earlier version of this cell" where the recorded code differs (06).

    Compares the cell's code in the recorded run with the course's notebook on disk, so the label
    says whether the figures come from the code shown or from an earlier one.
    """
    import json
    import zipfile

    with zipfile.ZipFile(folder / "executed_notebooks.zip") as z:
        then = _cell_source(json.loads(z.read(f"{notebook}.ipynb")), cell_id)
    here = Path(__file__).resolve().parents[2] / "notebooks" / f"{notebook}.ipynb"
    now = _cell_source(json.loads(here.read_text()), cell_id) if here.exists() else None
    which = ("this cell" if then is not None and then == now else
             f"an earlier version of this cell (other code than above, so other lines and formats; its code is in "
             f"{folder.name}/executed_notebooks.zip)")
    return f"On a GPU ({recorded_gpu_run(folder)}), {which} printed"


def recorded_gpu_output(cell_id: str, notebook: str = "06_oom_troubleshooting", folder: Path = RECORDED_GPU_RUN) -> str:
    """The printed output of one cell of ``notebook`` as the recorded GPU run executed it (06).

    Read from the executed notebooks ``tests/gpu/run.sh`` kept (``executed_notebooks.zip``), so
    what a CPU run shows for a GPU cell is what a GPU printed, not typed text.
    """
    import json
    import zipfile

    with zipfile.ZipFile(folder / "executed_notebooks.zip") as z:
        nb = json.loads(z.read(f"{notebook}.ipynb"))
    for cell in nb["cells"]:
        if cell.get("id") == cell_id:
            return "".join("".join(o["text"]) for o in cell.get("outputs", []) if o.get("output_type") == "stream").rstrip()
    raise KeyError(f"no cell {cell_id!r} in the recorded {notebook}; record a new GPU run with tests/gpu/run.sh")
