"""What a code cell prints, in Korean (i18n/cell_strings.py): the Korean code is the English code with its said
literals replaced, token for token, under rules that keep it the same program; the stored outputs say each literal's
printed text again with the numbers the English run printed."""
import io
import sys
import tokenize

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT))  # i18n/ (the generator) is a folder of the course, not an installed package
from i18n import cell_strings as C  # noqa: E402

EN = 'f"{name}: {r[\'epochs\']} epochs in {r[\'seconds\']:.0f} s, best validation accuracy {r[\'best\']:.3f}"'
KO = 'f"{name}: 에폭 {r[\'epochs\']}개, {r[\'seconds\']:.0f}초, 최고 검증 정확도 {r[\'best\']:.3f}"'
CELL = ('runs = {"ASHA": {"epochs": 70, "seconds": 17.2, "best": 0.981}}\n'
        'assert "rank 0 speaking" in "... (rank 0 speaking)"   # compared with: never translated\n'
        'for name, r in runs.items():\n'
        '    print(' + EN + ',\n'
        '          "and that is all" if r["best"] > 0.5 else "and the run failed")\n')


def test_a_translation_must_be_the_same_program():
    assert C.literal_problem(EN, KO) is None
    refused = {
        KO.replace(":.0f", ":.1f"): "not the same fields",                      # another format spec
        KO.replace(", {r['seconds']:.0f}초", ""): "not the same fields",        # a field dropped
        'f"에폭 {name}: {r[\'epochs\']}개, {r[\'seconds\']:.0f}초, {r[\'best\']:.3f}"': "must start with it",
        'f"{name}: {r[\'best\']:.3f} 에폭 {r[\'epochs\']}개, {r[\'seconds\']:.0f}초"': "must end with it",
        KO[1:]: "not the same kind",                                            # a plain string for an f-string
        'f"{name}: 에폭': "not a string literal",
        'rf"{name}: {r[\'epochs\']} {r[\'seconds\']:.0f} {r[\'best\']:.3f}"': "prefix",
    }
    # a field at an edge the English has text at would lose what it printed from the stored output
    assert "put text before or after" in C.literal_problem('f"won {n} times"', 'f"이긴 횟수 {n}"')
    assert C.literal_problem('f"{x} than the loss"', 'f"{x}"') is None   # the English's own edge field: kept in place
    for korean, why in refused.items():
        assert why in (C.literal_problem(EN, korean) or ""), korean


def test_only_the_literals_print_says_are_translatable_and_only_they_change():
    assert C.translatable(CELL) == [EN, '"and that is all"', '"and the run failed"']   # not the compared literal
    strings = {EN: KO, '"and that is all"': '"이것이 전부입니다"', '"and the run failed"': '"실행이 실패했습니다"'}
    korean = C.translate_code(CELL, strings)
    assert korean != CELL and "에폭" in korean and "rank 0 speaking" in korean
    kinds = lambda src: [(t.type, t.string if t.type != tokenize.STRING else "")
                         for t in tokenize.generate_tokens(io.StringIO(src).readline)]
    assert kinds(korean) == kinds(CELL)   # the same tokens, only string literals replaced
    exec(compile(korean, "<ko>", "exec"), {})   # and it runs
    assert C.translate_code(CELL, {EN: KO.replace(":.0f", ":.1f")}) == CELL   # a refused translation is not used


def test_the_stored_output_is_said_again_with_the_numbers_printed():
    printed = ("ASHA: 70 epochs in 17 s, best validation accuracy 0.981 and that is all\n"
               "full: 162 epochs in 27 s, best validation accuracy 0.975 and that is all\n"
               "a line of a helper's table: 12 epochs in here stays\n")
    said = C.say_again(printed, {EN: KO, '"and that is all"': '"이것이 전부입니다"'})
    assert said == ("ASHA: 에폭 70개, 17초, 최고 검증 정확도 0.981 이것이 전부입니다\n"
                    "full: 에폭 162개, 27초, 최고 검증 정확도 0.975 이것이 전부입니다\n"
                    "a line of a helper's table: 12 epochs in here stays\n")


def test_a_field_does_not_reach_across_lines_and_a_short_literal_does_not_reach_into_a_longer_ones_text():
    en_long, en_short = 'f"rung {d}: {n} trials reached it"', '"trials reached it"'
    strings = {en_long: 'f"단 {d}: 트라이얼 {n}개 도달"', en_short: '"트라이얼 도달"'}
    said = C.say_again("rung 1: 18 trials reached it\nrung\n3 trials reached it\n", strings)
    assert said == "단 1: 트라이얼 18개 도달\nrung\n3 트라이얼 도달\n"


def test_a_changed_english_literal_is_missing_and_its_old_translation_unused():
    changed = CELL.replace("best validation accuracy", "best val. accuracy")
    problems = C.cell_problems(changed, {EN: KO, '"and that is all"': '"전부"', '"and the run failed"': '"실패"'})
    assert any(p.startswith("unused") and EN in p for p in problems)
    assert any(p.startswith("missing") and "best val. accuracy" in p for p in problems)
    assert C.translate_code(changed, {EN: KO}) == changed   # the Korean notebook says the new English meanwhile


