"""The course's lessons, found by looking: which there are, which notebook each serves, their exercises.

A lesson is a subpackage of ``helpers`` holding a ``lesson`` module, which declares the notebook
it serves (``NOTEBOOK = "00_setup"``), its self-checks (``EXERCISES``) and its benchmarks
(``BENCH``). There is no central list: a new notebook's lesson is found where it lies, by
:func:`lessons`. The package gives :func:`load_exercises` to the self-check registry
(``helpers.core.checks``), so that the core, which imports no lesson, can still find an exercise.

Which lesson serves a notebook is read from the source of its ``lesson.py`` (the ``NOTEBOOK``
line), without importing it: the first self-check in a notebook imports that notebook's lesson
only, not every lesson and what they import (Ray, DTensor, matplotlib).
"""
from __future__ import annotations

import ast
import importlib
import pkgutil
import sys
from pathlib import Path
from types import ModuleType

from .core.checks import register


def _search_path() -> list[str]:
    """Where the subpackages of ``helpers`` lie: the package's own ``__path__``, read when asked (a test adds to it)."""
    return list(sys.modules[__package__].__path__)  # this module's package: imported before any of its modules


def _lesson_file(name: str) -> Path | None:
    return next((f for f in (Path(p) / name / "lesson.py" for p in _search_path()) if f.exists()), None)


def lessons() -> list[str]:
    """The lesson packages of ``helpers`` by name: every subpackage with a ``lesson`` module (all notebooks, README)."""
    return sorted(info.name for info in pkgutil.iter_modules(_search_path())
                  if info.ispkg and _lesson_file(info.name) is not None)


def notebook_of(lesson: str) -> str | None:
    """The notebook a lesson serves, e.g. ``"00_setup"``: the ``NOTEBOOK = "…"`` line of its ``lesson.py``,
    read from the source without importing the lesson (all notebooks); ``None`` if it declares none so."""
    path = _lesson_file(lesson)
    tree = ast.parse(path.read_text(), filename=str(path)) if path is not None else ast.Module(body=[])
    for node in tree.body:
        targets = (node.targets if isinstance(node, ast.Assign) else
                   [node.target] if isinstance(node, ast.AnnAssign) else [])
        if any(isinstance(t, ast.Name) and t.id == "NOTEBOOK" for t in targets):
            value = node.value
            return value.value if isinstance(value, ast.Constant) and isinstance(value.value, str) else None
    return None


def lesson_module(lesson: str) -> ModuleType:
    """A lesson's ``lesson`` module, imported (and what it imports) (all notebooks, README)."""
    return importlib.import_module(f"{__package__}.{lesson}.lesson")


def lesson_modules() -> list[ModuleType]:
    """Every lesson's ``lesson`` module, imported: what the benchmarks and the list of all exercises need (README)."""
    return [lesson_module(name) for name in lessons()]


def load_exercises(exercise_id: str | None = None) -> None:
    """Register the exercises of the lesson an exercise id names, or of every lesson for ``None`` (all notebooks).

    An id starts with its notebook's number (``"00.batches_of_100"``: notebook ``00_setup``), so only
    the lesson whose ``NOTEBOOK`` starts with that number is imported.
    """
    names = lessons()
    if exercise_id is not None:
        number = exercise_id.split(".")[0]
        names = [name for name in names if (notebook_of(name) or "").split("_")[0] == number]
    for name in names:
        register(*getattr(lesson_module(name), "EXERCISES", ()))
