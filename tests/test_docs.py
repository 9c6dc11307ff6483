"""The documents tell the truth about the code (issue 24): what they name exists.

- every dotted ``helpers.…`` name in helpers' docstrings, comments and strings, in the docstrings and
  comments of tests/ and i18n/, and in the READMEs resolves: its module imports and the rest is an
  attribute of it; every ``helpers/…py``, ``tests/…py`` and ``i18n/…py`` path they name is a file;
- every file tests/README.md names is a file, and so is every ``tests/…py`` a notebook's
  metadata names (its reason to skip the Run-All-again drill);
- helpers' docstring lists every package, and every lesson with its notebook;
- pyproject's version is ``helpers.__version__``.

A made-up name in a synthetic text fails each check, so the checks can fail.
"""
from __future__ import annotations

import ast
import importlib
import io
import json
import re
import tokenize
from pathlib import Path

import pytest

import helpers
from conftest import NOTEBOOKS, ROOT

NAME = re.compile(r"(?<![\w./-])helpers(?:\.[A-Za-z_]\w*)+")
PATH = re.compile(r"(?<![\w./<-])(?:helpers|tests|i18n)/(?:[\w-]+/)*\w+\.py\b")
READMES = [p for p in (ROOT / "README.md", ROOT / "README.ko.md", ROOT / "i18n" / "README.md",
                       ROOT / "tests" / "README.md", ROOT / "data" / "README.md") if p.exists()]
CODE = sorted((ROOT / "helpers").rglob("*.py"))
OTHERS = sorted([*(ROOT / "tests").glob("*.py"), *(ROOT / "tests" / "gpu").glob("*.py"), *(ROOT / "i18n").glob("*.py")])


def _comments_and_strings(source: str, strings: bool) -> list[tuple[int, str]]:
    """(line, text) of every comment and docstring of ``source``, and of every other string if ``strings``."""
    docs = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(getattr(first.value, "value", None), str):
                docs.add(first.lineno)
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT or (tok.type == tokenize.STRING and (strings or tok.start[0] in docs)):
            out.append((tok.start[0], tok.string))
    return out