def test_a_literal_after_a_wide_character_on_its_line_is_found():
    # ast counts columns in UTF-8 bytes, tokenize in characters: "×" before a literal shifted them apart
    assert C.translatable('x = 2\nprint(f"{x:.0f}× the float16 error", "consistent with its coarser rounding")\n') == \
        ['f"{x:.0f}× the float16 error"', '"consistent with its coarser rounding"']


def test_a_match_starts_at_the_last_copy_of_the_text_before_a_field():
    strings = {'f"off by {a} (off by: {b} entries)"': 'f"오차 {a} (오차: 항목 {b}개)"'}
    said = C.say_again("fp32 off by 4e-04, no scaler off by 5e-03 (off by: 3 entries)\n", strings)
    assert said == "fp32 off by 4e-04, no scaler 오차 5e-03 (오차: 항목 3개)\n"


def test_a_field_that_printed_several_lines_is_matched_when_no_single_line_match_exists():
    strings = {'f"No CUDA GPU here. {intro} Recorded on {gpu}"': 'f"여기에는 CUDA GPU가 없습니다. {intro} 기록: {gpu}"'}
    said = C.say_again("No CUDA GPU here. This cell prints\nwhat a run printed. Recorded on an H100\n", strings)
    assert said == "여기에는 CUDA GPU가 없습니다. This cell prints\nwhat a run printed. 기록: an H100\n"


def test_a_one_word_branch_of_a_said_choice_is_translatable_too():
    code = 'x = 1\nprint("ASHA and full, " + ("within" if x else "more than") + " 25% of each other here")\n'
    assert C.translatable(code) == ['"ASHA and full, "', '"within"', '"more than"', '" 25% of each other here"']


def test_a_fallback_after_or_is_said_and_a_short_literal_is_said_again_only_where_anchored():
    assert C.translatable('print(lines() or "no step had an efficiency above 1.00")\n') == \
        ['"no step had an efficiency above 1.00"']
    strings = {'"more than"': '"25% 넘게"', '" 25% of each other here"': '" 차이 납니다"', '"launcher:"': '"런처:"'}
    printed = ("full 6.4 s, more than 25% of each other here\n"
               "launcher: rank 1 failed\n"
               "(why it took 1.19 times as long, more than 5% off 1, is not separated)\n")   # a helper's sentence
    assert C.say_again(printed, strings) == ("full 6.4 s, 25% 넘게 차이 납니다\n" "런처: rank 1 failed\n"
                                             "(why it took 1.19 times as long, more than 5% off 1, is not separated)\n")


def test_a_join_element_is_said_and_labels_in_fields_are_said_again_in_place():
    cell = 'print("runs: " + "; ".join(f"{name} won {n} times" for name, n in wins))\n'
    assert C.translatable(cell) == ['"runs: "', 'f"{name} won {n} times"']   # the element; not the separator
    labels = {"from scratch": "처음부터 학습", "beats": "앞섬"}.get
    said_label = lambda text: labels(text, text)   # a helpers message's Korean (i18n/outputs.py gives it)
    strings = {'f"  {name(m)}: {acc:.3f} {said(v)} the baseline"': 'f"  {name(m)}: {acc:.3f}, {said(v)}(기준 대비)"',
               'f"{name(m):<14} accuracy {acc:.3f}"': 'f"{name(m):<14} 정확도 {acc:.3f}"',
               'f"scope={scope}: best {acc:.3f}"': 'f"scope={scope}: 최고 {acc:.3f}"'}
    printed = ("  from scratch: 0.933 beats the baseline\n"   # inner fields: said again
               "from scratch   accuracy 0.933\n"              # a field starting the line, padded to 14 columns: kept
               "from scratchy  accuracy 0.5\n"                # no message: left as printed
               "scope=last: best 0.9\n")                      # no message: as printed
    assert C.say_again(printed, strings, said_label) == ("  처음부터 학습: 0.933, 앞섬(기준 대비)\n"
                                                         "처음부터 학습  정확도 0.933\n"   # a Korean letter: 2 columns
                                                         "from scratchy  정확도 0.5\n"
                                                         "scope=last: 최고 0.9\n")
    assert C.say_again(printed, strings) == C.say_again(printed, strings, lambda text: text)   # no labels: as printed


def test_a_literal_s_words_are_found_whole():
    strings = {'f"on {where}:"': 'f"측정 장치 {where}:"'}
    assert C.say_again("aten::convolution  12 ms: 3 calls", strings) == "aten::convolution  12 ms: 3 calls"
    assert C.say_again("timed on cpu:", strings) == "timed 측정 장치 cpu:"


def test_a_literal_is_replaced_only_where_a_print_says_it():
    cell = 'side = "faster"\nprint("it was " + ("faster" if side == "faster" else "slower"))\n'
    korean = C.translate_code(cell, {'"it was "': '"결과: "', '"faster"': '"더 빠름"', '"slower"': '"더 느림"'})
    assert korean == 'side = "faster"\nprint("결과: " + ("더 빠름" if side == "faster" else "더 느림"))\n'
