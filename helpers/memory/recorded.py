"""What a GPU printed: the figures of a recorded GPU run, for the CPU path of notebook 06.

``tests/gpu/run.sh`` keeps the notebooks it executed on a GPU (``executed_notebooks.zip``, with
the GPU, torch version and date in its log); a cell that needs a GPU prints, where there is
none, what that run printed, labelled as such, instead of typed numbers.
"""
from __future__ import annotations

from pathlib import Path

from ..core.i18n import said_by_the_cell, tr

__all__ = ["RECORDED_GPU_RUN", "recorded_gpu_run", "recorded_gpu_commit", "recorded_gpu_output", "recorded_gpu_intro",
           "recorded_gpu_code", "gpu_path", "recorded_memory_rows",
           "small_segments_only"]

RECORDED_GPU_RUN = Path(__file__).resolve().parents[2] / "tests" / "gpu" / "recorded" / "2026-11-27-h100"


def _run_parts(folder: Path) -> tuple[str, str, str]:
    """(GPU, torch version then, "as in this run" / "not this run's …") from the run's own log."""
    import torch

    log = (folder / "notebooks.log").read_text().splitlines()[0]  # "GPU run: torch …, 1 × NVIDIA …[, Python …]"
    torch_part, _, rest = log.removeprefix("GPU run: ").partition(", ")
    gpu = rest.split(", Python ")[0]
    then = torch_part.removeprefix("torch ")
    return (gpu or tr("memory.rec_a_gpu", "a GPU"), then, tr("memory.rec_as_here", "as in this run")
            if then == torch.__version__ else tr("memory.rec_not_here", "not this run's {version}", version=torch.__version__))


def recorded_gpu_run(folder: Path = RECORDED_GPU_RUN) -> str:
    """Where the recorded GPU figures come from: the GPU, torch and date, from the run's own log (06)."""
    gpu, then, here = _run_parts(folder)
    return tr("memory.rec_run", "{gpu}, torch {then}, {here}; {date}, {folder}", gpu=gpu, then=then, here=here,
              date=folder.name[:10], folder=folder.relative_to(folder.parents[3]))


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


def _gpu_model(gpu: str) -> str | None:
    """"H100" from "1 × NVIDIA H100 80GB HBM3"; None where no model number is found."""
    import re

    m = re.search(r"\b([A-Z]+\d+[A-Za-z]*)\b", gpu)
    return m.group(1) if m else None


def recorded_gpu_intro(cell_id: str, notebook: str = "06_oom_troubleshooting", folder: Path = RECORDED_GPU_RUN,
                       details: bool = False) -> str:
    """"Recorded on an H100 (torch …, course commit …; same cell code)" — or "an earlier version of
    this cell" where the recorded code differs (06).

    Compares the cell's code in the recorded run with the course's notebook on disk, so the label
    says whether the figures come from the code shown or from an earlier one. Where only the lines
    a GPU does not run differ (the ``else`` of ``if torch.cuda.is_available()``, such as the line
    that prints this recording), the GPU ran the code shown: "same cell code on a GPU". Only the
    cell's own code is compared, not the helpers it calls (the recording does not keep them), so the
    label names the commit the recording ran, whose helpers it imported (``recorded_gpu_commit``).
    ``details=True`` (the notebook's first recorded cell) puts before it, once, that there is no CUDA GPU
    here, the run's full GPU name, date, folder, and torch version against this run's: one message, so the
    Korean edition says the whole line again (a cell's words before it would leave it to shorter templates).
    """
    import json

    then = recorded_gpu_code(cell_id, notebook, folder)
    here = Path(__file__).resolve().parents[2] / "notebooks" / f"{notebook}.ipynb"
    now = _cell_source(json.loads(here.read_text()), cell_id) if here.exists() else None
    commit = recorded_gpu_commit(folder)
    helpers = (tr("memory.rec_commit", "course commit {commit}", commit=commit) if commit
               else tr("memory.rec_no_commit", "a course commit the recording does not name"))
    if then is not None and then == now:
        which = tr("memory.rec_same", "same cell code")
    elif then is not None and now is not None and gpu_path(then) == gpu_path(now):
        which = tr("memory.rec_same_gpu", "same cell code on a GPU")
    else:
        which = tr("memory.rec_earlier", "an earlier version of this cell, its code in {zip}",
                   zip=f"{folder.name}/executed_notebooks.zip")
    gpu, torch_then, _ = _run_parts(folder)
    said, model = dict(torch=torch_then, helpers=helpers, which=which), _gpu_model(gpu)
    short = (tr("memory.rec_on_a_gpu", "Recorded on a GPU (torch {torch}, {helpers}; {which})", **said) if model is None
             else tr("memory.rec_on_an", "Recorded on an {model} (torch {torch}, {helpers}; {which})", model=model, **said)
             if model[0] in "AEFHILMNORSX" else
             tr("memory.rec_on_a", "Recorded on a {model} (torch {torch}, {helpers}; {which})", model=model, **said))
    if not details:
        return short
    return tr("memory.rec_details", "No CUDA GPU here. This cell and the cells below that say \"Recorded on\" print "
              "what a recorded run printed: {run}; its helpers are those of {helpers}. \"Same cell code on a GPU\": only "
              "the cell's lines for a machine without one differ (layout and comments aside).", run=recorded_gpu_run(folder),
              helpers=helpers) + "\n" + short


