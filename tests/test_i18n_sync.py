"""The Korean edition kept in step with the English (i18n/messages.py, i18n/readme.py, ``python -m i18n.build --check``):
every message and exercise text translated from the English said now, a deleted English cell refused, and
README.ko.md with README.md's sections, commands and figures."""
import re
import string
import sys

import nbformat
import pytest

from conftest import ROOT
from helpers.core import checks
from helpers.core import i18n as lang

sys.path.insert(0, str(ROOT))  # i18n/ (the generator) is a folder of the course, not an installed package
from i18n import build, glossary, messages, readme, translations  # noqa: E402

NOTEBOOKS = build.english_notebooks()


def test_every_exercise_has_a_current_korean_hint_and_why():
    problems = build.exercise_problems("ko")
    assert not problems, ("exercises without a current Korean hint and why (`python -m i18n.build --stubs` adds "
                          "them to translate):\n" + "\n".join(problems))
    unused = sorted(set(lang.messages("ko")["exercises"]) - set(checks.exercises()))
    assert not unused, f"i18n/ko/messages.json has exercises that no lesson declares: {unused}"


def _fields(template: str) -> set:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


def test_every_message_has_a_current_korean_template_with_the_same_fields():
    english, korean = messages.english_messages(), lang.messages("ko")["messages"]
    assert len(english) >= 100, "the tr() calls in helpers were not found"
    assert not messages.message_problems("ko"), "\n".join(messages.message_problems("ko"))
    bad = [key for key, text in english.items() if _fields(korean[key]["ko"]) != _fields(text)]
    assert not bad, f"i18n/ko/messages.json: Korean templates with other {{fields}} than the English: {bad}"


@pytest.fixture
def tmp_course(tmp_path, monkeypatch):
    """An empty course folder to break things in: the generator's ROOT, NOTEBOOKS and I18N point into it."""
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "i18n" / "ko").mkdir(parents=True)
    monkeypatch.setattr(translations, "ROOT", tmp_path)
    monkeypatch.setattr(translations, "NOTEBOOKS", tmp_path / "notebooks")
    monkeypatch.setattr(translations, "I18N", tmp_path / "i18n")
    return tmp_path


def test_a_changed_english_message_makes_its_korean_stale_and_helpers_say_the_english(tmp_course, language):
    real = messages.english_messages(ROOT)   # before the folder below replaces helpers
    (tmp_course / "helpers").mkdir()
    (tmp_course / "helpers" / "said.py").write_text(
        'from helpers.core.i18n import tr\nOK = tr("check.correct", "✅ {id}: right, well done!", id="x")\n')
    (tmp_course / "i18n" / "ko" / "messages.json").write_text(
        (ROOT / "i18n" / "ko" / "messages.json").read_text(encoding="utf-8"), encoding="utf-8")
    assert "i18n/ko/messages.json: message check.correct: stale (its English changed)" in messages.message_problems()
    assert build.main(["--check"]) == 1
    old = messages.load_catalogue()["messages"]["check.correct"]["ko"]
    assert messages.message_stubs() == ["message check.correct (stale)"]
    entry = messages.load_catalogue()["messages"]["check.correct"]
    assert entry["todo"] and entry["en"] == "✅ {id}: right, well done!" and entry["ko"] == old
    language("ko")   # the real catalogue: its translation was made from the English in helpers, not this one
    assert lang.tr("check.correct", "✅ {id}: right, well done!", id="x") == "✅ x: right, well done!"
    assert lang.tr("check.correct", real["check.correct"], id="x") == old.format(id="x") != "✅ x: correct!"


def test_the_check_fails_on_a_translation_whose_english_cell_was_deleted(tmp_course, capsys):
    src = NOTEBOOKS[0]
    nb = nbformat.read(src, as_version=4)
    gone = [c for c in nb.cells if c.cell_type == "markdown"][1]
    nb.cells.remove(gone)
    nbformat.write(nb, str(tmp_course / "notebooks" / src.name))
    (tmp_course / "i18n" / "ko" / f"{src.stem}.json").write_text((ROOT / "i18n" / "ko" / f"{src.stem}.json").read_text())
    build.build()
    assert [e for e in build.check() if "deleted cell" in e] == [
        f"i18n/ko/{src.stem}.json: entry {gone.id} has no cell in the English notebook (a deleted cell?): remove the "
        "entry, or restore the cell"]
    assert build.main(["--check"]) == 1 and gone.id in capsys.readouterr().out


def test_the_korean_readme_has_the_english_sections_commands_and_figures():
    assert not readme.readme_problems("ko"), "\n".join(readme.readme_problems("ko"))


