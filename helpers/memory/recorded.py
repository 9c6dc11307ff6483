"""What a GPU printed: the figures of a recorded GPU run, for the CPU path of notebook 06.

``tests/gpu/run.sh`` keeps the notebooks it executed on a GPU (``executed_notebooks.zip``, with
the GPU, torch version and date in its log); a cell that needs a GPU prints, where there is
none, what that run printed, labelled as such, instead of typed numbers.
"""
from __future__ import annotations

from pathlib import Path

__all__ = ["RECORDED_GPU_RUN", "recorded_gpu_run", "recorded_gpu_commit", "recorded_gpu_output", "recorded_gpu_intro",
           "recorded_gpu_code", "gpu_path", "recorded_memory_rows"]

RECORDED_GPU_RUN = Path(__file__).resolve().parents[2] / "tests" / "gpu" / "recorded" / "2026-11-27-h100"


def recorded_gpu_run(folder: Path = RECORDED_GPU_RUN) -> str:
    """Where the recorded GPU figures come from: the GPU, torch and date, from the run's own log (06)."""
    import torch

    log = (folder / "notebooks.log").read_text().splitlines()[0]  # "GPU run: torch …, 1 × NVIDIA …"
    torch_part, _, gpu = log.removeprefix("GPU run: ").partition(", ")
    then = torch_part.removeprefix("torch ")
    here = "as in this run" if then == torch.__version__ else f"not this run's {torch.__version__}"
    return f"{gpu or 'a GPU'}, torch {then}, {here}; {folder.name[:10]}, {folder.relative_to(folder.parents[3])}"


def recorded_gpu_commit(folder: Path = RECORDED_GPU_RUN) -> str | None:
    """The course commit the recorded run executed, from its README ("from main at 77b2ac4"), or None (06).

    The recording keeps the notebooks' code, not the helpers they import: those are the helpers
    of this commit.
    """
    import re

    readme = folder / "README.md"
    m = re.search(r"from main at ([0-9a-f]{7,40})\b", readme.read_text()) if readme.exists() else None
    return m.group(1) if m else None


def _cell_source(nb: dict, cell_id: str) -> str | None:
    for cell in nb["cells"]:
        if cell.get("id") == cell_id:
            src = cell.get("source", "")
            return "".join(src) if isinstance(src, list) else src
    return None


def _is_cuda_test(node) -> bool | None:
    """True for ``torch.cuda.is_available()``, False for ``not torch.cuda.is_available()``, else None."""
    import ast

    negated = isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)
    call = node.operand if negated else node
    if (isinstance(call, ast.Call) and not call.args and isinstance(call.func, ast.Attribute)
            and ast.unparse(call.func) == "torch.cuda.is_available"):
        return not negated
    return None


def gpu_path(source: str) -> str:
    """The code of a cell as a machine with a GPU runs it: ``if torch.cuda.is_available()`` blocks
    without their ``else``, ``if not torch.cuda.is_available()`` blocks dropped (06).

    Normalised through ``ast`` (comments and layout do not count). Two cells whose GPU paths are
    equal print the same on a GPU, whatever their no-GPU lines print.
    """
    import ast

    class _GpuOnly(ast.NodeTransformer):
        def visit_If(self, node):
            self.generic_visit(node)
            which = _is_cuda_test(node.test)
            if which is True:
                return node.body
            if which is False:
                return node.orelse or None
            return node

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    return ast.dump(_GpuOnly().visit(tree))


def recorded_gpu_code(cell_id: str, notebook: str = "06_oom_troubleshooting", folder: Path = RECORDED_GPU_RUN) -> str | None:
    """The code of one cell as the recorded GPU run executed it (06)."""
    import json
    import zipfile

    with zipfile.ZipFile(folder / "executed_notebooks.zip") as z:
        return _cell_source(json.loads(z.read(f"{notebook}.ipynb")), cell_id)


def recorded_gpu_intro(cell_id: str, notebook: str = "06_oom_troubleshooting", folder: Path = RECORDED_GPU_RUN) -> str:
    """"On a GPU (…), this cell (the same cell code; run at course commit <commit>) printed" — or "an earlier
    version of this cell" where the recorded code differs (06).

    Compares the cell's code in the recorded run with the course's notebook on disk, so the label
    says whether the figures come from the code shown or from an earlier one. Where only the lines
    a GPU does not run differ (the ``else`` of ``if torch.cuda.is_available()``, such as the line
    that prints this recording), the GPU ran the code shown, and the label says so. Only the cell's
    own code is compared, not the helpers it calls (the recording does not keep them), so the label
    names the commit the recording ran, whose helpers it imported (``recorded_gpu_commit``).
    """
    import json

    then = recorded_gpu_code(cell_id, notebook, folder)
    here = Path(__file__).resolve().parents[2] / "notebooks" / f"{notebook}.ipynb"
    now = _cell_source(json.loads(here.read_text()), cell_id) if here.exists() else None
    commit = recorded_gpu_commit(folder)
    helpers = f"run at course commit {commit}" if commit else "run at a course commit the recording does not name"
    if then is not None and then == now:
        which = f"this cell (the same cell code; {helpers})"
    elif then is not None and now is not None and gpu_path(then) == gpu_path(now):
        which = (f"this cell (the same cell code on a GPU, only its lines for a machine without one differed; "
                 f"{helpers})")
    else:
        which = (f"an earlier version of this cell (other code than above; its code: "
                 f"{folder.name}/executed_notebooks.zip; {helpers})")
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


def recorded_memory_rows(cell_id: str = "d78593a6", notebook: str = "06_oom_troubleshooting",
                         folder: Path = RECORDED_GPU_RUN) -> dict[str, tuple[float, float]]:
    """The recorded rows ``<tag> allocated <a> MiB reserved <r> MiB`` of one cell, as ``{tag: (a, r)}`` in MiB (06).

    Read from the recorded output, so a sentence about those rows is generated from them.
    """
    import re

    rows = {}
    for line in recorded_gpu_output(cell_id, notebook, folder).splitlines():
        m = re.match(r"^(.*?)\s+allocated\s+([\d.]+) MiB\s+reserved\s+([\d.]+) MiB\s*$", line)
        if m:
            rows[m.group(1).strip()] = (float(m.group(2)), float(m.group(3)))
    return rows
