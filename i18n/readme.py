"""README.<lang>.md kept in step with README.md (``python -m i18n.build --check``): the same sections, the same
commands and the same figures. See i18n/README.md.

- **sections**: the headings outside fenced code, level by level, in the same order (their text is translated);
- **commands**: each section's fenced code blocks, equal once comment lines are left out (comments may be translated);
- **figures**: each section's numbers outside code blocks, link targets and URLs, as a multiset (a figure the
  English changed, added or dropped is flagged in the section where it differs).

The results table between the results markers is copied from README.md by the generator and left out here.
"""
from __future__ import annotations

import re
from collections import Counter

from i18n import translations as T
from i18n.translations import without_comments

RESULTS = ("<!-- results:start -->", "<!-- results:end -->")  # README.md's table, written by helpers.bench
HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
FENCE = re.compile(r"^\s*(```|~~~)")
# a number: digits with . or , inside (2,039; 3.12), not the tail of a word or hash (d0dc3af, v2, 1F1B's second 1)
NUMBER = re.compile(r"(?<![A-Za-z0-9_.])\d+(?:[.,]\d+)*")
URL = re.compile(r"\]\([^)]*\)|https?://\S+")


def sections(text: str) -> list[dict]:
    """The README cut at its headings: ``{"level", "title", "code": [block, ...], "prose": str}`` per section; the
    first (level 0) is what comes before the first heading."""
    start, end = RESULTS
    if start in text and end in text:
        text = text[:text.index(start)] + text[text.index(end) + len(end):]
    out = [{"level": 0, "title": "", "code": [], "prose": []}]
    fence, block = None, []
    for line in text.splitlines():
        if fence:
            if FENCE.match(line) and line.strip().startswith(fence):
                out[-1]["code"].append(without_comments("\n".join(block)))
                fence, block = None, []
            else:
                block.append(line)
        elif FENCE.match(line):
            fence = FENCE.match(line).group(1)
        elif m := HEADING.match(line):
            out.append({"level": len(m.group(1)), "title": m.group(2).strip(), "code": [], "prose": []})
        else:
            out[-1]["prose"].append(line)
    for s in out:
        s["prose"] = "\n".join(s["prose"])
    return out


def figures(prose: str) -> Counter:
    """The numbers of a section's prose, link targets and URLs left out."""
    return Counter(NUMBER.findall(URL.sub(" ", prose)))


def drift(english: str, translated: str, name: str = "README.ko.md") -> list[str]:
    """How ``translated`` differs from ``english`` in sections, commands and figures (README)."""
    en, tr = sections(english), sections(translated)
    if [s["level"] for s in en] != [s["level"] for s in tr]:
        return [f"{name}: its sections are not README.md's: README.md has "
                + ", ".join(f"{'#' * s['level']} {s['title']}" for s in en[1:])
                + "; " + name + " has " + ", ".join(f"{'#' * s['level']} {s['title']}" for s in tr[1:])]
    out = []
    for e, t in zip(en, tr):
        where = f"{name}: section {t['title'] or '(before the first heading)'!r} (README.md: {e['title'] or 'the top'!r})"
        if e["code"] != t["code"]:
            out.append(f"{where}: its commands (code blocks, comments left out) are not README.md's")
        missing, extra = figures(e["prose"]) - figures(t["prose"]), figures(t["prose"]) - figures(e["prose"])
        if missing or extra:
            out.append(f"{where}: figures differ: only in README.md {sorted(missing.elements())}, "
                       f"only in {name} {sorted(extra.elements())}")
    return out


def readme_problems(lang: str = "ko") -> list[str]:
    """README.<lang>.md's drift from README.md, for ``--check`` (README)."""
    english, translated = T.ROOT / "README.md", T.ROOT / f"README.{lang}.md"
    if not english.exists() or not translated.exists():
        return [f"{translated.name}: missing"] if english.exists() else []
    return drift(english.read_text(encoding="utf-8"), translated.read_text(encoding="utf-8"), translated.name)