def test_the_readme_check_catches_a_changed_figure_a_dropped_section_and_a_changed_command():
    en, ko = (ROOT / "README.md").read_text(encoding="utf-8"), (ROOT / "README.ko.md").read_text(encoding="utf-8")
    assert not readme.drift(en, ko)
    longer = en.replace("about 25 minutes on 2 cores", "about 40 minutes on 2 cores")   # the Korean still says 25
    assert longer != en and any("figures differ" in p and "['40']" in p and "['25']" in p
                                for p in readme.drift(longer, ko))
    no_reliability = re.sub(r"\n## 신뢰성.*?(?=\n## )", "", ko, flags=re.S)
    assert no_reliability != ko and "its sections are not README.md's" in readme.drift(en, no_reliability)[0]
    other = en.replace(". .venv/bin/activate && pytest\n", ". .venv/bin/activate && pytest -x\n")
    assert other != en and any("its commands" in p for p in readme.drift(other, ko))
    assert "# 1. 강좌를" in ko   # a translated comment inside the commands is not a difference


def _diagnosis(message: str, exercise: str) -> str:
    """What a behaviour check said about the student's function: between "❌ id: " and ". Hint: " (". 힌트: ")."""
    assert message.startswith(f"❌ {exercise}: "), message
    end = message.index(". 힌트: " if ". 힌트: " in message else ". Hint: ")
    return message[len(f"❌ {exercise}: "):end]


def test_a_code_exercise_check_says_what_is_wrong_in_the_course_language(language):
    def my_indices(n, world_size, rank, drop_last):   # every index on every rank
        return list(range(n))

    def one_f_one_b(m, p, stage):   # GPipe's order: every forward, then every backward
        return [f"F{i}" for i in range(m)] + [f"B{i}" for i in range(m)]

    wrong = {"03.my_indices": my_indices, "01.one_f_one_b": one_f_one_b}
    said = {}
    for code in ("en", "ko"):
        language(code)
        for exercise, fn in wrong.items():
            ok, message = checks.verify(exercise, fn)
            assert not ok
            said[code, exercise] = _diagnosis(message, exercise)
    assert said["en", "03.my_indices"] == ("my_indices(10, 4, 0, drop_last=False) = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], "
                                           "not what the sampler gives (look at the padding)")
    assert said["en", "01.one_f_one_b"] == (
        "one_f_one_b(4, 2, 0) holds 4 micro-batches at once at its peak, more than 1F1B ever holds on that stage: 1F1B "
        "runs that stage's next backward first, even if it must wait for it, to keep memory from growing with m")
    for exercise, call in (("03.my_indices", "my_indices(10, 4, 0, drop_last=False)"),
                           ("01.one_f_one_b", "one_f_one_b(4, 2, 0)")):
        korean = said["ko", exercise]
        assert re.search("[가-힣]", korean) and korean != said["en", exercise], korean
        assert not re.search("[A-Za-z]{2,} [a-z]{2,} [a-z]{2,}", korean.replace(call, "")), f"English left in: {korean}"
        assert call in korean   # the code it quotes stays as it is


def test_every_glossary_term_is_used_in_the_notebooks_its_row_names():
    assert not glossary.glossary_problems("ko"), "\n".join(glossary.glossary_problems("ko"))


def test_the_glossary_check_catches_a_term_no_notebook_uses_and_a_row_without_a_notebook(tmp_course):
    nb = NOTEBOOKS[8]   # 08_collectives
    (tmp_course / "notebooks" / nb.name).write_bytes(nb.read_bytes())
    (tmp_course / "i18n" / "ko" / f"{nb.stem}.json").write_text((ROOT / "i18n" / "ko" / f"{nb.stem}.json").read_text())
    (tmp_course / "i18n" / "ko" / "GLOSSARY.md").write_text(
        "| 한국어 | English | API | 노트북 · 절 |\n|---|---|---|---|\n"
        "| 링 올리듀스 | ring all-reduce | `dist.all_reduce` | 08 §2 |\n"
        "| 링 올리듀스 / 나무 올리듀스 | ring / tree all-reduce | — | 08 §2 |\n"
        "| 파이프라인 병렬화 | pipeline parallelism | — | 08 §1 |\n"
        "| 올리듀스 | all-reduce | — | 어디에도 없음 |\n", encoding="utf-8")
    assert glossary.glossary_problems("ko") == [
        "i18n/ko/GLOSSARY.md: 링 올리듀스 / 나무 올리듀스: ['나무 올리듀스'] used in none of the notebooks ['08']",
        "i18n/ko/GLOSSARY.md: 파이프라인 병렬화: not used in notebook 08, which its row names",
        "i18n/ko/GLOSSARY.md: 올리듀스: names no notebook (its last column, e.g. '03 §2')"]
