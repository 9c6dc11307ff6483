"""What a code cell prints, in the reader's language (notebooks/<lang>). See i18n/README.md.

A code cell's own sentences (``print(f"ASHA: {r['epochs']} epochs in {s:.0f} s")``) are string literals of its
code. The translation file of a notebook holds, for a code cell, ``{"strings": {English literal: translated
literal}}``, each literal exactly as it is written in the code (quotes, ``f`` prefix, fields and all). The
translated notebook's code is the English code with each such literal replaced, token for token, so that a student
who runs it reads Korean; its stored outputs are the English run's, with each literal's printed form said again:
the English literal becomes a pattern (its text, a group per field), each match in the cell's stream outputs is
replaced by the translated literal filled with the fields as they were printed. The numbers stay the English run's.

The rules a translated literal must keep, checked by :func:`literal_problem`: the same kind of literal (an
f-string for an f-string, the same quotes), the same fields (each expression with its conversion and format spec,
as many times), and a field starts or ends the translation exactly where one starts or ends the English (the
pattern leaves the edge fields out: what they printed stays in place).

A literal is *translatable* when a ``print(...)`` call of the cell says it (:func:`_said`: not a literal it
compares with or passes to a function) and it has an English word of its own (outside its fields): a literal
without one (a field, units, a path) stays as it is. An English literal that no longer is in its cell (the code
changed) makes its translation *unused*; a translatable literal without one is *missing*; ``python -m i18n.build --check`` lists both.
"""
from __future__ import annotations

import ast
import io
import re
import tokenize

from helpers.core.answers import columns   # a Korean letter takes two columns

ANCHOR_WORDS = 4   # a literal of fewer words is said again only where it is anchored (see _pattern)
WORD = re.compile(r"[A-Za-z]{2,}")
NUMBER_SPEC = re.compile(r":[^:{}'\"]*[eEfFgG%d,]$")   # a field printed as a number: {a:.3f}, {n:>9,}, {s:g}
NUMBER = r" *(?:[-+]?(?:\d[\d,_]*(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?%?|nan|[-+]?inf)"   # padded on its left


def _said(node: ast.AST):
    """The string literals of an expression that end up in what it prints: itself, either side of a ``+``, either
    branch of a ``... if ... else ...``, an alternative of ``... or ...``, the element of a ``sep.join(... for ...)``
    (each is printed). A literal compared with (``"rank 0" in out``), passed to another function (a ``.format``
    template too), or joined with (the separator) is not said, and is never translated."""
    if isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str)):
        yield node
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        yield from _said(node.left)
        yield from _said(node.right)
    elif isinstance(node, ast.IfExp):   # "within" if ... else "more than"
        yield from _said(node.body)
        yield from _said(node.orelse)
    elif isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):   # lines() or "nothing above 1.00"
        for value in node.values:
            yield from _said(value)
    elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join"
          and isinstance(node.func.value, ast.Constant) and len(node.args) == 1
          and isinstance(node.args[0], (ast.GeneratorExp, ast.ListComp))):   # "; ".join(f"... {x}" for x in xs)
        yield from _said(node.args[0].elt)


