"""The helpers package shows the course's architecture, and stays readable (issue: recipes and instruments).

- the core imports no lesson, and no lesson imports another (they share through the core);
- no module is longer than 300 lines, in helpers/ and in tests/, tests/gpu/, i18n/ and web/ too;
- a new notebook's lesson is found by looking: its exercises by ``check`` and its benchmark by
  ``python -m helpers.bench``, with no central list to edit;
- every public function and class says, in its docstring, which notebook it serves, and every
  public function declares what it returns.
"""
import ast
import importlib
import inspect
import re
import sys
import textwrap
from pathlib import Path

import pytest

import helpers
from helpers import bench, course
from helpers.core import checks

PKG = Path(helpers.__file__).parent
MODULES = sorted(p for p in PKG.rglob("*.py"))
LESSONS = course.lessons()
SHARED = {"core", "launching"}


def _package(path: Path) -> str:
    rel = path.relative_to(PKG).parts
    return rel[0] if len(rel) > 1 else ""


def _imported_packages(path: Path) -> set[str]:
    """The helpers packages a module imports (relative ``..<package>`` or absolute ``helpers.<package>`` imports)."""
    tree = ast.parse(path.read_text())
    depth = len(path.relative_to(PKG).parts) - 1
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 0 and (node.module or "").startswith("helpers."):
                out.add(node.module.split(".")[1])
            elif node.level > 0:
                if node.level == depth + 1 and node.module:       # ..x from helpers/<pkg>/m.py
                    out.add(node.module.split(".")[0])
                elif node.level == 1 and depth == 1:              # .x: the module's own package
                    out.add(_package(path))
                elif node.level == 1 and depth == 0 and node.module:
                    out.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("helpers."):
                    out.add(a.name.split(".")[1])
    return out


def test_there_are_lessons_and_a_shared_core():
    assert {"setup", "pipeline", "data_parallel", "ddp", "tuning", "monitor", "memory", "transfer"} <= set(LESSONS)
    assert not SHARED & set(LESSONS)


@pytest.mark.parametrize("path", [p for p in MODULES if _package(p) in SHARED], ids=lambda p: str(p.relative_to(PKG)))
def test_the_core_and_the_plumbing_import_no_lesson(path):
    lessons = _imported_packages(path) & set(LESSONS)
    assert not lessons, f"{path.relative_to(PKG)} imports lesson(s) {lessons}; share through the core instead"
    if _package(path) == "core":
        assert "launching" not in _imported_packages(path), f"{path.relative_to(PKG)}: the core does not import launching"


def _upward_imports(path: Path) -> list[str]:
    """The imports in a core module (anywhere in it, functions too) of helpers above the core: the package itself,
    its top-level modules, or another of its packages."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
        out += [n for n in names if n == "helpers" or (n.startswith("helpers.") and not n.startswith("helpers.core"))]
        if isinstance(node, ast.ImportFrom) and node.level > 1:
            out.append("." * node.level + (node.module or ""))
    return out


@pytest.mark.parametrize("path", [p for p in MODULES if _package(p) == "core"], ids=lambda p: str(p.relative_to(PKG)))
def test_the_core_imports_nothing_above_it(path):
    """No upward arrow: the package's __init__ imports the core, so the core importing it back is a cycle."""
    assert not _upward_imports(path), f"{path.relative_to(PKG)} imports {_upward_imports(path)}; pass it down instead"


@pytest.mark.parametrize("path", [p for p in MODULES if _package(p) in LESSONS], ids=lambda p: str(p.relative_to(PKG)))
def test_no_lesson_imports_another(path):
    others = _imported_packages(path) & set(LESSONS) - {_package(path)}
    assert not others, f"{path.relative_to(PKG)} imports another lesson {others}; move what they share to the core"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PKG)))
def test_no_module_is_longer_than_300_lines(path):
    n = len(path.read_text().splitlines())
    assert n <= 300, f"{path.relative_to(PKG)} has {n} lines; split it (recipe, instruments, plots)"


ROOT = Path(__file__).resolve().parent.parent
OTHER_MODULES = sorted([*(ROOT / "tests").glob("*.py"), *(ROOT / "tests" / "gpu").glob("*.py"),
                        *(ROOT / "i18n").glob("*.py"), *(ROOT / "web").glob("*.py")])


