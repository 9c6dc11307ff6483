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

from helpers.core.answers import columns   # a Korean letter takes two columns

INDENT = "   "   # helpers.core.answers.wrap's continuation lines
CHECK_MARKS = "✅❌⏳"   # the first character of what helpers.core.checks.check prints
MIN_LITERAL = 12   # a template with fewer characters of its own would match lines it never printed
COMMON_WORDS = {"none", "all", "yes", "no", "true", "false", "same", "equal", "first", "last", "library", "ideal",
                "bound", "padding", "drop_last", "pieces", "ran", "more", "less", "dealing"}   # a cell's field: its own
WEAK_LITERAL = 20   # below this, a match must show it is the message: a field said again too, or fields of numbers


def _pieces(template: str) -> list[tuple[str, str | None]]:
    """``(literal text, field name or None)`` in order. A template whose braces are no field names (``tr`` was
    called without fields: "tune.report({'score': ...})") is all literal text, as ``tr`` prints it."""
    try:
        pieces = [(literal, name) for literal, name, _, _ in string.Formatter().parse(template)]
    except ValueError:
        return [(template, None)]
    return pieces if all(name is None or name.isidentifier() for _, name in pieces) else [(template, None)]


def _regex(template: str, greedy_first: bool = False) -> re.Pattern:
    """A pattern that matches what ``template.format(...)`` printed, a named group per field (repeats must agree);
    each field as short as it can be, or, with ``greedy_first``, the one starting the template as long as it can be
    (a list grown on its left, ``"{before}, m = {m}: ..."``, ends at the last ", m = ")."""
    out, seen = [], set()
    for i, (literal, name) in enumerate(_pieces(template)):
        out.append(re.escape(literal))
        if name is not None:
            group = "f_" + re.sub(r"\W", "_", name)
            value = "(.*)" if greedy_first and i == 0 and not literal else "(.*?)"
            out.append(f"(?P={group})" if group in seen else f"(?P<{group}>{value[1:]}")
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
            greedy = [_regex(english, greedy_first=True)] if english.startswith("{") and _pieces(english)[0][1] else []
            messages.append((literal, [_regex(english)] + greedy, entry[lang]))
    messages.sort(key=lambda m: -m[0])
    texts = {}
    from helpers.core import checks

    for ex_id, ex in checks.exercises().items():
        entry = catalogue["exercises"].get(ex_id, {})
        if entry.get("source_sha") == exercise_sha(ex.hint, ex.why) and not entry.get("todo"):
            texts.update({getattr(ex, f): entry[f] for f in ("hint", "why") if getattr(ex, f) and entry.get(f)})
    return messages, texts


def _evident(said: dict[str, str], printed: dict[str, str]) -> bool:
    """Whether a match of a template with little text of its own is the message: a field is itself a message (said
    again), or every field printed numbers ("64, 256"), not words ("forward and backward")."""
    return any(said[n] != v for n, v in printed.items()) or all(re.fullmatch(r"[\d.,%×+−\-'\" /]*", v.strip())
                                                               for v in printed.values())


def say_again(text: str, lang: str = "ko", field: bool = False, strict: bool = False) -> str:
    """``text`` (one printed line, or a ``field`` of one) in ``lang`` where it is a message of ``helpers``; else as
    is. A whole line is matched only by templates with at least ``MIN_LITERAL`` characters of their own ("  rank
    {rank}: {where}" would match lines it never printed), or by a template without fields of two words or more that is
    the whole line ("in short:"); a field, already cut out by its message, by any; a whole
    line or a ``strict`` field (a cell's, any text) by one with under ``WEAK_LITERAL`` only where it is evident."""
    texts = _table(lang, str(T.ROOT))[1]
    if text in texts:
        return texts[text]
    said = _by_template(text, lang, field, strict)
    if field and "; " in text:   # a field that lists messages, each one whole, where a template read across a "; "
        # leaves more English ("{name} … at {s1}, its slowest …" with s1 running into the next item); a part is not
        # cut out by a message, so a short template must show it is the message ("{first} and {last}")
        parts = [_by_template(part, lang, True, True) for part in text.split("; ")]
        if None not in parts and (said is None or _english("; ".join(parts)) < _english(said)):
            return "; ".join(parts)
    if said is not None:
        return said
    if field and "; " in text:   # a field that lists some messages ("run 3 of 1 thread(s) (...); run 7 of ...")
        return "; ".join(say_again(part, lang, field=True, strict=strict) for part in text.split("; "))
    error = re.match(r"(\w+(?:Error|Exception): )(.+)", text, re.S)   # print("ValueError:", e): the course's message
    if error and not field:
        return error.group(1) + say_again(error.group(2), lang)
    return text


