"""The glossary (i18n/<lang>/GLOSSARY.md) kept in step with the notebooks: each term appears in the translated
text of every notebook its "notebook · section" column names (``python -m i18n.build --check``). See i18n/README.md.

A row is ``| 한국어 | English | API | 노트북 · 절 |``; the first column may give alternatives separated by " / "
(each must appear in at least one of the notebooks named), and the last names notebooks by their two digits
("03 §2", "00 §3, 02 §4", "00 연습 문제"): each of those notebooks must use at least one of the alternatives.
"""
from __future__ import annotations

import re
from pathlib import Path

from i18n import translations as T
from i18n.translations import english_notebooks, load_translations, text_of


def glossary_path(lang: str = "ko") -> Path:
    """Where ``lang``'s glossary lives."""
    return T.I18N / lang / "GLOSSARY.md"


def rows(text: str) -> list[tuple[list[str], list[str]]]:
    """``(terms, notebook numbers)`` of each row of the glossary's table (the header and rule rows left out)."""
    out = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if len(cells) < 4 or set("".join(cells)) <= set("-: ") or cells[0] == "한국어":
            continue
        terms = [t.strip() for t in re.sub(r"\s*\(.*?\)", "", cells[0]).split(" / ")]
        out.append(([t for t in terms if t], sorted(set(re.findall(r"\b(\d\d)\b", cells[-1])))))
    return out


def glossary_problems(lang: str = "ko") -> list[str]:
    """Each glossary term that a notebook its row names does not use, and each row that names no notebook."""
    path = glossary_path(lang)
    if not path.exists():
        return [f"{path.relative_to(T.ROOT)}: missing"]
    texts = {nb.name[:2]: "\n".join(text_of(e, lang) for e in load_translations(nb, lang).values())
             for nb in english_notebooks()}
    out = []
    for terms, numbers in rows(path.read_text(encoding="utf-8")):
        name = " / ".join(terms)
        if not numbers:
            out.append(f"{path.relative_to(T.ROOT)}: {name}: names no notebook (its last column, e.g. '03 §2')")
        for n in numbers:
            if n in texts and not any(t in texts[n] for t in terms):
                out.append(f"{path.relative_to(T.ROOT)}: {name}: not used in notebook {n}, which its row names")
        unused = [t for t in terms if not any(t in texts.get(n, "") for n in numbers)]
        if numbers and len(terms) > 1 and unused:
            out.append(f"{path.relative_to(T.ROOT)}: {name}: {unused} used in none of the notebooks {numbers}")
    return out
