"""The translation files and their state (notebooks/<lang>): where each lives, the hash an entry keeps of its English
cell, and which cells are missing, stale or unfinished. See i18n/build.py and i18n/README.md."""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
I18N = ROOT / "i18n"
LANGUAGES = ("ko",)


def english_notebooks() -> list[Path]:
    """The English notebooks, in course order (notebooks/ko)."""
    return sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def source_sha(source: str) -> str:
    """The hash a translation remembers of the English cell it translates (notebooks/ko)."""
    return hashlib.sha256(source.encode("utf-8")).hexdigest()[:12]


def without_comments(code: str) -> str:
    """A fenced code block as a translation must keep it: its comments (``#`` to the end of a line, at its start
    or after a space) and blank lines left out, since those may be translated (notebooks/ko, README.ko.md)."""
    lines = (re.sub(r"(^|\s)#.*$", "", line).rstrip() for line in code.splitlines())
    return "\n".join(line for line in lines if line.strip())


def translation_path(notebook: Path, lang: str = "ko") -> Path:
    """Where the translations of ``notebook``'s markdown cells into ``lang`` live (notebooks/ko)."""
    return I18N / lang / f"{notebook.stem}.json"


def output_path(notebook: Path, lang: str = "ko") -> Path:
    """Where the translated notebook is written (notebooks/ko)."""
    return NOTEBOOKS / lang / notebook.name


def load_translations(notebook: Path, lang: str = "ko") -> dict:
    """The translation entries of ``notebook``, by cell id; ``{}`` if it has no translation file (notebooks/ko)."""
    path = translation_path(notebook, lang)
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def save_translations(notebook: Path, entries: dict, lang: str = "ko") -> None:
    """Write ``entries`` as ``notebook``'s translation file, in a stable form (notebooks/ko)."""
    path = translation_path(notebook, lang)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(entries, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def text_of(entry: dict, lang: str = "ko") -> str:
    """The translated text of an entry (stored as one string or as a list of lines) (notebooks/ko)."""
    value = entry.get(lang, "")
    return "".join(value) if isinstance(value, list) else value


def status(cell: dict, entries: dict, lang: str = "ko") -> str:
    """A markdown cell's translation: ``"ok"``, ``"missing"``, ``"stale"`` or ``"todo"`` (a stub) (notebooks/ko)."""
    entry = entries.get(cell["id"])
    if entry is None or not text_of(entry, lang).strip():
        return "missing"
    if entry.get("source_sha") != source_sha(cell["source"]):
        return "stale"
    if entry.get("todo") or text_of(entry, lang).startswith("TODO"):
        return "todo"
    return "ok"


def problems(notebook: Path, lang: str = "ko") -> list[tuple[str, str]]:
    """``(cell id, status)`` of every markdown cell of ``notebook`` whose translation is not ok (notebooks/ko)."""
    nb = nbformat.read(notebook, as_version=4)
    entries = load_translations(notebook, lang)
    return [(c["id"], s) for c in nb.cells if c.cell_type == "markdown" and (s := status(c, entries, lang)) != "ok"]
