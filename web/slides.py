"""Slide breaks for the lecture hall: which cell of a notebook starts a slide, and which stay off the screen.

A notebook's cells carry ``metadata.slideshow.slide_type``, the key that JupyterLab's RISE extension
(jupyterlab-rise) and nbconvert's reveal.js slides both read
(https://nbconvert.readthedocs.io/en/latest/usage.html#reveal-js-html-slideshow). The rule below
decides it from the notebook's structure, so that a new cell gets its place without anyone editing
metadata by hand:

* the title, the learning goals and each ``## `` section (its claim) start a slide, and each
  ``### `` part a sub-slide (reveal.js's vertical slides);
* a code cell that draws a plot, or asserts what the section claims, is a sub-slide of its section;
* the rest of the prose goes to the speaker notes (reveal.js's ``S`` key), the rest of the code is
  skipped (it is on the site and in the notebook), and so are the exercises' code cells (a deck
  would show their unanswered checks).

A heading starts a slide only as a cell's first line, so a section's heading opens a markdown cell
of its own (``--check`` also lists headings in the middle of a cell).

``python -m web.slides`` writes the rule into the English notebooks (``notebooks/ko`` copies it when
``python -m i18n.build`` runs); ``python -m web.slides --check`` says which cells differ.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
ASSERT = re.compile(r"^\s*assert\b", re.M)


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def slide_type(cells: list[dict], index: int) -> str:
    """The slide type of ``cells[index]`` by the rule in this module's docstring (site, slides)."""
    cell, src = cells[index], _source(cells[index]).lstrip()
    if index == 0 or cell.get("id") == "goals":
        return "slide"
    if cell["cell_type"] == "markdown":
        if src.startswith("## "):
            return "slide"
        return "subslide" if src.startswith("### ") else "notes"
    if cell["cell_type"] != "code" or src.startswith("# Setup (the same in every notebook)"):
        return "skip"
    if "check(" in src or any(c["cell_type"] == "markdown" and _source(c).startswith("## Exercises")
                              for c in cells[:index]):
        return "skip"
    drawn = any("image/png" in out.get("data", {}) for out in cell.get("outputs", []))
    return "subslide" if drawn or ASSERT.search(src) else "skip"


def marked(notebook: dict) -> list[tuple[str, str | None, str]]:
    """Each cell's id, its stored slide type and the rule's (site, slides)."""
    cells = notebook["cells"]
    return [(c.get("id", str(i)), c.get("metadata", {}).get("slideshow", {}).get("slide_type"),
             slide_type(cells, i)) for i, c in enumerate(cells)]


def mid_cell_headings(notebook: dict) -> list[tuple[str, str]]:
    """Markdown cells with a ``## `` or ``### `` heading after their first line: (cell id, heading)."""
    return [(c.get("id", "?"), line) for c in notebook["cells"] if c["cell_type"] == "markdown"
            for line in _source(c).splitlines()[1:] if re.match(r"#{2,3} ", line)]


def english_notebooks() -> list[Path]:
    """The course's English notebooks, in course order."""
    return sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def mark(path: Path) -> bool:
    """Write the rule's slide types into ``path``; return whether anything changed (``python -m web.slides``)."""
    text = path.read_text(encoding="utf-8")
    notebook = json.loads(text)
    for cell, (_, _, want) in zip(notebook["cells"], marked(notebook)):
        cell.setdefault("metadata", {})["slideshow"] = {"slide_type": want}
    new = json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m web.slides", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only say which cells differ from the rule")
    args = parser.parse_args(argv)
    if args.check:
        wrong = [f"{p.name} {cid}: {have} (the rule says {want})" for p in english_notebooks()
                 for cid, have, want in marked(json.loads(p.read_text(encoding="utf-8"))) if have != want]
        wrong += [f"{p.name} {cid}: a heading in the middle of the cell: {line}" for p in english_notebooks()
                  for cid, line in mid_cell_headings(json.loads(p.read_text(encoding="utf-8")))]
        print("\n".join(wrong) or "every cell's slide type follows the rule")
        return 1 if wrong else 0
    changed = [p.name for p in english_notebooks() if mark(p)]
    print("marked: " + (", ".join(changed) or "nothing to change")
          + ("\nnow run `python -m i18n.build` so that notebooks/ko carries them" if changed else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