def _english(text: str) -> int:
    """How many Latin letters ``text`` has: of two readings, the one that said more in the language has fewer."""
    return len(re.findall("[A-Za-z]", text))


def _by_template(text: str, lang: str, field: bool, strict: bool) -> str | None:
    """:func:`say_again`'s reading of ``text`` as one message of ``helpers`` (perhaps followed by an exercise's why),
    or ``None``."""
    messages, texts = _table(lang, str(T.ROOT))
    for literal, patterns, translated in messages:
        if (literal < MIN_LITERAL and not field and (patterns[0].groupindex or len(text.split()) < 2)   # "in short:"
                or strict and text.lower() in COMMON_WORDS):
            continue
        found = [m for m in (p.fullmatch(text) for p in patterns) if m]
        if not found:   # a message followed by more (a check's result, then the exercise's why)
            m = patterns[0].match(text)
            if m is None or not text[m.end():].startswith(" ") or text[m.end() + 1:] not in texts:
                continue
            found = [m]
        said = [({n: say_again(v, lang, field=True) for n, v in m.groupdict().items()}, m) for m in found]
        values, m = min(said, key=lambda vm: _english(_fill(translated, vm[0])))   # least English
        if (literal < WEAK_LITERAL and (strict or not field) and not _evident(values, m.groupdict())
                and not re.match(r" *[A-Za-z]{6,} ", patterns[0].pattern.replace("\\ ", " "))):   # "    plugins {…}"
            continue   # "{share} of the batch" on any line ending so; "{first} and {last}" in any cell's field
        rest = text[m.end():]
        return _fill(translated, values) + (" " + texts[rest[1:]] if rest else "")
    return None


def _blocks(text: str) -> list[str]:
    """A stream's text cut into what was printed as one message: a line and the lines ``wrap`` continued it on."""
    blocks: list[str] = []
    for line in text.split("\n"):
        if blocks and line.startswith(INDENT) and not line.startswith(INDENT + " ") and blocks[-1].strip():
            blocks[-1] += "\n" + line
        else:
            blocks.append(line)
    return blocks


@functools.lru_cache(maxsize=None)
def _closed(lang: str, root: str) -> list[tuple[re.Pattern, str]]:
    """The messages that start and end with text of their own, at least ``WEAK_LITERAL`` characters: found inside a
    line too (a helper's clause a cell printed after its own words), longest first."""
    catalogue = load_catalogue(lang)
    found = []
    for key, english in english_messages().items():
        pieces, entry = _pieces(english), catalogue["messages"].get(key)
        literal = sum(len(text) for text, _ in pieces)
        if (message_status(key, english, entry, lang) == "ok" and literal >= WEAK_LITERAL and pieces[0][0][:1].isalpha()
                and (pieces[-1][1] is None and pieces[-1][0][-1:].strip()) and "\n" not in english):
            found.append((literal, re.compile(r"(?<![A-Za-z])" + _regex(english).pattern), entry[lang]))
    return [(pattern, translated) for _, pattern, translated in sorted(found, key=lambda f: -f[0])]


@functools.lru_cache(maxsize=None)
def _counted(lang: str, root: str) -> list[tuple[re.Pattern, str]]:
    """The messages that are a number and then at least ``MIN_LITERAL`` characters of their own ("{n} trials
    finished"): found inside a line too where a number starts them (a table's cell), longest first."""
    catalogue = load_catalogue(lang)
    found = []
    for key, english in english_messages().items():
        pieces, entry = _pieces(english), catalogue["messages"].get(key)
        if (message_status(key, english, entry, lang) == "ok" and len(pieces) == 2 and pieces[0][0] == ""
                and pieces[0][1] is not None and pieces[1][1] is None and len(pieces[1][0]) >= MIN_LITERAL
                and pieces[1][0][-1:].isalpha()):
            pattern = (r"(?P<gap> *)(?<![\w.,])(?P<f_" + re.sub(r"\W", "_", pieces[0][1]) + r">\d[\d,]*(?:\.\d+)?)"
                       + re.escape(pieces[1][0]) + r"(?![A-Za-z])")
            found.append((len(pieces[1][0]), re.compile(pattern), entry[lang]))
    return [(pattern, translated) for _, pattern, translated in sorted(found, key=lambda f: -f[0])]


