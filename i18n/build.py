"""Generate the translated notebooks from the English ones and the translation files (notebooks/ko).

    python -m i18n.build            # write notebooks/ko/NN_*.ipynb (also: python i18n/build.py)
    python -m i18n.build --check    # list missing, stale and unfinished translations and out-of-date
                                    # notebooks; exit 1 if there are any
    python -m i18n.build --stubs    # add a TODO entry, with the English to translate, for every
                                    # missing or stale cell of i18n/ko/NN_*.json

A translation file ``i18n/<lang>/NN_name.json`` maps each markdown cell's id to
``{"source_sha": ..., "<lang>": ...}``: the first 12 hex digits of the SHA-256 of the English cell
it translates, and the translation (a string, or a list of lines as in .ipynb files). When the
English cell changes, its hash no longer matches and the entry is *stale*.

A generated notebook is the English one with every markdown cell replaced by its translation,
links to the Colab copies of the English notebooks pointed at the translated ones, a note about
the stored outputs added to the first markdown cell, and one line added to the setup cell (the
first code cell) that makes ``helpers`` speak the language. Every code cell is the English
notebook's with the string literals its ``print`` calls say translated (i18n/cell_strings.py); the stored
outputs are the English run's, with the lines ``helpers`` printed through its message catalogue and the
cell's translated literals said again in the language (i18n/outputs.py). See i18n/README.md.
"""
from __future__ import annotations

import argparse
import copy
import re
import sys
from pathlib import Path

import nbformat

if not __package__:   # run as a file (python i18n/build.py): put the folder that holds the package on the path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from i18n import translations as T  # noqa: E402  (its ROOT, NOTEBOOKS and I18N: the one place tests redirect)
from i18n.cell_strings import cell_problems, translate_code, usable_strings  # noqa: E402
from i18n.glossary import glossary_problems  # noqa: E402
from i18n.messages import message_problems, message_stubs  # noqa: E402
from i18n.outputs import localize_outputs  # noqa: E402
from i18n.readme import RESULTS, readme_problems  # noqa: E402
from i18n.stubs import exercise_problems, exercise_stubs, string_stubs, stubs  # noqa: E402
from i18n.translations import (LANGUAGES, english_notebooks, load_translations, output_path, problems,  # noqa: E402
                               text_of, translation_path)


# Added to the setup cell of a translated notebook (helpers.publish keeps it when it rewrites that cell).
LANGUAGE_LINE = '\nhelpers.set_language("{lang}")'


# Added to the first markdown cell: what of the stored outputs is in the reader's language, and what stays English.
OUTPUT_NOTE = {
    "ko": ("> **한국어판 안내**: 이 노트북은 영어 원본 [`{name}`](../{name})에서 생성되었습니다. 코드는 원본과 같고, "
           "셀이 `print`로 출력하는 문장만 한국어로 옮겼습니다. 저장된 출력은 원본을 실행한 결과이며(두 판의 수치가 "
           "같습니다), 강좌가 쓰는 문장, 곧 셀이 출력한 문장과 `helpers`가 강좌의 메시지 목록"
           "([`i18n/ko/messages.json`](../../i18n/ko/messages.json))을 거쳐 말하는 것(측정에서 이끌어 낸 결론과 판정, "
           "연습 문제 자가 점검 결과와 힌트, 강좌의 안내와 오류 메시지)은 한국어로 바꿔 두었습니다. 영어로 남는 것은 "
           "열을 맞춘 표의 머리글과 일부 표의 행 이름, 출력되는 명령어와 코드, 파일 경로, API와 장치 이름, 실행 "
           "구성 표시(예: `2 processes × 1 thread (gloo)`), 셀 코드가 줄을 가려낼 때 쓰는 줄 앞 표지(`rank N:`, "
           "`restart N:`), 셀이 일부러 일으키는 오류의 문구(예: `rank 1 hit a bug on purpose`), 그래프 속 글자, "
           "라이브러리의 출력(진행 표시줄, 프로파일러 표, PyTorch·Ray·gloo의 메시지), 그리고 노트북 06에서 기록해 둔 "
           "GPU 실행을 보여 주는 셀 가운데 두 곳의 몇 구절(`equal to`, `GPU under a 25 % memory fraction`)입니다. "
           "직접 실행해도 마찬가지입니다."),
}


COLAB_LINK = re.compile(r"(https://colab\.research\.google\.com/github/[^)\s]+?/blob/[^/)\s]+/notebooks/)"
                        r"(\d\d_[^)\s/]+\.ipynb)")


def localize_links(text: str, lang: str = "ko") -> str:
    """Point Colab links to the English notebooks at the translated ones; keep ``../`` links working (notebooks/ko)."""
    text = COLAB_LINK.sub(lambda m: f"{m.group(1)}{lang}/{m.group(2)}", text)
    return re.sub(r"\]\(\.\./", "](../../", text)


def translate(notebook: Path, lang: str = "ko") -> nbformat.NotebookNode:
    """The translated notebook: markdown translated, code cells and outputs the English ones (notebooks/ko).

    A cell without a translation keeps its English text; a stale one keeps its old translation
    (``--check`` lists both).
    """
    nb = nbformat.read(notebook, as_version=4)
    out = copy.deepcopy(nb)
    entries = load_translations(notebook, lang)
    first_markdown = first_code = True
    for cell in out.cells:
        if cell.cell_type == "markdown":
            entry = entries.get(cell["id"])
            text = text_of(entry, lang) if entry and text_of(entry, lang).strip() else cell.source
            text = localize_links(text, lang)
            if first_markdown:
                text = text.rstrip("\n") + "\n\n" + OUTPUT_NOTE[lang].format(name=notebook.name)
                first_markdown = False
            cell.source = text
        elif cell.cell_type == "code":
            said = usable_strings(entries.get(cell["id"]))
            cell.outputs = localize_outputs(cell, lang, said).outputs
            cell.source = translate_code(cell.source, said)
            if first_code:
                cell.source = cell.source + LANGUAGE_LINE.format(lang=lang)
                first_code = False
    course = out.metadata.setdefault("course", {})
    course["language"] = lang
    course["translated_from"] = f"../{notebook.name}"
    return out


