"""The message catalogue (i18n/<lang>/messages.json, ``"messages"``): every ``tr(key, English, ...)`` call in helpers,
the translation of each, and the hash each translation keeps of the English it was made from. See i18n/README.md.

An entry is ``{"source_sha": ..., "<lang>": template}``: ``source_sha`` is :func:`message_sha` of the English
template, so a changed English message makes its translation *stale*; ``helpers.core.i18n.tr`` then says the English and
``python -m i18n.build --check`` lists it.
"""
from __future__ import annotations

import ast
import json
from pathlib import Path

from i18n import translations as T
from i18n.translations import source_sha

TR_NAMES = ("tr", "_tr")


def message_sha(english: str) -> str:
    """The hash a translated message keeps of its English template (helpers.core.i18n computes the same)."""
    return source_sha(english)


def english_messages(root: Path | None = None) -> dict[str, str]:
    """``{key: English template}`` of every ``tr(key, english, ...)`` call in ``root``/helpers (the catalogue).

    A key used twice must carry the same English both times (ValueError otherwise, naming both places).
    """
    found: dict[str, tuple[str, str]] = {}
    for path in sorted(((root or T.ROOT) / "helpers").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in TR_NAMES
                    and len(node.args) >= 2):
                continue
            try:
                key, english = ast.literal_eval(node.args[0]), ast.literal_eval(node.args[1])
            except ValueError:
                raise ValueError(f"{path}:{node.lineno}: tr() needs a literal key and a literal English template, "
                                 "so that the catalogue can list it") from None
            where = f"{path.relative_to(root or T.ROOT)}:{node.lineno}"
            if key in found and found[key][0] != english:
                raise ValueError(f"message {key!r} has two English texts ({found[key][1]} and {where}); "
                                 "give one of them another key")
            found.setdefault(key, (english, where))
    return {key: english for key, (english, _) in sorted(found.items())}


def catalogue_path(lang: str = "ko") -> Path:
    """Where ``lang``'s messages and exercise texts live (i18n/<lang>/messages.json)."""
    return T.I18N / lang / "messages.json"


def load_catalogue(lang: str = "ko") -> dict:
    """``{"messages": ..., "exercises": ...}`` of ``lang`` (empty ones if the file does not exist)."""
    path = catalogue_path(lang)
    data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    return {"messages": data.get("messages", {}), "exercises": data.get("exercises", {})}


def save_catalogue(data: dict, lang: str = "ko") -> None:
    """Write ``lang``'s catalogue in its stable form (sorted keys, one space indent, UTF-8)."""
    path = catalogue_path(lang)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"messages": dict(sorted(data["messages"].items())), "exercises": dict(sorted(data["exercises"].items()))}
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def message_status(key: str, english: str, entry: dict | None, lang: str = "ko") -> str:
    """``"ok"``, ``"missing"``, ``"stale"`` (its English changed) or ``"todo"`` (a stub) for one message."""
    if not isinstance(entry, dict) or not str(entry.get(lang, "")).strip():
        return "missing"
    if entry.get("source_sha") != message_sha(english):
        return "stale"
    if entry.get("todo") or str(entry[lang]).startswith("TODO"):
        return "todo"
    return "ok"


def message_problems(lang: str = "ko") -> list[str]:
    """Each message without a current translation, and each translation no ``tr()`` call uses (for ``--check``)."""
    english, done = english_messages(), load_catalogue(lang)["messages"]
    rel = catalogue_path(lang).relative_to(T.ROOT)
    out = [f"{rel}: message {key}: {state}" + (" (its English changed)" if state == "stale" else "")
           for key, text in english.items() if (state := message_status(key, text, done.get(key), lang)) != "ok"]
    out += [f"{rel}: message {key}: no tr() call in helpers uses it; remove it" for key in sorted(set(done) - set(english))]
    return out


def message_stubs(lang: str = "ko") -> list[str]:
    """Add a TODO entry, with the English to translate, for every missing or stale message; return their keys."""
    data, added = load_catalogue(lang), []
    for key, english in english_messages().items():
        entry = data["messages"].get(key)
        state = message_status(key, english, entry, lang)
        if state in ("missing", "stale"):
            old = entry.get(lang) if isinstance(entry, dict) else None
            data["messages"][key] = {"source_sha": message_sha(english), "todo": True, "en": english,
                                     lang: old or "TODO " + english}
            added.append(f"message {key} ({state})")
    if added:
        save_catalogue(data, lang)
    return added
