"""Every notebook follows the course anatomy (COURSE.md): title, goals, setup cell, exercises, short cells."""
import json
import re
from pathlib import Path

import pytest

from helpers.publish import setup_cell

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))
MAX_LINES = 15
WIDTH = 100   # columns: a code line a reader takes in without scrolling sideways (#24 item 9)


def _cells(path):
    return json.loads(path.read_text())["cells"]


def _src(cell):
    return "".join(cell["source"])


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found in notebooks/"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_anatomy(path):
    cells = _cells(path)
    first = _src(cells[0])
    assert cells[0]["cell_type"] == "markdown" and first.startswith("# "), "first cell must be the title"
    goals = _src(cells[1])   # a cell of its own: the slides' second slide (web/slides.py)
    assert cells[1]["cell_type"] == "markdown" and cells[1].get("id") == "goals" and \
        goals.startswith("**Learning goals**"), "the second cell must be the learning goals (id 'goals')"
    code = [c for c in cells if c["cell_type"] == "code"]
    assert _src(code[0]).strip() == setup_cell(), "the first code cell must be the common setup cell (helpers/publish.py)"
    md = "\n".join(_src(c) for c in cells if c["cell_type"] == "markdown")
    assert "## Exercises" in md and "## Recap" in md
    assert md.index("## Recap") < md.index("## Exercises"), "the recap comes before the exercises (COURSE.md)"
    assert any("check(" in _src(c) for c in code), "exercises need at least one self-check"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_code_cells_are_short(path):
    for i, c in enumerate(_cells(path)):
        if c["cell_type"] != "code":
            continue
        if i == next(j for j, d in enumerate(_cells(path)) if d["cell_type"] == "code"):
            continue   # the setup cell, the same in every notebook (test_anatomy: helpers.publish.setup_cell)
        n = len(_src(c).strip().splitlines())
        why = [t for t in c.get("metadata", {}).get("tags", []) if t.startswith("long-cell:")]
        assert n <= MAX_LINES or why, (f"{path.name} cell {i} has {n} lines (> {MAX_LINES}); move logic to helpers "
                                       "or tag it 'long-cell:<reason>'")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_code_lines_fit_the_width(path):
    wide = [(i, len(line)) for i, c in enumerate(_cells(path)) if c["cell_type"] == "code"
            for line in _src(c).splitlines() if len(line) > WIDTH]
    assert not wide, (f"{path.name}: {len(wide)} code lines wider than {WIDTH} columns (cell, width): "
                      f"{wide[:8]}; wrap them, or move the logic to the lesson's helpers")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_executed_without_errors(path):
    code = [c for c in _cells(path) if c["cell_type"] == "code" and _src(c).strip()]
    counts = [c["execution_count"] for c in code]
    assert None not in counts, "commit notebooks executed: nbval skips cells without an execution count"
    assert counts == list(range(1, len(code) + 1)), "run top to bottom in a fresh kernel before committing"
    for c in code:
        assert not any(o["output_type"] == "error" for o in c["outputs"]), "a stored error output"


SPEED = re.compile(r"(speedup|efficiency|throughput|samples_per_s|per_second|seconds|step_s|_ms\b|faster|slower|"
                   r"sec_per|busbw|bandwidth)", re.I)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_notebook_asserts_a_speed(path):
    """Speed targets live in `python -m helpers.bench` and the README, never in a notebook assert: a slower
    laptop or a busy machine must not fail a Run All. An assert that orders (<, >) a time or a speed is
    refused; a generous bound on how long a failure may take is allowed with the tag `timing-bound-ok`."""
    for i, c in enumerate(_cells(path)):
        if c["cell_type"] != "code" or "timing-bound-ok" in c.get("metadata", {}).get("tags", []):
            continue
        for line in _src(c).splitlines():
            if line.lstrip().startswith("assert") and SPEED.search(line) and re.search(r"[<>]", line):
                raise AssertionError(f"{path.name} cell {i} asserts a speed: {line.strip()!r}; print it, and put "
                                     "the target in the bench")


def test_nbval_sanitizes_the_hardware_label_on_every_cpu():
    """A compared cell that prints hardware_label passes on any machine: the label's CPU part is sanitized."""
    import configparser
    import re
    from pathlib import Path
    cfg = configparser.ConfigParser()
    cfg.read(Path(__file__).with_name("sanitize.cfg"))
    rule = cfg["hardware_label"]
    for label in ("cpu (AMD EPYC, 2 cores)", "cpu (Intel(R) Xeon(R) Processor @ 2.50GHz, 2 cores)",
                  "cpu (Apple M2, 8 cores)", "cpu (Intel(R) Core(TM) i7-8550U CPU @ 1.80GHz, 8 logical cores on 4 physical)"):
        text = f"bytes held at once ({label}):"
        assert re.sub(rule["regex"], rule["replace"], text) == "bytes held at once (cpu (<HARDWARE>)):", label
    assert re.sub(rule["regex"], rule["replace"], "cpu (no cores here)") == "cpu (no cores here)"


def test_test_names_a_notebook_cites_are_defined_in_the_file_it_links():
    """A markdown cell naming `test_…` tests before a link to a test module: each is defined there (a prefix where it ends in *)."""
    import json
    import re
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    for nb in sorted((root / "notebooks").glob("*.ipynb")):
        for i, cell in enumerate(json.loads(nb.read_text())["cells"]):
            text = "".join(cell["source"])
            for link in re.finditer(r"\(\.\./tests/(test_\w+\.py)\)", text):
                source = (root / "tests" / link.group(1)).read_text()
                for name in re.findall(r"`(test_\w+\*?)`", text[max(0, link.start() - 300):link.start()]):
                    assert f"def {name.rstrip('*')}" in source, f"{nb.name} cell {i}: {name} is not in tests/{link.group(1)}"
