"""Slide breaks for the lecture hall: which cell of a notebook starts a slide, and which stay off the screen.

A notebook's cells carry ``metadata.slideshow.slide_type``, the key that JupyterLab's RISE extension
(jupyterlab-rise) and nbconvert's reveal.js slides both read
(https://nbconvert.readthedocs.io/en/latest/usage.html#reveal-js-html-slideshow). The rule below
decides it from the notebook's structure, so that a new cell gets its place without anyone editing
metadata by hand:

* the title, the learning goals and each ``## `` section (its claim) start a slide, and each
  ``### `` part a sub-slide (reveal.js's vertical slides);
* a code cell that draws a plot, or asserts what the section claims, is a sub-slide of its section,
  and so is a code cell that the prose before it introduces with a colon ("the plan:");
* the rest of the prose goes to the speaker notes (reveal.js's ``S`` key), the rest of the code is
  skipped (it is on the site and in the notebook), and so are the exercises' code cells (a deck
  would show their unanswered checks) and a cell tagged ``slides-skip`` (a clean-up);
* on the site's decks (``deck_cells``), a long slide cell keeps its heading and its opening (the claim:
  its first paragraph, or its first sentences) on the slide and moves the rest of its prose to that
  slide's speaker notes (``claim_and_notes``); a cell that opens with a list or a table (the goals, a
  recap) keeps it and moves what follows it; the exercises stay whole; a prose cell goes to the notes
  of the plot, assert or introduced code it precedes in its section; a plot's code (and long code) is
  folded, and its figures come first.
  RISE, live in JupyterLab, shows each cell whole, in the notebook's order.

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
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
ASSERT = re.compile(r"^\s*assert\b", re.M)


def cell_text(cell: dict) -> str:
    """A cell's source as one string (a notebook file may store it as a list of lines)."""
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def slide_type(cells: list[dict], index: int) -> str:
    """The slide type of ``cells[index]`` by the rule in this module's docstring (site, slides)."""
    cell, src = cells[index], cell_text(cells[index]).lstrip()
    if index == 0 or cell.get("id") == "goals":
        return "slide"
    if cell["cell_type"] == "markdown":
        if src.startswith("## "):
            return "slide"
        return "subslide" if src.startswith("### ") else "notes"
    if cell["cell_type"] != "code" or src.startswith("# Setup (the same in every notebook)"):
        return "skip"
    if re.search(r"(?<![\w.])check\(", src) or "slides-skip" in cell.get("metadata", {}).get("tags", []) or any(
            c["cell_type"] == "markdown" and cell_text(c).startswith("## Exercises") for c in cells[:index]):
        return "skip"
    drawn = any("image/png" in out.get("data", {}) for out in cell.get("outputs", []))
    introduced = cells[index - 1]["cell_type"] == "markdown" and cell_text(cells[index - 1]).rstrip().endswith(":")
    return "subslide" if drawn or introduced or ASSERT.search(src) else "skip"


KEEP_WHOLE = 900      # columns (a Hangul character takes two): a slide cell up to this wide stays whole
CLAIM = 420           # columns: the opening sentences kept on the slide end as near to this as they can
SHORTEST = 150        # columns: a first paragraph at least this wide is the claim by itself
LONGEST = 1000        # columns: an opening wider than this stops at an earlier sentence if it can
LONG_CODE = 25        # lines: a sub-slide's code this long is folded, so that its output shows first
LEAST_NOTES = 200     # columns: fewer left for the notes, and the cell stays whole
ABBREVIATION = re.compile(r"(\b(al|e\.g|i\.e|vs|cf|Fig|Eq|No)|^\s*\d+)\.$", re.M)   # "et al.", "1." ...
CODE = re.compile(r"^```.*?^```|(`+)(?!`).+?(?<!`)\1(?!`)", re.M | re.S)   # a fenced block, an inline span
BLOCK = re.compile(r"\s*((\d+\.|[-*+])\s|\||>|```)")   # a list, a table, a quote or code opens the text


def width(text: str) -> int:
    """How wide ``text`` reads on a slide: link targets and markup left out, wide (CJK) characters as two."""
    shown = re.sub(r"\]\([^)\s]*\)", "]", text).translate({ord(c): None for c in "`*[]"})
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in shown)


def _cuts(body: str) -> list[tuple[int, bool]]:
    """Where ``body`` may be cut, and whether each cut ends a paragraph: after a sentence of prose (the next one
    starts with no lowercase letter or digit, and the dot ends no abbreviation or list number) or after a
    paragraph, never inside code, a link, brackets or a list."""
    code = [m.span() for m in CODE.finditer(body)]
    cuts = {}
    for m in re.finditer(r"(?<=[.!?])[ \t]*\n?[ \t]*(?=[^a-z\d\s])|\n[ \t]*\n\s*(?=\S)", body):
        head = body[:m.start()]
        if (ABBREVIATION.search(head) or any(a < m.start() < b for a, b in code)
                or head.count("[") != head.count("]") or head.count("(") != head.count(")")):
            continue
        ends_paragraph = "\n\n" in m.group().replace(" ", "").replace("\t", "")
        paragraph = head[head.rfind("\n\n") + 2:] if "\n\n" in head else head
        if not ends_paragraph and any(BLOCK.match(line) for line in paragraph.split("\n")):
            continue   # no cut inside a list or a table, only after it
        cuts[m.start()] = cuts.get(m.start(), False) or ends_paragraph
    return sorted(cuts.items())