def render(notebook: Path, lang: str = "ko") -> str:
    """The text of the translated notebook, exactly as :func:`build` writes it (notebooks/ko)."""
    text = nbformat.writes(translate(notebook, lang))
    return text if text.endswith("\n") else text + "\n"


def build(lang: str = "ko") -> list[str]:
    """Write every translated notebook (and README.<lang>.md's results table); return what changed (notebooks/ko).

    A translated notebook whose English one is gone is removed.
    """
    changed = []
    sources = english_notebooks()
    for notebook in sources:
        path, text = output_path(notebook, lang), render(notebook, lang)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            changed.append(str(path.relative_to(T.ROOT)))
    readme, text = readme_with_results(lang)
    if text is not None and readme.read_text(encoding="utf-8") != text:
        readme.write_text(text, encoding="utf-8")
        changed.append(f"{readme.name} (results table copied from README.md)")
    names = {n.name for n in sources}
    for old in sorted((T.NOTEBOOKS / lang).glob("[0-9][0-9]_*.ipynb")):
        if old.name not in names:
            old.unlink()
            changed.append(f"{old.relative_to(T.ROOT)} (removed: no English notebook)")
    return changed


def readme_with_results(lang: str = "ko") -> tuple[Path, str | None]:
    """README.<lang>.md with README.md's results table copied in (``None``: it has no results markers) (README)."""
    path = T.ROOT / f"README.{lang}.md"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    english = (T.ROOT / "README.md").read_text(encoding="utf-8") if (T.ROOT / "README.md").exists() else ""
    start, end = RESULTS
    if not all(m in text and m in english for m in RESULTS):
        return path, None
    block = english[english.index(start):english.index(end)]
    return path, text[:text.index(start)] + block + text[text.index(end):]


def check(lang: str = "ko") -> list[str]:
    """What is wrong: untranslated cells, out-of-date notebooks, entries whose English cell is gone,
    messages without a current translation, README drift, glossary terms the notebooks do not use (notebooks/ko)."""
    errors = []
    for notebook in english_notebooks():
        for cell_id, state in problems(notebook, lang):
            errors.append(f"{notebook.name}: cell {cell_id}: {state}")
        path = output_path(notebook, lang)
        if not path.exists() or path.read_text(encoding="utf-8") != render(notebook, lang):
            errors.append(f"{path.relative_to(T.ROOT)}: out of date; run `python -m i18n.build`")
        cells, entries = nbformat.read(notebook, as_version=4).cells, load_translations(notebook, lang)
        for cell in cells:
            if cell.cell_type == "code":
                strings = (entries.get(cell["id"]) or {}).get("strings", {})
                errors += [f"{notebook.name}: code cell {cell['id']}: {p}" for p in cell_problems(cell.source, strings)]
        ids = {c["id"] for c in cells}
        for cell_id in entries:
            if cell_id not in ids:
                errors.append(f"{translation_path(notebook, lang).relative_to(T.ROOT)}: entry {cell_id} has no cell "
                              "in the English notebook (a deleted cell?): remove the entry, or restore the cell")
    readme, text = readme_with_results(lang)
    if text is None:
        errors.append(f"{readme.name}: missing, or without the results markers {RESULTS[0]} … {RESULTS[1]}")
    elif readme.read_text(encoding="utf-8") != text:
        errors.append(f"{readme.name}: its results table differs from README.md's; run `python -m i18n.build`")
    return errors + message_problems(lang) + readme_problems(lang) + glossary_problems(lang)


def main(argv: list[str] | None = None) -> int:
    """The command line: build (default), ``--check`` or ``--stubs`` (notebooks/ko)."""
    parser = argparse.ArgumentParser(prog="python -m i18n.build", description=__doc__.split("\n\n")[0])
    parser.add_argument("--lang", default="ko", choices=LANGUAGES)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="list what is missing, stale or out of date; exit 1 if any")
    mode.add_argument("--stubs", action="store_true", help="add TODO entries for missing and stale cells")
    args = parser.parse_args(argv)
    if args.stubs:
        added = stubs(args.lang) + string_stubs(args.lang) + exercise_stubs(args.lang) + message_stubs(args.lang)
        print("\n".join(added) if added else "nothing to add: every markdown cell has an entry")
        return 0
    if args.check:
        errors = check(args.lang) + exercise_problems(args.lang)
        for line in errors:
            print(line)
        if errors:
            print(f"{len(errors)} problem(s). Out of date: `python -m i18n.build`. Missing or stale: "
                  "`python -m i18n.build --stubs`, translate the TODO entries (i18n/README.md), then build.")
            return 1
        print(f"all {len(english_notebooks())} notebooks translated ({args.lang}) and up to date")
        return 0
    changed = build(args.lang)
    print("\n".join(changed) if changed else f"notebooks/{args.lang}/ already up to date")
    left = [f"{nb.name}: cell {cid}: {s}" for nb in english_notebooks() for cid, s in problems(nb, args.lang)]
    if left:
        print(f"\n{len(left)} cell(s) not translated or stale (written in English or with the old translation):\n  "
              + "\n  ".join(left) + "\nSee `python -m i18n.build --check`.")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