def _print_spans(source: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """The (start, end) positions, as (line, column), of the string literals the ``print(...)`` calls say."""
    try:   # IPython's line magics (%tensorboard ...) and shell lines (!pip ...) read as `pass`: the lines keep their place
        tree = ast.parse(re.sub(r"(?m)^(\s*)[%!].*$", lambda m: m.group(1) + "pass", source))
    except SyntaxError:
        return []
    lines = source.splitlines()

    def column(line: int, offset: int) -> int:   # ast counts UTF-8 bytes; tokenize counts characters
        return len(lines[line - 1].encode("utf-8")[:offset].decode("utf-8", "ignore"))
    spans = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
            for arg in node.args:
                spans += [((n.lineno, column(n.lineno, n.col_offset)), (n.end_lineno, column(n.end_lineno, n.end_col_offset)))
                          for n in _said(arg)]
    return spans


def _tokens(source: str) -> list[tokenize.TokenInfo]:
    return list(tokenize.generate_tokens(io.StringIO(source).readline))


def _literals(source: str) -> set[str]:
    """Every string literal of a cell's code, as written (none where the cell is not Python: a cell magic)."""
    try:
        return {tok.string for tok in _tokens(source) if tok.type == tokenize.STRING}
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return set()


def _parts(literal: str) -> list[tuple[str, str | None]]:
    """``(literal text, None)`` and ``("", field)`` pieces of a string literal, in order; a field is its expression,
    conversion and format spec as written (``{r['epochs']:.0f}`` → ``r['epochs']:.0f``)."""
    node = ast.parse(literal, mode="eval").body
    if isinstance(node, ast.Constant):
        return [(node.value, None)]
    parts = []
    for v in node.values:
        if isinstance(v, ast.Constant):
            parts.append((v.value, None))
        else:
            conv = "" if v.conversion == -1 else "!" + chr(v.conversion)
            spec = "" if v.format_spec is None else ":" + "".join(
                p.value if isinstance(p, ast.Constant) else "{" + ast.unparse(p.value) + "}" for p in v.format_spec.values)
            parts.append(("", ast.unparse(v.value) + conv + spec))
    return parts


def own_words(literal: str) -> int:
    """How many English words a literal has of its own (outside its fields)."""
    try:
        return sum(len(WORD.findall(text)) for text, field in _parts(literal) if field is None)
    except (SyntaxError, ValueError):
        return 0


def translatable(source: str) -> list[str]:
    """The string literals of a code cell that its ``print`` calls say and that have words to translate, in order,
    each once."""
    spans = _print_spans(source)
    out: list[str] = []
    try:
        tokens = _tokens(source)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return []
    for tok in tokens:
        if tok.type != tokenize.STRING or tok.string in out:
            continue
        if own_words(tok.string) and any(a <= tok.start and tok.end <= b for a, b in spans):
            out.append(tok.string)
    return out


def literal_problem(english: str, translated: str) -> str | None:
    """Why ``translated`` cannot stand for ``english`` in the code (see the module's rules), or None."""
    try:
        en, tr = ast.parse(english, mode="eval").body, ast.parse(translated, mode="eval").body
    except SyntaxError as e:
        return f"not a string literal ({e.msg})"
    if type(en) is not type(tr) or not isinstance(tr, (ast.Constant, ast.JoinedStr)) or \
            (isinstance(tr, ast.Constant) and not isinstance(tr.value, str)):
        return "not the same kind of string literal (an f-string for an f-string, a plain string for a plain one)"
    if re.match(r"[A-Za-z]*", english).group().lower() != re.match(r"[A-Za-z]*", translated).group().lower():
        return "not the same string prefix (f, r, b...)"
    en_parts, tr_parts = _parts(english), _parts(translated)
    en_fields, tr_fields = sorted(f for _, f in en_parts if f), sorted(f for _, f in tr_parts if f)
    if en_fields != tr_fields:
        return f"not the same fields: {en_fields} in the English, {tr_fields} in the translation"
    for edge in (0, -1):
        if en_parts[edge][1] is not None and tr_parts[edge][1] != en_parts[edge][1]:
            return (f"the English {'starts' if edge == 0 else 'ends'} with the field {{{en_parts[edge][1]}}}: the "
                    f"translation must {'start' if edge == 0 else 'end'} with it too")
    en_inner, tr_inner = sorted(f for _, f in _inner(en_parts) if f), sorted(f for _, f in _inner(tr_parts) if f)
    if en_inner != tr_inner:
        moved = sorted(set(en_inner) - set(tr_inner))
        return (f"the field(s) {', '.join('{' + f + '}' for f in moved)} sit inside the English but at an edge of the "
                "translation: put text before or after them (what an edge field printed stays in place, so the stored "
                "output would lose it)")
    return None


def _inner(parts: list[tuple[str, str | None]]) -> list[tuple[str, str | None]]:
    """The pieces without the fields at either edge (what they printed stays in place)."""
    start = 1 if parts and parts[0][1] is not None else 0
    end = len(parts) - 1 if len(parts) > start and parts[-1][1] is not None else len(parts)
    return parts[start:end]


def _pattern(english: str, lines: bool = False) -> tuple[re.Pattern, dict[str, str]] | None:
    """A pattern matching what ``english`` printed, edge fields left out; a named group per inner field. A field
    after words holds no copy of them (so a match starts at the last copy: "off by 4e-04, ... off by 5e-03 (off by:
    ..." matches from the second "off by"); after punctuation alone (", ") it may (a module's repr holds ", "). A
    field stays within its line unless ``lines``. A literal without fields and of fewer than :data:`ANCHOR_WORDS`
    words matches only where it starts or ends a line (one word: starts) or touches a literal already said again:
    "more than" alone would be found in a helper's sentence too, "over" at the end of "carried over"."""
    groups, out, plain, before = {}, [], [], ""
    for text, field in _inner(_parts(english)):
        if field is None:
            out.append(re.escape(text))
            plain.append(re.escape(text))
            before = text
            continue
        char = r"[\s\S]" if lines else r"[^\n]"
        value = f"(?:(?!{re.escape(before)}){char})*?" if WORD.search(before) else f"{char}*?"
        if NUMBER_SPEC.search(field):   # a number ({a:.3f}, {n:,}): it ends where the number does
            value = NUMBER
        plain.append(value)
        if field in groups:
            out.append(f"(?P={groups[field]})")
        else:
            groups[field] = f"g{len(groups)}"
            out.append(f"(?P<{groups[field]}>{value})")
    if not any(t for t, f in _inner(_parts(english)) if f is None):
        return None
    inner = _inner(_parts(english))   # a word is found whole: "on {x}:" not in "convolution  ...:"
    body = (r"(?<![A-Za-z0-9_])" * (inner[0][1] is None and inner[0][0][:1].isalnum()) + "".join(out)
            + r"(?![A-Za-z0-9_])" * (inner[-1][1] is None and inner[-1][0][-1:].isalnum()))
    if own_words(english) < ANCHOR_WORDS and len(_parts(english)) == 1:   # anchored (see above)
        word = "".join(plain)   # one word: not at a line's end ("over" in "carried over")
        ends = r"(?:\x00| \x00)" if own_words(english) < 2 else r"(?:$|\n|\x00| \x00)"
        body = rf"(?:(?<=^)|(?<=\n)|(?<=\x00)|(?<=\x00 )|(?={word}{ends})){body}"
    return re.compile(body), groups


def _field_said(value: str, field_said) -> str:
    """A printed field's text said again by ``field_said`` (a helpers message), left/right padding to its width kept."""
    if "\n" in value:   # a field that printed lines (a helper's paragraph): each line said on its own
        return "\n".join(_field_said(line, field_said) for line in value.split("\n"))
    said = field_said(value) if value.strip(" ") else value   # a message with its own spaces (" (why ...)")
    if said != value:
        return said
    core = value.strip(" ")
    said = field_said(core) if core else core
    if said == core:
        return value
    if value == core:   # printed without padding
        return said
    pad = " " * max(0, len(value) - columns(said))   # the columns as wide as printed: a Korean letter is two
    return said + pad if value.startswith(core) else pad + said if value.endswith(core) else said


def say_again(text: str, strings: dict[str, str], field_said=None) -> str:
    """``text`` (a cell's printed output) with each English literal's printed form replaced by its translation, the
    fields as they were printed (or, where ``field_said`` is given, as it says them: a label that helpers says through
    its catalogue, i18n/outputs.py); the literals with the most text of their own first, each place replaced once."""
    def literal_length(english: str) -> int:
        return sum(len(t) for t, f in _parts(english) if f is None)

    marks: list[str] = []
    for english in sorted(strings, key=literal_length, reverse=True) * 2:   # twice: a short literal anchored by a
        # shorter neighbour said again only in the first round
        if literal_problem(english, strings[english]):   # refused (--check says why): the English stays
            continue
        found = _pattern(english)
        if found is None:
            continue
        pattern, groups = found
        if not pattern.search(text):   # a field that printed several lines (a helper's paragraph)
            pattern, groups = _pattern(english, lines=True)
        translated = _inner(_parts(strings[english]))

        def fill(m: re.Match, translated=translated, groups=groups, edge=False) -> str:
            said = "".join(t if f is None else _field_said(m.group(groups[f]), field_said) if field_said
                           else m.group(groups[f]) for t, f in translated)
            if edge:   # edge fields (labels) that start or end a line said again, or the match left as it was
                printed = [m.groupdict().get(g) or "" for g in ("start", "end")]
                start, end = (_field_said(v, field_said) for v in printed)
                if [start, end] == printed:
                    return m.group(0)
                said = start + said + end
            marks.append(said)
            return f"\x00{len(marks) - 1}\x00"
        parts = _parts(english)
        if field_said and (parts[0][1] or len(parts) > 1 and parts[-1][1]):
            text = re.sub(r"(?:(?<=^)|(?<=\n)|(?<=\x00))(?P<start>[^\n\x00]*?)" * bool(parts[0][1]) + pattern.pattern
                          + r"(?P<end>[^\n\x00]*?)(?=\n|\Z|\x00)" * bool(len(parts) > 1 and parts[-1][1]),
                          lambda m: fill(m, edge=True), text)
        text = pattern.sub(fill, text)
    return re.sub(r"\x00(\d+)\x00", lambda m: marks[int(m.group(1))], text)


def translate_code(source: str, strings: dict[str, str]) -> str:
    """``source`` with each English literal of ``strings`` replaced by its translation, token for token, where a print
    says it (a literal that fails :func:`literal_problem` stays English)."""
    usable = usable_strings({"strings": strings})
    if not usable:
        return source
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    out, at = [], 0
    try:
        tokens = _tokens(source)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return source
    spans = _print_spans(source)   # only where a print says it: the same literal compared or passed on stays English
    for tok in tokens:
        if tok.type == tokenize.STRING and tok.string in usable and any(a <= tok.start and tok.end <= b for a, b in spans):
            start = offsets[tok.start[0] - 1] + tok.start[1]
            end = offsets[tok.end[0] - 1] + tok.end[1]
            out.append(source[at:start] + usable[tok.string])
            at = end
    return "".join(out) + source[at:]


def cell_problems(source: str, strings: dict[str, str]) -> list[str]:
    """What is wrong with a code cell's translated literals: missing, unused, unfinished or refused ones."""
    wanted = translatable(source)
    out = [f"missing: {en}" for en in wanted if not strings.get(en) or strings[en] == "TODO"]
    present = _literals(source)
    out += [f"unused (no longer in the cell's code): {en}" for en in strings if en not in present]
    for en, tr in strings.items():
        if en in present and tr and tr != "TODO" and (why := literal_problem(en, tr)):
            out.append(f"refused: {en} → {tr}: {why}")
    return out


def usable_strings(entry: dict | None) -> dict[str, str]:
    """The translated literals of a code cell's entry that the code can take (done, and kept to the rules)."""
    strings = (entry or {}).get("strings", {})
    return {en: tr for en, tr in strings.items() if tr and tr != "TODO" and literal_problem(en, tr) is None}
