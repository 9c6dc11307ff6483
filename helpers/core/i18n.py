"""The course's language for what ``helpers`` tells a student: English, or Korean (all notebooks, notebooks/ko).

One setting: ``helpers.set_language("ko")`` (the Korean notebooks' setup cell calls it), or the
environment variable ``COURSE_LANG=ko`` before starting Jupyter. :func:`set_language` also sets
the variable, so processes the notebook launches (ranks, Ray trials) speak the same language.

Messages are written in English at the place that says them, as ``tr(key, english, **fields)``;
their translations live in ``i18n/<lang>/messages.json`` at the course's root: ``"messages"``
(per key, ``{"source_sha": ..., "<lang>": template}``, the template with the same ``{fields}``) and
``"exercises"`` (``{"hint", "why"}`` per exercise id). A message with no translation, or whose
translation was made from another English text (its ``source_sha`` is not the hash of the English
said now: the English changed since), is said in English. See i18n/messages.py.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path
from typing import Any

LANGUAGES = ("en", "ko")
ENV = "COURSE_LANG"
MESSAGES_DIR = Path(__file__).resolve().parent.parent.parent / "i18n"

_cache: dict[str, tuple[float, dict]] = {}


def _normal(lang: Any, where: str) -> str:
    code = lang.strip().replace("_", "-").split("-")[0].lower() if isinstance(lang, str) else None
    if code not in LANGUAGES:
        raise ValueError(f"{where}{lang!r} is not a language of the course; use one of {list(LANGUAGES)}, "
                         f"e.g. helpers.set_language('ko') for Korean or helpers.set_language('en') for English")
    return code


def set_language(lang: str) -> None:
    """Make ``helpers`` speak ``lang`` (``"en"`` or ``"ko"``), here and in processes launched later (all notebooks)."""
    os.environ[ENV] = _normal(lang, "")


def get_language() -> str:
    """The course's language now: :func:`set_language`'s, else ``$COURSE_LANG``, else ``"en"`` (all notebooks)."""
    value = os.environ.get(ENV, "").strip()
    return _normal(value, f"the environment variable {ENV}=") if value else "en"


def messages(lang: str | None = None) -> dict:
    """The translations of ``lang`` (default: the current one), from ``i18n/<lang>/messages.json`` (all notebooks)."""
    lang = lang or get_language()
    if lang == "en":
        return {}
    path = MESSAGES_DIR / lang / "messages.json"
    try:
        mtime = path.stat().st_mtime
    except OSError:  # a copy of helpers without the i18n folder: speak English rather than fail
        return {}
    if lang not in _cache or _cache[lang][0] != mtime:
        try:
            _cache[lang] = (mtime, json.loads(path.read_text(encoding="utf-8")))
        except ValueError:  # a damaged translation file (tests/test_i18n.py says so): speak English
            _cache[lang] = (mtime, {})
    return _cache[lang][1]


def english_sha(english: str) -> str:
    """The hash a translation keeps of the English it translates (i18n/messages.py's ``message_sha``) (all notebooks)."""
    return hashlib.sha256(english.encode("utf-8")).hexdigest()[:12]


def translated(key: str, default: str, lang: str | None = None) -> str:
    """The template of message ``key`` in ``lang`` (default: the course's language): its translation if it is
    current, else ``default``, the English (all notebooks)."""
    lang = lang or get_language()
    entry = messages(lang).get("messages", {}).get(key)
    if not isinstance(entry, dict) or entry.get("todo") or entry.get("source_sha") != english_sha(default):
        return default
    return entry.get(lang) or default


def tr(key: str, default: str, **fields: Any) -> str:
    """The message ``key`` in the course's language, ``{fields}`` filled in; ``default`` is English (all notebooks)."""
    template = translated(key, default)
    if not fields:
        return template
    try:
        return template.format(**fields)
    except (KeyError, IndexError, ValueError):  # a translation with other fields: say it in English, not fail
        return default.format(**fields)


def exercise_text(exercise_id: str, field: str, default: str) -> str:
    """An exercise's ``"hint"`` or ``"why"`` in the course's language; ``default`` is the English (all notebooks)."""
    if not default:
        return default
    entry = messages().get("exercises", {}).get(exercise_id, {})
    return default if entry.get("todo") else entry.get(field) or default


def said_by_the_cell(notebook: str, cell_id: str, text: str, lang: str | None = None) -> str:
    """``text``, what a cell of ``notebook`` printed in English (a recorded run's output), with the cell's printed
    sentences in ``lang`` (default: the course's language), as the translated notebook's stored outputs say them
    (``i18n/cell_strings.py``, with the cell's entry in ``i18n/<lang>/<notebook>.json``). As it is in English, and
    where helpers has no i18n folder beside it or the cell has no translation (06)."""
    lang = lang or get_language()
    if lang == "en":
        return text
    try:
        entry = json.loads((MESSAGES_DIR / lang / f"{notebook}.json").read_text(encoding="utf-8")).get(cell_id)
        module = _cell_strings()
    except (OSError, ValueError, ImportError, AttributeError):
        return text
    return module.say_again(text, module.usable_strings(entry))


@functools.cache
def _cell_strings():
    """``i18n/cell_strings.py`` beside helpers, loaded once (the i18n folder is no package helpers installs)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_course_cell_strings", MESSAGES_DIR / "cell_strings.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