def claim_and_notes(text: str) -> tuple[str, str]:
    """A slide cell's text split for a deck: (the heading and its opening, the rest for the notes).

    The opening is the first paragraph when it is at least ``SHORTEST`` wide, else the first sentences,
    ending nearest to ``CLAIM``; an opening that ends with a colon keeps the block it introduces when that fits
    ``LONGEST``, else stops before it (where nothing comes before it, it keeps the block). A cell that opens
    with a list or a table keeps it. The notes are empty (the cell stays whole) when the cell is narrow, has no
    heading, has no safe cut, leaves less than ``LEAST_NOTES`` or would send a numbered list (the exercises) to
    the notes."""
    heading, _, body = text.strip().partition("\n")
    body = body.strip()
    if width(text) <= KEEP_WHOLE or not body or not heading.startswith("#"):
        return text, ""
    cuts = [(c, par) for c, par in _cuts(body) if c < len(body)]
    wide = {c: width(body[:c]) for c, _ in cuts}   # how wide the slide is if cut at c
    if BLOCK.match(body):   # the list or the table is the slide; what follows it, the notes
        cut = next((c for c, par in cuts if par and not BLOCK.match(body[c:].lstrip("\n"))
                    and not body[c:].lstrip("\n").startswith(" ")), None)
    else:
        near = [c for c, _ in cuts if wide[c] >= SHORTEST]   # the sentence end nearest to CLAIM
        cut = next((c for c, par in cuts if par and SHORTEST <= wide[c] < CLAIM), None) or \
            min(near, key=lambda c: abs(wide[c] - CLAIM), default=None)
        earlier = [c for c, _ in cuts if wide[c] < CLAIM]
        if cut is None or (wide[cut] > LONGEST and earlier):
            cut = max(earlier, default=None)
        end = next((c for c, par in cuts if cut is not None and c > cut and par), None)   # the paragraph's end
        if end is not None and re.search(r":\n\s*((\d+\.|[-*+])\s|\|)", body[cut:end]) \
                and wide[end] <= LONGEST:
            cut = end   # not just before the sentence that opens a list in the same paragraph: with the list
        if cut is not None and body[:cut].rstrip().endswith(":"):
            after = next((c for c, par in cuts if c > cut and par), None)
            before = [c for c, _ in cuts if c < cut]
            fits = after is not None and wide[after] <= LONGEST
            cut = after if fits or not before else max(before)   # with nothing before it, the colon keeps its block
    if cut is None or width(body[cut:]) < LEAST_NOTES or re.match(r"\s*1\. ", body[cut:]):
        return text, ""   # too little for the notes, or a numbered list (the exercises) that is the slide
    return f"{heading}\n\n{body[:cut].rstrip()}", body[cut:].strip()


def deck_cells(cells: list[dict]) -> list[dict]:
    """The cells as the site's deck shows them (copies): each long slide cut by ``claim_and_notes``, its rest
    in its own notes; a prose cell that precedes a plot, an assert or code it introduces, in its section (the
    notebooks explain, then run), goes to that slide's notes, so that the speaker reads it while the slide is on
    the screen; a plot's code, and any code of ``LONG_CODE`` lines or more, is marked to be folded
    (``deck_fold_input``: web/course_reveal folds it), and a plot's figures come before its printed lines."""
    out, waiting = [], []
    for i, cell in enumerate(cells):
        kind = cell.get("metadata", {}).get("slideshow", {}).get("slide_type")
        if kind == "notes":
            waiting.append(cell)
        elif kind in ("slide", "subslide") and cell["cell_type"] == "code":
            outputs = cell.get("outputs", [])
            drawn = [o for o in outputs if "image/png" in o.get("data", {})]
            fold = bool(drawn) or cell_text(cell).count("\n") >= LONG_CODE
            out += [{**cell, "metadata": {**cell["metadata"], "deck_fold_input": fold},
                     "outputs": drawn + [o for o in outputs if o not in drawn]}] + waiting
            waiting = []
        elif kind in ("slide", "subslide"):
            text, notes = claim_and_notes(cell_text(cell))
            out += waiting + [{**cell, "source": text}]
            waiting = []
            if notes:
                out.append({"cell_type": "markdown", "id": f"{cell.get('id', i)}-notes", "source": notes,
                            "metadata": {"slideshow": {"slide_type": "notes"}}})
        else:
            out.append(cell)
    return out + waiting


def marked(notebook: dict) -> list[tuple[str, str | None, str]]:
    """Each cell's id, its stored slide type and the rule's (site, slides)."""
    cells = notebook["cells"]
    return [(c.get("id", str(i)), c.get("metadata", {}).get("slideshow", {}).get("slide_type"),
             slide_type(cells, i)) for i, c in enumerate(cells)]


def mid_cell_headings(notebook: dict) -> list[tuple[str, str]]:
    """Markdown cells with a ``## `` or ``### `` heading after their first line: (cell id, heading)."""
    return [(c.get("id", "?"), line) for c in notebook["cells"] if c["cell_type"] == "markdown"
            for line in cell_text(c).splitlines()[1:] if re.match(r"#{2,3} ", line)]


def course_notebooks(folder: Path = NOTEBOOKS) -> list[Path]:
    """The course's notebooks in ``folder`` (the English ones by default), in course order."""
    return sorted(folder.glob("[0-9][0-9]_*.ipynb"))


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
        wrong = []
        for path in course_notebooks():
            notebook = json.loads(path.read_text(encoding="utf-8"))
            wrong += [f"{path.name} {cid}: {have} (the rule says {want})"
                      for cid, have, want in marked(notebook) if have != want]
            wrong += [f"{path.name} {cid}: a heading in the middle of the cell: {line}"
                      for cid, line in mid_cell_headings(notebook)]
        print("\n".join(wrong) or "every cell's slide type follows the rule")
        return 1 if wrong else 0
    changed = [p.name for p in course_notebooks() if mark(p)]
    print("marked: " + (", ".join(changed) or "nothing to change")
          + ("\nnow run `python -m i18n.build` so that notebooks/ko carries them" if changed else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
