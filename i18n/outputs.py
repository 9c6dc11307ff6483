"""The stored outputs of a translated notebook, with what ``helpers`` said put in the reader's language
(notebooks/ko). See i18n/README.md.

The Korean notebooks keep the English run's outputs (the same numbers in both editions). A line of a stored
output that a ``tr(key, English, ...)`` message of ``helpers`` printed (a self-check result, a hint, a course
message) is said again from the catalogue: the English template, read from the source, is matched against the
line, its fields are taken from the line as they were printed, and the translated template is filled with them.
A field that is itself a message (an exercise's hint or why, a diagnosis) is translated the same way. Everything
else a cell printed (its own ``print`` of numbers and sentences, tables, library output) stays as it was.
"""
from __future__ import annotations

import copy
import functools
import re
import string

from i18n import translations as T
from i18n.messages import english_messages, load_catalogue, message_status
from i18n.stubs import exercise_sha

INDENT = "   "   # helpers.core.answers.wrap's continuation lines
CHECK_MARKS = "✅❌⏳"   # the first character of what helpers.core.checks.check prints
MIN_LITERAL = 12   # a template with fewer characters of its own would match lines it never printed


def _pieces(template: str) -> list[tuple[str, str | None]]:
    """``(literal text, field name or None)`` in order. A template whose braces are no field names (``tr`` was
    called without fields: "tune.report({'score': ...})") is all literal text, as ``tr`` prints it."""
    try:
        pieces = [(literal, name) for literal, name, _, _ in string.Formatter().parse(template)]
    except ValueError:
        return [(template, None)]
    return pieces if all(name is None or name.isidentifier() for _, name in pieces) else [(template, None)]


def _regex(template: str) -> re.Pattern:
    """A pattern that matches what ``template.format(...)`` printed, a named group per field (repeats must agree)."""
    out, seen = [], set()
    for literal, name in _pieces(template):
        out.append(re.escape(literal))
        if name is not None:
            group = "f_" + re.sub(r"\W", "_", name)
            out.append(f"(?P={group})" if group in seen else f"(?P<{group}>.*?)")
            seen.add(group)
    return re.compile("".join(out), re.S)


def _fill(template: str, values: dict[str, str]) -> str:
    """``template`` with each field replaced by the text printed for it (format specs already applied then)."""
    return "".join(literal + (values["f_" + re.sub(r"\W", "_", name)] if name is not None else "")
                   for literal, name in _pieces(template))


@functools.lru_cache(maxsize=None)
def _table(lang: str, root: str) -> tuple[list[tuple[int, re.Pattern, str]], dict[str, str]]:
    """The messages to say again (their literal length, pattern, translation), longest literal text first, and the
    exercise texts (English → translation)."""
    catalogue = load_catalogue(lang)
    messages = []
    for key, english in english_messages().items():
        entry = catalogue["messages"].get(key)
        literal = sum(len(text) for text, _ in _pieces(english))
        if message_status(key, english, entry, lang) == "ok":
            messages.append((literal, _regex(english), entry[lang]))
    messages.sort(key=lambda m: -m[0])
    texts = {}
    from helpers.core import checks

    for ex_id, ex in checks.exercises().items():
        entry = catalogue["exercises"].get(ex_id, {})
        if entry.get("source_sha") == exercise_sha(ex.hint, ex.why) and not entry.get("todo"):
            texts.update({getattr(ex, f): entry[f] for f in ("hint", "why") if getattr(ex, f) and entry.get(f)})
    return messages, texts


def say_again(text: str, lang: str = "ko", field: bool = False) -> str:
    """``text`` (one printed line, or a ``field`` of one) in ``lang`` where it is a message of ``helpers``; else as
    is. A whole line is matched only by templates with at least ``MIN_LITERAL`` characters of their own ("  rank
    {rank}: {where}" would match lines it never printed); a field, already cut out by its message, by any."""
    messages, texts = _table(lang, str(T.ROOT))
    if text in texts:
        return texts[text]
    for literal, pattern, translated in messages:
        if literal < MIN_LITERAL and not field:
            continue
        m = pattern.fullmatch(text)
        if m is None:   # a message followed by more (a check's result, then the exercise's why)
            m = pattern.match(text)
            if m is None or not text[m.end():].startswith(" ") or text[m.end() + 1:] not in texts:
                continue
        values = {name: say_again(value, lang, field=True) for name, value in m.groupdict().items()}
        rest = text[m.end():]
        return _fill(translated, values) + (" " + texts[rest[1:]] if rest else "")
    return text


def _blocks(text: str) -> list[str]:
    """A stream's text cut into what was printed as one message: a line and the lines ``wrap`` continued it on."""
    blocks: list[str] = []
    for line in text.split("\n"):
        if blocks and line.startswith(INDENT) and blocks[-1].strip():
            blocks[-1] += "\n" + line
        else:
            blocks.append(line)
    return blocks


def localize_outputs(cell: dict, lang: str = "ko", strings: dict[str, str] | None = None) -> dict:
    """A copy of a code cell whose stream outputs say ``helpers``' messages in ``lang`` (notebooks/ko), and then
    what the cell's own translated literals printed (``strings``: i18n/cell_strings.py).

    A message that ``helpers.core.answers.wrap`` broke over lines (continuation lines indented) is joined,
    said again, and wrapped again the same way.
    """
    from i18n.cell_strings import say_again as say_cell_strings

    from helpers.core.answers import wrap

    cell = copy.deepcopy(cell)
    for out in cell.get("outputs", []):
        if out.get("output_type") != "stream":
            continue
        blocks = []
        for block in _blocks(out["text"]):
            joined = block.replace("\n" + INDENT, " ")
            said = say_again(joined, lang) if joined.strip() else joined
            checked = "\n" in block or (block != "" and block[0] in CHECK_MARKS)   # checks.check wraps its lines
            blocks.append(block if said == joined else (wrap(said) if checked else said))
        out["text"] = say_cell_strings("\n".join(blocks), strings or {})
    return cell