def _resolves(name: str) -> bool:
    """Whether ``name`` is a module of the helpers package, or an attribute (a chain of them) of one."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        rel = Path(*parts[:i])
        if (ROOT / rel).with_suffix(".py").is_file() or (ROOT / rel / "__init__.py").is_file():
            break
    else:
        return False
    if i == len(parts):
        return True                                   # a module: its file is enough, nothing imported
    obj = importlib.import_module(".".join(parts[:i]))
    for attr in parts[i:]:
        if not hasattr(obj, attr):
            return False
        obj = getattr(obj, attr)
    return True


def _wrong_at(text: str) -> list[tuple[int, str]]:
    """(offset, text) of the dotted helpers names and the paths in ``text`` that name nothing in this checkout."""
    names = [(m.start(), m.group()) for m in NAME.finditer(text) if not _resolves(m.group())]
    return names + [(m.start(), m.group()) for m in PATH.finditer(text) if not (ROOT / m.group()).is_file()]


def _wrong(text: str) -> list[str]:
    return [bad for _, bad in _wrong_at(text)]


def _where(path: Path, strings: bool) -> list[str]:
    return [f"{path.relative_to(ROOT)}:{line + text[:at].count(chr(10))}: {bad}"
            for line, text in _comments_and_strings(path.read_text(), strings) for at, bad in _wrong_at(text)]


def test_every_name_and_path_in_helpers_resolves():
    wrong = [w for path in CODE for w in _where(path, strings=True)]
    assert not wrong, "names or paths that no longer exist (rename them in the text):\n" + "\n".join(wrong)


def test_every_name_and_path_in_the_docstrings_of_tests_and_i18n_resolves():
    wrong = [w for path in OTHERS for w in _where(path, strings=False)]
    assert not wrong, "names or paths that no longer exist (rename them in the text):\n" + "\n".join(wrong)


@pytest.mark.parametrize("path", READMES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_name_and_path_in_the_readmes_resolves(path):
    wrong = [f"line {i}: {bad}" for i, line in enumerate(path.read_text().splitlines(), 1) for bad in _wrong(line)]
    assert not wrong, f"{path.relative_to(ROOT)} names what no longer exists:\n" + "\n".join(wrong)


def _files_named(text: str) -> set[str]:
    return set(re.findall(r"`(?:tests/)?(\w+\.(?:py|txt|cfg|sh|toml))`", text))


def test_every_file_the_tests_readme_names_exists():
    named = _files_named((ROOT / "tests" / "README.md").read_text())
    assert {"test_launch.py", "launch_drills.py", "sanitize.cfg"} <= named     # the pattern finds what it names
    assert _files_named("from `setup_cell.txt` and `tests/run.sh`") == {"setup_cell.txt", "run.sh"}
    missing = sorted(n for n in named if not any((ROOT / at / n).is_file() for at in ("tests", "tests/gpu", ".")))
    assert not missing, f"tests/README.md names files that do not exist: {missing}"


def test_every_test_file_a_notebooks_metadata_names_exists():
    named = {}
    for nb in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        text = json.dumps(json.loads(nb.read_text())["metadata"].get("course", {}))
        named.update({f: nb.name for f in re.findall(r"tests/\w+\.py", text)})
    assert named, "no notebook names a test file: the pattern no longer finds them"
    missing = {f: nb for f, nb in named.items() if not (ROOT / f).is_file()}
    assert not missing, f"notebooks' metadata names test files that do not exist: {missing}"


def test_a_made_up_name_or_path_is_caught_and_a_real_one_is_not():
    text = ("See :func:`helpers.core.data.load_datasets`, ``helpers.load_datasets``, helpers.collectives and "
            "tests/test_docs.py; not helpers.data.load_datasets, helpers.core.data.no_such_function, "
            "helpers.core.nowhere, helpers/core/nowhere.py nor tests/test_nowhere.py.")
    assert _wrong(text) == ["helpers.data.load_datasets", "helpers.core.data.no_such_function", "helpers.core.nowhere",
                            "helpers/core/nowhere.py", "tests/test_nowhere.py"]
    source = '"""Uses helpers.no_such_module."""\n# and helpers.core.no_such_module\nx = "helpers.not_a_docstring"\n'
    assert [bad for _, t in _comments_and_strings(source, strings=False) for bad in _wrong(t)] == [
        "helpers.no_such_module", "helpers.core.no_such_module"]
    assert [bad for _, t in _comments_and_strings(source, strings=True) for bad in _wrong(t)] == [
        "helpers.no_such_module", "helpers.core.no_such_module", "helpers.not_a_docstring"]


def _lessons() -> dict[str, str]:
    """Each lesson package and its notebook's number, read from its lesson.py without importing it."""
    out = {}
    for path in sorted((ROOT / "helpers").glob("*/lesson.py")):
        tree = ast.parse(path.read_text())
        notebook = next(n.value.value for n in tree.body if isinstance(n, ast.Assign)
                        and any(getattr(t, "id", None) == "NOTEBOOK" for t in n.targets))
        out[path.parent.name] = notebook[:2]
    return out


def test_helpers_docstring_lists_every_package_and_every_lesson_with_its_notebook():
    doc = " ".join(helpers.__doc__.split())
    lessons = _lessons()
    assert {"setup": "00", "sharding": "09"}.items() <= lessons.items()
    missing = [f"``{name}`` ({nn})" for name, nn in lessons.items() if f"``{name}`` ({nn})" not in doc]
    assert not missing, f"helpers/__init__.py's docstring does not list {missing}"
    packages = {p.parent.name for p in (ROOT / "helpers").glob("*/__init__.py")}
    unnamed = sorted(p for p in packages if f"``{p}``" not in doc and f"``{p}/``" not in doc)
    assert not unnamed, f"helpers/__init__.py's docstring does not name the package(s) {unnamed}"
    gone = sorted(set(re.findall(r"``(\w+)/``", doc)) - packages)
    assert not gone, f"helpers/__init__.py's docstring names folders that do not exist: {gone}"


def _project_version(pyproject: str) -> str:
    section = pyproject.split("\n[project]\n", 1)[1].split("\n[", 1)[0]
    return re.search(r'^version\s*=\s*"([^"]+)"', section, re.M).group(1)


def test_pyproject_version_is_helpers_version():
    made_up = '[build-system]\nx = 1\n\n[project]\nname = "a"\nversion = "9.9.9"\n\n[tool.x]\nversion = "1.0"\n'
    assert _project_version(made_up) == "9.9.9"
    version = _project_version("\n" + (ROOT / "pyproject.toml").read_text())
    assert version == helpers.__version__, (f"pyproject.toml says version {version}, helpers.__version__ "
                                            f"{helpers.__version__}: make them agree")