def recorded_gpu_output(cell_id: str, notebook: str = "06_oom_troubleshooting", folder: Path = RECORDED_GPU_RUN,
                        said: bool = True) -> str:
    """The printed output of one cell of ``notebook`` as the recorded GPU run executed it (06).

    With ``said`` (the default), the cell's own printed sentences come in the course's language, as the translated
    notebook's stored outputs say them (:func:`helpers.core.i18n.said_by_the_cell`); ``said=False``: as recorded.

    Read from the executed notebooks ``tests/gpu/run.sh`` kept (``executed_notebooks.zip``), so
    what a CPU run shows for a GPU cell is what a GPU printed, not typed text.
    """
    import json
    import zipfile

    with zipfile.ZipFile(folder / "executed_notebooks.zip") as z:
        nb = json.loads(z.read(f"{notebook}.ipynb"))
    for cell in nb["cells"]:
        if cell.get("id") == cell_id:
            text = "".join("".join(o["text"]) for o in cell.get("outputs", []) if o.get("output_type") == "stream").rstrip()
            return said_by_the_cell(notebook, cell_id, text) if said else text
    raise KeyError(f"no cell {cell_id!r} in the recorded {notebook}; record a new GPU run with tests/gpu/run.sh")


def recorded_memory_rows(cell_id: str = "d78593a6", notebook: str = "06_oom_troubleshooting",
                         folder: Path = RECORDED_GPU_RUN) -> dict[str, tuple[float, float]]:
    """The recorded rows ``<tag> allocated <a> MiB reserved <r> MiB`` of one cell, as ``{tag: (a, r)}`` in MiB (06).

    Read from the recorded output, so a sentence about those rows is generated from them.
    """
    import re

    rows = {}
    for line in recorded_gpu_output(cell_id, notebook, folder, said=False).splitlines():
        m = re.match(r"^(.*?)\s+allocated\s+([\d.]+) MiB\s+reserved\s+([\d.]+) MiB\s*$", line)
        if m:
            rows[m.group(1).strip()] = (float(m.group(2)), float(m.group(3)))
    return rows


def small_segments_only(reserved_mib: float) -> bool:
    """Whether ``reserved_mib`` MiB can only be 2 MiB segments of the small pool (06).

    With the default settings the allocator packs requests of 1 MiB or less into 2 MiB segments
    (``kSmallBuffer``); a larger request's segment is 10 MiB or more: requests between 1 and 10 MiB
    get a 20 MiB one (``large_segment_size_``), larger ones their size rounded up to 2 MiB
    (``kMinLargeAlloc``, ``kRoundLarge``; c10/core/AllocatorConfig.h). So an even count of MiB
    under 10 is small segments only; 20 MiB may be one large segment.
    """
    return reserved_mib > 0 and reserved_mib % 2 == 0 and reserved_mib < 10