@pytest.mark.parametrize("path", OTHER_MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_test_i18n_or_web_module_is_longer_than_300_lines(path):
    n = len(path.read_text().splitlines())
    assert n <= 300, (f"{path.relative_to(ROOT)} has {n} lines; split it by what it tests (tests/README.md: "
                      "'Where a test goes'), moving each test whole under its own name")


def test_a_new_lesson_is_found_without_editing_a_central_list(tmp_path, monkeypatch):
    lesson = tmp_path / "fake_lesson"
    lesson.mkdir()
    (lesson / "__init__.py").write_text("")
    (lesson / "lesson.py").write_text(textwrap.dedent('''
        from helpers.core.checks import Exercise
        NOTEBOOK = "99_fake"
        EXERCISES = [Exercise("99.answer", "int", compute=lambda: 42, hint="six times seven")]
        BENCH = {"fake": lambda: {"answer": 42}}
        def readme_figures(results):
            return f"answer {results['fake']['answer']}"
    '''))
    monkeypatch.setattr(helpers, "__path__", [*helpers.__path__, str(tmp_path)])
    assert "fake_lesson" in course.lessons() and course.notebook_of("fake_lesson") == "99_fake"
    assert checks.verify("99.answer", 42)[0] and not checks.verify("99.answer", 41)[0]
    assert bench.benches()["fake"]() == {"answer": 42}
    assert "answer 42" in bench.results_table({"fake": {"answer": 42}}, {"99_fake": 1.0})
    for name in [m for m in sys.modules if m.startswith("helpers.fake_lesson")]:
        del sys.modules[name]
    checks._REGISTRY.pop("99.answer", None)


@pytest.mark.parametrize("lesson", LESSONS)
def test_an_exercise_id_names_the_lesson_a_self_check_loads(lesson):
    """check() imports only the lesson whose NOTEBOOK (read from its source) starts with the id's number."""
    module = course.lesson_module(lesson)
    assert course.notebook_of(lesson) == module.NOTEBOOK, \
        f"helpers/{lesson}/lesson.py: write NOTEBOOK = \"NN_name\" as a plain string, at the top level"
    number = module.NOTEBOOK.split("_")[0]
    wrong = [ex.id for ex in getattr(module, "EXERCISES", ()) if ex.id.split(".")[0] != number]
    assert not wrong, f"helpers/{lesson}/lesson.py: exercise ids {wrong} must start with {number}. (its notebook)"


NOTEBOOK_REF = re.compile(r"\((\d\d|all notebooks|every notebook|README|failure drill|tests)[^)]*\)|notebook \d\d|"
                          r"Notebook \d\d|\d\d onwards")


def _public_definitions():
    for path in MODULES:
        name = "helpers." + ".".join(path.relative_to(PKG).with_suffix("").parts).replace(".__init__", "")
        module = importlib.import_module(name.rstrip("."))
        for attr, obj in vars(module).items():
            if attr.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
                continue
            if inspect.isfunction(obj) or inspect.isclass(obj):
                yield f"{module.__name__}.{attr}", obj


@pytest.mark.parametrize("qualname, obj", list(_public_definitions()), ids=lambda x: x if isinstance(x, str) else "")
def test_every_public_helper_names_its_notebook_and_declares_its_return(qualname, obj):
    doc = inspect.getdoc(obj) or ""
    assert doc, f"{qualname} has no docstring"
    text = doc + " " + (inspect.getdoc(sys.modules[obj.__module__]) or "") if inspect.isclass(obj) else doc
    assert NOTEBOOK_REF.search(doc.split("\n\n")[0] + " " + doc) or NOTEBOOK_REF.search(text), \
        f"{qualname}: say which notebook it serves, e.g. '(03)'"
    if inspect.isfunction(obj):
        assert "return" in obj.__annotations__, f"{qualname} declares no return type"


def test_no_package_has_a_name_tools_skip_as_build_output():
    """pytest's norecursedirs, black's and ruff's excludes and Python .gitignore templates skip dist/, build/ and the
    like: a package of that name drops out of test discovery, linters and structure drawings (issue #24)."""
    skipped = {"dist", "build", "node_modules", "venv", "env", "site-packages", "__pypackages__"}
    packages = {p.parent.name for p in PKG.rglob("__init__.py")}
    assert not packages & skipped, f"rename {sorted(packages & skipped)}"


def _own_package_imports(path: Path) -> set[str]:
    """The modules of its own package a helpers module imports (``from .x import …``, ``from . import x``)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            out |= {node.module.split(".")[0]} if node.module else {a.name for a in node.names}
    return out


@pytest.mark.parametrize("path", [p for p in MODULES if p.name == "recipe.py"], ids=lambda p: str(p.relative_to(PKG)))
def test_a_recipe_imports_none_of_its_instruments(path):
    """The recipe is the code a notebook teaches; the instruments measure it, so they import it, never the reverse
    (issue #24: tuning's recipe imported METRIC, MODE and summarize from its instruments)."""
    siblings = {p.stem for p in path.parent.glob("*.py")} - {"lesson"}   # monitor's recipe reads an exercise's reference
    measuring = {name for name in _own_package_imports(path) & siblings
                 if name in {"instruments", "plots"} or "recipe" in _own_package_imports(path.parent / f"{name}.py")}
    assert not measuring, f"{path.relative_to(PKG)} imports {sorted(measuring)}; move what it needs into the recipe"
