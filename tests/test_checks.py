"""The self-checks' shared behaviour (helpers/core/checks.py, answers.py): an untouched code skeleton is
⏳ (not answered yet), not ❌, in every notebook; an attempt is judged; messages wrap at word boundaries."""
from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys

import pytest

from conftest import NOTEBOOKS, ROOT
from helpers.core.answers import is_skeleton, untouched_skeleton, wrap
from helpers.core.checks import _REGISTRY, check, verify
from helpers.course import load_exercises


def _skeleton_cells():
    """(notebook, function name, exercise id, the cell's code) for every code exercise's skeleton in the course."""
    found = []
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
        sources = ["".join(c["source"]) for c in cells]
        ids = dict((fn, ex) for s in sources for ex, fn in re.findall(r'check\("([^"]+)",\s*(?:\w+\.)?(\w+)\)', s))
        for s in sources:
            if "# your code" not in s:
                continue
            for fn in re.findall(r"^def (\w+)\(", s, flags=re.M):
                if fn in ids:
                    code = "\n".join(line for line in s.splitlines()
                                     if not line.startswith(("%%", "check(")))
                    found.append((path.stem, fn, ids[fn], code))
    return found


SKELETONS = _skeleton_cells()


def _load(tmp_path, name, code):
    """A function defined in a module file, as a notebook cell's function is (its source readable)."""
    path = tmp_path / f"{name}.py"
    path.write_text(code)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_every_code_exercise_has_a_skeleton_found_here():
    assert {nb[:2] for nb, *_ in SKELETONS} >= {"00", "01", "02", "03", "04", "05", "06", "07", "08", "09", "10"}


@pytest.mark.parametrize("notebook, fn, exercise, code", SKELETONS, ids=[s[2] for s in SKELETONS])
def test_each_notebooks_untouched_skeleton_is_taken_for_one(tmp_path, notebook, fn, exercise, code):
    module = _load(tmp_path, f"skeleton_{notebook}", code)
    load_exercises(exercise)
    scaffold = _REGISTRY[exercise].skeleton   # a skeleton that acts (a loop to fill in) is given by its lesson
    taken = untouched_skeleton(getattr(module, fn)) or (scaffold is not None and is_skeleton(getattr(module, fn), scaffold))
    assert taken, f"{notebook}: the skeleton of {exercise} would store ❌, not ⏳"


def test_an_untouched_skeleton_stores_hourglass_not_cross(tmp_path):
    notebook, fn, exercise, code = next(s for s in SKELETONS if s[2] == "00.accuracy_no_grad")
    ok, msg = verify(exercise, getattr(_load(tmp_path, "skeleton_00", code), fn))
    assert not ok and msg.startswith("⏳ 00.accuracy_no_grad: not answered yet") and "Hint" in msg and "❌" not in msg


ATTEMPTS = '''
import torch

def loops(model, loader):
    correct = 0
    ...  # your code
    for x, y in loader:
        correct += 1
    return correct

def calls_for_effect(writer, epoch, metrics):
    ...   # your code
    writer.add_scalar("loss", metrics["loss"], epoch)

def hard_coded(model, loader):
    return 0.25

def returns_a_computation(n, world_size, rank, drop_last=False):
    ...   # your code
    return list(range(rank, n, world_size))

def tests_something(m, p, stage):
    order = []   # your code
    if stage == 0:
        order.append("F0")
    return order

def keeps_the_placeholder_with_a_context(model, loader):
    ...
    with torch.no_grad():
        pass
    return 0.0
'''


@pytest.mark.parametrize("name", ["loops", "calls_for_effect", "hard_coded", "returns_a_computation",
                                  "tests_something", "keeps_the_placeholder_with_a_context"])
def test_an_attempt_is_not_a_skeleton(tmp_path, name):
    module = _load(tmp_path, "attempts", ATTEMPTS)
    assert not untouched_skeleton(getattr(module, name))


def test_functions_without_readable_source_are_not_skeletons():
    assert not untouched_skeleton(len) and not untouched_skeleton(lambda m, l: ...)
    namespace = {}
    exec("def made(model, loader):\n    ...\n", namespace)   # no file: inspect cannot read it
    assert not untouched_skeleton(namespace["made"])


def test_a_wrong_attempt_still_stores_a_cross(tmp_path):
    module = _load(tmp_path, "attempts", ATTEMPTS)
    ok, msg = verify("00.accuracy_no_grad", module.hard_coded)
    assert not ok and msg.startswith("❌")


LONG = ("❌ 00.accuracy_no_grad: for an untrained DigitsCNN, batches of 64, your function returned 0.1, which is "
        "not the fraction of those samples whose largest output is the label. Hint: What does autograd keep while "
        "a forward runs, and which context tells it not to? Batches go where the model is, so can the check.")


def columns(line):
    import unicodedata
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line)


def test_long_messages_wrap_at_word_boundaries_within_88_columns():
    lines = wrap(LONG).split("\n")
    assert len(lines) >= 3 and all(columns(line) <= 88 for line in lines)
    assert [w for line in lines for w in line.split()] == LONG.split()    # no word cut, none lost
    assert all(line.startswith("   ") for line in lines[1:])               # continuation lines indented
    korean = "❌ 00.x: " + "여러분의 함수가 강의의 evaluate()를 호출합니다 " * 8
    assert all(columns(line) <= 88 for line in wrap(korean).split("\n"))  # Hangul takes two columns
    assert wrap("short") == "short" and wrap("a\nb") == "a\nb"
    word = "x" * 120
    assert wrap(f"start {word} end") == f"start\n   {word}\n   end"       # a word longer than a line stays whole


def test_check_prints_the_wrapped_message(capsys):
    check("00.batches_of_100", None)
    out = capsys.readouterr().out.rstrip("\n")
    assert "\n" in out and all(columns(line) <= 88 for line in out.split("\n"))
    assert " ".join(out.split()) == " ".join(verify("00.batches_of_100", None)[1].split())


def test_a_self_check_imports_its_own_lesson_only():
    """The first check() of notebook 00, in a fresh interpreter, imports notebook 00's lesson and no other: not
    the sharding lesson (DTensor), not the tuning lesson, nor Ray, its plumbing or matplotlib (it imported all)."""
    code = "import sys, helpers\nhelpers.check('00.batches_of_100', None)\nprint(*sorted(sys.modules))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    modules = set(run.stdout.splitlines()[-1].split())
    assert "helpers.setup.lesson" in modules                                  # the check found its exercise
    others = {m for m in modules if m.startswith("helpers.") and m.split(".")[1] not in ("core", "course", "setup")}
    assert not others, f"a self-check of 00 imported {sorted(others)}"
    heavy = {m for m in modules if m.split(".")[0] in ("ray", "matplotlib") or m.startswith("torch.distributed.tensor")}
    assert not heavy, f"a self-check of 00 imported {sorted(heavy)[:10]}"
