"""The Korean edition (notebooks/ko, i18n/): fresh, generated, the English code and outputs, Korean text, and
``helpers`` speaking Korean when asked.

The Korean notebooks are not run by nbval: they hold the English notebooks' code, with only the string literals
its ``print`` calls say translated, and the English stored outputs with those said again (asserted here), and pyproject.toml's ``norecursedirs`` leaves notebooks/ko out of collection
(also asserted here), so the suite runs each notebook once.
"""
import functools
import io
import json
import os
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import nbformat
import pytest

from conftest import ROOT, can_unshare
from helpers.core import checks
from helpers.core import i18n as lang

sys.path.insert(0, str(ROOT))  # i18n/ (the generator) is a folder of the course, not an installed package
from i18n import build, cell_strings, outputs, translations  # noqa: E402

NOTEBOOKS = build.english_notebooks()
HANGUL_SHARE = 0.5   # of the words outside code, math and link targets
CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)   # CommonMark: closed by as many backticks


@functools.lru_cache(maxsize=None)
def _english(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


@functools.lru_cache(maxsize=None)
def _rendered(path: Path) -> str:
    return build.render(path)


def test_there_is_a_korean_notebook_for_every_english_one():
    assert NOTEBOOKS
    missing = [p.name for p in NOTEBOOKS if not build.output_path(p).exists()]
    assert not missing, f"no notebooks/ko/ version of {missing}; run `python -m i18n.build`"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_markdown_cell_has_a_fresh_translation(path):
    bad = build.problems(path)
    assert not bad, (f"{path.name}: cells without a current Korean translation: "
                     + ", ".join(f"{cell} ({state})" for cell, state in bad)
                     + "; see `python -m i18n.build --check` and i18n/README.md")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_committed_korean_notebook_is_what_the_generator_makes_now(path):
    out = build.output_path(path)
    assert out.exists() and out.read_text(encoding="utf-8") == _rendered(path), \
        f"{out.relative_to(ROOT)} is out of date (or edited by hand); run `python -m i18n.build`"


def _tokens(source: str) -> list[tuple[int, str]]:
    """A cell's tokens, string literals as their kind only (those may be translated)."""
    return [(t.type, "" if t.type == tokenize.STRING else t.string)
            for t in tokenize.generate_tokens(io.StringIO(source).readline)]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_korean_code_cells_and_outputs_are_the_english_ones(path):
    en = _english(path)
    ko = nbformat.reads(build.output_path(path).read_text(encoding="utf-8"), as_version=4)
    assert [(c.id, c.cell_type) for c in ko.cells] == [(c.id, c.cell_type) for c in en.cells], \
        f"{path.name}: the Korean notebook's cells are not the English ones; run `python -m i18n.build`"
    codes = [(e, k) for e, k in zip(en.cells, ko.cells) if e.cell_type == "code"]
    setup_en, setup_ko = codes[0]
    assert setup_ko.source == setup_en.source + build.LANGUAGE_LINE.format(lang="ko")
    entries = translations.load_translations(path)
    for e, k in codes:
        assert {**k, "source": "", "outputs": []} == {**e, "source": "", "outputs": []}, f"{path.name}: cell {e.id}"
        said = cell_strings.usable_strings(entries.get(e.id))   # the cell's printed literals, in Korean
        source = cell_strings.translate_code(e.source, said)
        assert k.source == source or (e, k) == codes[0], f"{path.name}: code cell {e.id} differs from the English one"
        assert _tokens(k.source.removesuffix(build.LANGUAGE_LINE.format(lang="ko"))) == _tokens(e.source), \
            f"{path.name}: code cell {e.id}: more than its string literals differs from the English"
        assert k.outputs == outputs.localize_outputs(e, "ko", said).outputs, \
            f"{path.name}: cell {e.id}: not the English outputs said again"
        for before, after in zip(e.outputs, k.outputs):   # what changed is a message of helpers, now in Korean
            assert before.get("output_type") == after.get("output_type")
            if before.get("output_type") != "stream":
                assert before == after, f"{path.name}: cell {e.id}: only stream outputs are said again"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_korean_notebooks_stored_self_checks_are_korean(path):
    ko = nbformat.reads(build.output_path(path).read_text(encoding="utf-8"), as_version=4)
    printed = [line for c in ko.cells if c.cell_type == "code" for o in c.outputs if o.get("output_type") == "stream"
               for line in o.text.splitlines() if line[:1] and line[0] in outputs.CHECK_MARKS]
    assert printed, f"{path.name}: no self-check output found"
    english = [line for line in printed if not re.search(r"[\uac00-\ud7a3]", line)]
    assert not english, f"{path.name}: self-check results still in English: {english}"


def hangul_share(markdown: str) -> float:
    """The share of Hangul words among the words of ``markdown`` outside code, math, link targets and HTML tags."""
    text = re.sub(r"```.*?```", " ", markdown, flags=re.S)
    text = re.sub(r"`[^`\n]*`", " ", text)
    text = re.sub(r"\$\$.*?\$\$", " ", text, flags=re.S)
    text = re.sub(r"\$[^$\n]*\$", " ", text)
    text = re.sub(r"\]\([^)\s]*\)", "]", text)
    text = re.sub(r"https?://\S+|<[^>]*>", " ", text)
    hangul, latin = len(re.findall(r"[\uac00-\ud7a3]+", text)), len(re.findall(r"[A-Za-z]+", text))
    return hangul / max(1, hangul + latin)


def test_comments_in_fenced_code_may_be_translated_and_nothing_else():
    en = "```bash\n# 1. install\npip install -r requirements.txt  # the pins\n\npytest\n```"
    ko = "```bash\n# 1. 설치\npip install -r requirements.txt  # 고정 버전\n\npytest\n```"
    assert markdown_structure(en)["code blocks"] == markdown_structure(ko)["code blocks"]
    assert markdown_structure(en)["code blocks"] != markdown_structure(ko.replace("pytest", "pytest -x"))["code blocks"]


def test_the_hangul_measure_tells_korean_from_english():
    assert hangul_share("파이프라인 병렬화(pipeline parallelism)는 `torch.distributed.pipelining`로 합니다.") >= 0.5
    assert hangul_share("Pipeline parallelism splits the model into stages (`nn.Sequential`).") == 0


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_translations_are_mostly_hangul_outside_code_and_math(path):
    entries = build.load_translations(path)
    markdown = [c for c in _english(path).cells if c.cell_type == "markdown"]
    low = {c.id: round(hangul_share(build.text_of(entries[c.id])), 2) for c in markdown if c.id in entries}
    low = {cell: share for cell, share in low.items() if share < HANGUL_SHARE}
    assert not low, f"{path.name}: cells that are not mostly Korean (Hangul share of words): {low}"


def markdown_structure(markdown: str) -> dict:
    """What a translation must keep: fenced code (its comments may be translated), heading levels, URLs, table rows,
    math."""
    rest = re.sub(r"```.*?```", " ", markdown, flags=re.S)
    return {"code blocks": [translations.without_comments(b) for b in re.findall(r"```.*?```", markdown, flags=re.S)],
            "heading levels": re.findall(r"^#+(?= )", rest, flags=re.M),
            "URLs": sorted(re.findall(r"https?://[^\s)]+", rest)),
            "table rows": sum(line.lstrip().startswith("|") for line in rest.splitlines()),
            "math": sorted(re.findall(r"\$[^$\n]+\$", rest))}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_translations_keep_code_links_math_tables_and_headings(path):
    entries = build.load_translations(path)
    bad = []
    for cell in (c for c in _english(path).cells if c.cell_type == "markdown" and c.id in entries):
        korean = build.text_of(entries[cell.id])
        en, ko = markdown_structure(cell.source), markdown_structure(korean)
        bad += [f"{cell.id}: {what}" for what in en if en[what] != ko[what]]
        spans = {m.group(0) for m in CODE_SPAN.finditer(re.sub(r"```.*?```", " ", cell.source, flags=re.S))}
        bad += [f"{cell.id}: code span {span} missing" for span in sorted(spans) if span not in korean]
    assert not bad, f"{path.name}: the translation changed what must stay: {bad}"


def test_the_check_flags_a_changed_english_cell_by_notebook_and_cell_id(tmp_path, monkeypatch, capsys):
    src = NOTEBOOKS[0]
    (tmp_path / "notebooks").mkdir()
    nb = nbformat.read(src, as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == "markdown")
    cell.source += "\n\nA sentence added later."
    nbformat.write(nb, str(tmp_path / "notebooks" / src.name))
    (tmp_path / "i18n" / "ko").mkdir(parents=True)
    (tmp_path / "i18n" / "ko" / f"{src.stem}.json").write_text(build.translation_path(src).read_text())
    monkeypatch.setattr(translations, "ROOT", tmp_path)
    monkeypatch.setattr(translations, "NOTEBOOKS", tmp_path / "notebooks")
    monkeypatch.setattr(translations, "I18N", tmp_path / "i18n")
    path = tmp_path / "notebooks" / src.name
    assert (cell.id, "stale") in build.problems(path)
    assert build.main([]) == 1                      # builds, but says what is stale
    assert build.main(["--check"]) == 1
    assert f"{src.name}: cell {cell.id}: stale" in capsys.readouterr().out
    build.main(["--stubs"])
    entry = build.load_translations(path)[cell.id]
    assert entry["todo"] and "A sentence added later." in "".join(entry["en"])
    assert (cell.id, "todo") in build.problems(path)


def test_set_language_makes_the_self_checks_speak_korean_and_english_again(language):
    language("ko")
    threads = 5                                      # 16 cores shared by 3 processes
    ok, msg = checks.verify("00.threads_3_on_16", None)
    assert not ok and "아직 답하지 않았습니다" in msg and "힌트" in msg and "Hint" not in msg
    assert "정답입니다" in checks.verify("00.threads_3_on_16", threads)[1]
    assert "아쉽지만" in checks.verify("01.bubble_slow_stage", 0.9)[1]
    assert os.environ["COURSE_LANG"] == "ko"          # launched processes inherit it
    language("en")
    ok, msg = checks.verify("00.threads_3_on_16", None)
    assert "not answered yet" in msg and "Hint: Every thread of every process" in msg
    assert checks.verify("00.threads_3_on_16", threads)[1].startswith("✅ 00.threads_3_on_16: correct!")


def test_the_launcher_and_device_errors_speak_korean(language):
    from helpers.core.device import get_device
    from helpers.launching.launcher import check_importable

    language("ko")
    with pytest.raises(ValueError, match="노트북 셀") as e:
        check_importable(lambda rank, world: None)
    assert "%%writefile my_worker.py" in str(e.value)
    with pytest.raises(ValueError, match="여기에 없습니다"):
        get_device("cuda:99")
    language("en")
    with pytest.raises(ValueError, match="is defined in a notebook cell"):
        check_importable(lambda rank, world: None)


def test_an_unknown_language_is_refused_with_the_fix(language, monkeypatch):
    with pytest.raises(ValueError, match=r"set_language\('ko'\)"):
        language("fr")
    monkeypatch.setenv("COURSE_LANG", "kr")
    with pytest.raises(ValueError, match="COURSE_LANG"):
        lang.get_language()
    language("ko_KR")
    assert lang.get_language() == "ko"


@pytest.mark.skipif(can_unshare(), reason="test_drills.py's collection check says it, in the same nested pytest")
def test_nbval_does_not_collect_the_korean_notebooks():
    r = subprocess.run([sys.executable, "-m", "pytest", "-n", "0", "--collect-only", "-q", "notebooks"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, "BEYOND_ONE_GPU_NO_RERUN": "1"})
    assert "00_setup.ipynb" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
    assert "notebooks/ko" not in r.stdout, "nbval would run the Korean notebooks a second time"


def test_the_korean_readme_opens_every_korean_notebook():
    text = (ROOT / "README.ko.md").read_text(encoding="utf-8")
    from helpers.publish import colab_url

    for path in NOTEBOOKS:
        rel = f"notebooks/ko/{path.name}"
        assert f"({rel})" in text and colab_url(rel) in text, f"README.ko.md: no link or Colab badge for {rel}"
    assert "README.ko.md" in (ROOT / "README.md").read_text()
    path, expected = build.readme_with_results("ko")
    assert expected is not None and text == expected, \
        "README.ko.md's results table is not README.md's; run `python -m i18n.build`"


def test_the_glossary_covers_every_notebook():
    text = (ROOT / "i18n" / "ko" / "GLOSSARY.md").read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("|") and not set(line) <= set("|-: ")]
    assert len(rows) >= 40
    numbers = {p.name[:2] for p in NOTEBOOKS} | {"08", "09"}
    absent = sorted(n for n in numbers if not re.search(rf"\b{n}\b", text))
    assert not absent, f"GLOSSARY.md teaches no term of notebook(s) {absent}"
    assert json.loads((ROOT / "i18n" / "ko" / "messages.json").read_text(encoding="utf-8"))
