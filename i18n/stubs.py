"""TODO entries for what is missing or stale (``python -m i18n.build --stubs``): the English to translate for each
markdown cell, and for each exercise's hint and why. See i18n/README.md."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import nbformat

from i18n import translations as T
from i18n.translations import english_notebooks, load_translations, save_translations, source_sha, status, text_of


def english_before(notebook: Path, cell_id: str, sha: str) -> str | None:
    """The English a stale entry was translated from, if a committed version of ``notebook`` has it (notebooks/ko)."""
    rel = str(notebook.relative_to(T.ROOT))
    try:
        revs = subprocess.run(["git", "-C", str(T.ROOT), "log", "--format=%H", "-n", "50", "--", rel],
                              capture_output=True, text=True, timeout=60).stdout.split()
        for rev in revs:
            shown = subprocess.run(["git", "-C", str(T.ROOT), "show", f"{rev}:{rel}"], capture_output=True, text=True,
                                   timeout=60)
            if shown.returncode:
                continue
            for cell in nbformat.reads(shown.stdout, as_version=4).cells:
                if cell.get("id") == cell_id and source_sha(cell.source) == sha:
                    return cell.source
    except (OSError, subprocess.SubprocessError, ValueError):
        pass
    return None


def stubs(lang: str = "ko") -> list[str]:
    """Add a TODO entry holding the English for every missing or stale cell; return them (notebooks/ko).

    A stale entry keeps its old translation beside the new English (``"en"``) and, when git has it,
    the English it was translated from (``"en_before"``), to compare with; translate, then delete
    ``"todo"``, ``"en"`` and ``"en_before"``.
    """
    added = []
    for notebook in english_notebooks():
        nb = nbformat.read(notebook, as_version=4)
        entries = load_translations(notebook, lang)
        merged, touched = {}, False
        for cell in nb.cells:
            if cell.cell_type != "markdown":
                continue
            state, entry = status(cell, entries, lang), entries.get(cell["id"])
            if state in ("missing", "stale"):
                old = text_of(entry, lang) if state == "stale" else "TODO " + cell.source
                before = english_before(notebook, cell["id"], entry.get("source_sha", "")) if state == "stale" else None
                entry = {"source_sha": source_sha(cell.source), "todo": True, "en": cell.source.splitlines(True),
                         **({"en_before": before.splitlines(True)} if before else {}), lang: old.splitlines(True)}
                added.append(f"{notebook.name}: cell {cell['id']} ({state})")
                touched = True
            if entry is not None:
                merged[cell["id"]] = entry
        merged.update({k: v for k, v in entries.items() if k not in merged})  # unused entries: kept, --check warns
        if touched:
            save_translations(notebook, merged, lang)
    return added


def exercise_sha(hint: str, why: str) -> str:
    """The hash a Korean hint and why remember of the English ones (helpers' self-checks)."""
    return source_sha(f"{hint}\n{why}")


def exercise_problems(lang: str = "ko") -> list[str]:
    """Exercises whose hint or why has no current translation in i18n/<lang>/messages.json (helpers' self-checks)."""
    from helpers.core import checks

    path = T.I18N / lang / "messages.json"
    done = json.loads(path.read_text(encoding="utf-8")).get("exercises", {}) if path.exists() else {}
    out = []
    for ex_id, ex in sorted(checks.exercises().items()):
        entry = done.get(ex_id)
        if entry is None or any(getattr(ex, f) and not entry.get(f, "").strip() for f in ("hint", "why")):
            out.append(f"{path.relative_to(T.ROOT)}: exercise {ex_id}: missing")
        elif entry.get("source_sha") != exercise_sha(ex.hint, ex.why):
            out.append(f"{path.relative_to(T.ROOT)}: exercise {ex_id}: stale (its English hint or why changed)")
        elif entry.get("todo"):
            out.append(f"{path.relative_to(T.ROOT)}: exercise {ex_id}: todo")
    return out


def exercise_stubs(lang: str = "ko") -> list[str]:
    """Add a TODO entry with the English for every missing or stale exercise hint/why (helpers' self-checks)."""
    from helpers.core import checks

    path = T.I18N / lang / "messages.json"
    data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {"messages": {}, "exercises": {}}
    done, added = data.setdefault("exercises", {}), []
    for ex_id, ex in sorted(checks.exercises().items()):
        entry = done.get(ex_id, {})
        if entry.get("source_sha") != exercise_sha(ex.hint, ex.why) or not entry.get("hint"):
            done[ex_id] = {"source_sha": exercise_sha(ex.hint, ex.why), "todo": True,
                           "en": {"hint": ex.hint, "why": ex.why},
                           "hint": entry.get("hint") or "TODO " + ex.hint, "why": entry.get("why") or "TODO " + ex.why}
            added.append(f"exercise {ex_id}")
    if added:
        data["exercises"] = dict(sorted(done.items()))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return added


def string_stubs(lang: str = "ko") -> list[str]:
    """Add ``"TODO"`` for every translatable literal of every code cell that has no translation; drop the unused
    ones (their English is no longer in the code); return what was added (notebooks/<lang>)."""
    from i18n.cell_strings import _literals, translatable

    added = []
    for notebook in english_notebooks():
        entries, touched = load_translations(notebook, lang), False
        for cell in nbformat.read(notebook, as_version=4).cells:
            if cell.cell_type != "code":
                continue
            entry = entries.get(cell["id"], {})
            old = entry.get("strings", {})
            wanted = translatable(cell.source)
            present = _literals(cell.source)
            new = {en: old.get(en) or "TODO" for en in wanted}
            new.update({en: tr for en, tr in old.items() if en in present and en not in new})   # kept by hand
            if new != old:
                added += [f"{notebook.name}: code cell {cell['id']}: {en}" for en in wanted if not old.get(en)]
                if new:
                    entries[cell["id"]] = {**entry, "strings": new}
                else:
                    entries.pop(cell["id"], None)
                touched = True
        if touched:
            save_translations(notebook, entries, lang)
    return added