def _in_column(m: re.Match, said: str) -> str:
    """``said`` in place of what ``m`` matched; where a column's gap (two spaces or more) precedes it, the gap widened
    or narrowed so that the cell still ends where it did (a Korean letter takes two columns)."""
    gap, printed = m.group("gap"), m.group(0)[len(m.group("gap")):]
    if len(gap) >= 2:
        gap = " " * max(1, len(gap) + columns(printed) - columns(said))
    return gap + said


def say_inside(text: str, lang: str = "ko") -> str:
    """``text`` with each message of :func:`_closed` and :func:`_counted` found inside it said again, its fields as
    printed."""
    if not re.search(r"[A-Za-z]{3}", text):
        return text
    for pattern, translated in _closed(lang, str(T.ROOT)):
        text = pattern.sub(lambda m: _fill(translated, {n: say_again(v, lang, field=True)
                                                        for n, v in m.groupdict().items()}), text)
    for pattern, translated in _counted(lang, str(T.ROOT)):
        text = pattern.sub(lambda m: _in_column(m, _fill(translated, m.groupdict())), text)
    return text


def localize_outputs(cell: dict, lang: str = "ko", strings: dict[str, str] | None = None) -> dict:
    """A copy of a code cell whose stream outputs say ``helpers``' messages in ``lang`` (notebooks/ko), and then
    what the cell's own translated literals printed (``strings``: i18n/cell_strings.py).

    A message that ``helpers.core.answers.wrap`` broke over lines (continuation lines indented) is joined,
    said again, and wrapped again the same way.
    """
    cell = copy.deepcopy(cell)
    for out in cell.get("outputs", []):
        if out.get("output_type") != "stream":
            continue
        said = _localized(out["text"], lang, strings, whole_lines=True)
        alone = _localized(out["text"], lang, strings, whole_lines=False)   # the cell's literals first
        a, b = said.split("\n"), alone.split("\n")
        # a message whose first field reached back over a cell's literal ("{verdict} than ...") reads worse
        # than the cell's own literal with the message said inside its field: per line, the one with less English,
        # for lines that are whole in both readings (a wrapped message is wrapped again only when read as one)
        out["text"] = ("\n".join(y if _whole(a, i) and _whole(b, i) and _english(y) < _english(x) else x
                                 for i, (x, y) in enumerate(zip(a, b))) if len(a) == len(b) else said)
    return cell


def _whole(lines: list[str], i: int) -> bool:
    """Whether line ``i`` is printed whole: neither a continuation of ``wrap`` nor continued on the next line."""
    return not lines[i].startswith(INDENT) and not (i + 1 < len(lines) and lines[i + 1].startswith(INDENT))


def _localized(text: str, lang: str, strings: dict[str, str] | None, whole_lines: bool) -> str:
    """One stream output said again: its lines as messages (unless not ``whole_lines``), then the cell's literals,
    then the messages inside lines."""
    from i18n.cell_strings import say_again as say_cell_strings

    from helpers.core.answers import wrap

    blocks = []
    for block in (_blocks(text) if whole_lines else []):
        joined = block.replace("\n" + INDENT, " ")
        core = joined.rstrip(" ")   # print(message, more) leaves a space after the message
        said = say_again(core, lang) + joined[len(core):] if core.strip() else joined
        if said == joined and "\n" in block:   # no wrapped message: lines of a table, each said on its own
            block = said = joined = "\n".join(say_again(line, lang) for line in block.split("\n"))
        checked = "\n" in block or (block != "" and block[0] in CHECK_MARKS)   # checks.check wraps its lines
        blocks.append(block if said == joined else (wrap(said) if checked else said))
    text = "\n".join(blocks) if whole_lines else text
    text = say_cell_strings(text, strings or {}, lambda value: say_again(value, lang, field=True, strict=True))
    return "\n".join(say_inside(line, lang) for line in text.split("\n"))   # a message inside a line
