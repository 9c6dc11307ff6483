"""The Korean notebooks' stored outputs (i18n/outputs.py): each line ``helpers`` printed through its message
catalogue is said again in Korean, with the values it printed; nothing else is touched."""
import string
import sys

import pytest

from conftest import ROOT
from helpers.core import checks
from helpers.core.answers import columns, wrap

sys.path.insert(0, str(ROOT))  # i18n/ (the generator) is a folder of the course, not an installed package
from i18n import messages, outputs  # noqa: E402


def _printed(template: str) -> tuple[dict, str]:
    """Values for ``template``'s fields (numbers where a format spec needs one) and the text it prints with them."""
    if outputs._pieces(template) == [(template, None)]:   # braces that are no fields: tr() prints it as it is
        return {}, template
    values = {}
    for i, (_, name, spec, _) in enumerate(string.Formatter().parse(template)):
        if name is not None and name not in values:
            values[name] = f"{i}0{i}" if not spec else 1234.5678   # numbers: what a short template is trusted with
    return values, template.format(**values)


def _said_messages():
    korean = messages.load_catalogue("ko")["messages"]
    for key, english in messages.english_messages().items():
        literal = sum(len(text) for text, _, _, _ in string.Formatter().parse(english))
        if literal >= outputs.MIN_LITERAL:
            yield key, english, korean[key]["ko"]


@pytest.mark.parametrize("key, english, korean", [pytest.param(*m, id=m[0]) for m in _said_messages()])
def test_every_catalogue_message_printed_in_english_is_said_again_in_korean_with_its_values(key, english, korean):
    values, printed = _printed(english)
    assert outputs.say_again(printed) == (korean.format(**values) if values else korean), key


def test_a_self_check_result_with_its_why_and_a_wrapped_hint_come_back_in_korean(language):
    ex_id = "00.batches_of_100"
    english = checks.verify(ex_id, None)[1]
    language("ko")
    korean = checks.verify(ex_id, None)[1]
    language("en")
    cell = {"cell_type": "code", "outputs": [{"output_type": "stream", "name": "stdout",
                                              "text": "before\n" + wrap(english) + "\nafter 3.5 s\n"}]}
    said = outputs.localize_outputs(cell)["outputs"][0]["text"]
    assert said == "before\n" + wrap(korean) + "\nafter 3.5 s\n"
    assert cell["outputs"][0]["text"].startswith("before\n⏳ 00.batches_of_100: not answered yet")   # a copy changed


def test_lines_that_are_no_message_of_helpers_stay_as_printed():
    for line in ("epoch 3: loss 0.1234", "   an indented table row", "rank 0 hit a bug on purpose", "",
                 "  RANK=0 GROUP_RANK=0 LOCAL_RANK=0 → cpu"):   # the last: helpers/ddp/script.py's print
        assert outputs.say_again(line) == line


def test_a_short_message_inside_a_longer_one_is_said_again_too():
    english, korean = messages.english_messages(), messages.load_catalogue("ko")["messages"]
    part = english["lesson.my_indices.part_dealing"]   # "dealing": too short to match a line alone
    values = {"n": 17, "k": 5, "rank": 2, "drop_last": False, "got": [2, 7], "what": part}
    line = english["lesson.my_indices.differs"].format(**values)
    said = korean["lesson.my_indices.differs"]["ko"].format(**{**values, "what": korean[
        "lesson.my_indices.part_dealing"]["ko"]})
    assert outputs.say_again(line) == said and outputs.say_again(part) == part


def test_tables_exception_names_and_cell_fields_are_said_with_care():
    from i18n.outputs import localize_outputs, say_again

    english = messages.english_messages()["tuning.no_choice"]
    korean = messages.load_catalogue("ko")["messages"]["tuning.no_choice"]["ko"]
    line = english.format(name="hidden")
    assert say_again("ValueError: " + line) == "ValueError: " + korean.format(name="hidden")   # print("ValueError:", e)
    # a field of a cell's literal (any text) is said only by a template with text of its own, not "{a} and {b}"
    assert say_again("forward and backward", field=True, strict=True) == "forward and backward"
    assert say_again("last", field=True, strict=True) == "last"   # scope="last": an API value, not the label "last"
    cell = {"cell_type": "code", "outputs": [{"output_type": "stream", "name": "stdout",
                                               "text": "header\n   row one\n" + line + "\n"}]}
    out = localize_outputs(cell)["outputs"][0]["text"]   # "   row one" is a table row, not a wrapped message
    assert out == "header\n   row one\n" + korean.format(name="hidden") + "\n"


def test_a_field_listing_messages_is_said_part_by_part_not_read_across_its_semicolons():
    english, korean = messages.english_messages(), messages.load_catalogue("ko")["messages"]
    one = english["collectives.fell_spread"].format(name="ring", t0="0.99", s0="16 KiB", t1="0.82", s1="64 KiB", x="6.0")
    two = english["collectives.fell"].format(name="all_reduce", t0="0.63", s0="16 KiB", t1="0.53", s1="64 KiB")
    said = outputs.say_again(f"{one}; {one.replace('ring', 'all_reduce')}; {two}", field=True)
    assert said.split("; ")[1:] == [korean["collectives.fell_spread"]["ko"].format(   # not one fall read over three
        name="all_reduce", t0="0.99", s0="16 KiB", t1="0.82", s1="64 KiB", x="6.0"),
        korean["collectives.fell"]["ko"].format(name="all_reduce", t0="0.63", s0="16 KiB", t1="0.53", s1="64 KiB")]


def test_a_counted_message_in_a_table_cell_is_said_again_and_keeps_its_column():
    english, korean = messages.english_messages(), messages.load_catalogue("ko")["messages"]
    cell = english["tuning.startup_optuna"].format(n=3)
    row = f"   optuna {cell:>22} {0.974:>12.3f}"
    said = outputs.say_inside(row)
    assert korean["tuning.startup_optuna"]["ko"].format(n=3) in said
    assert columns(said[:said.index(" 0.974")]) == row.index(" 0.974")   # a Korean letter takes two columns
    assert outputs.say_inside("x3 trials finished") == "x3 trials finished"   # not a number: part of a word


def test_a_message_starting_with_a_field_does_not_swallow_the_cells_words_before_it():
    english, korean = messages.english_messages(), messages.load_catalogue("ko")["messages"]
    verdict = english["01.than_naive"].format(verdict=english["01.slower"], why=english["01.rounds_apart"])
    en = 'f"batch 256, m = 8: {x:.2f}×, {verdict}; efficiency "'
    ko = 'f"배치 256, m = 8: {x:.2f}×, {verdict}; 효율 "'
    cell = {"cell_type": "code", "outputs": [{"output_type": "stream", "name": "stdout",
                                               "text": f"batch 256, m = 8: 0.62×, {verdict}; efficiency 35% (cpu)\n"}]}
    out = outputs.localize_outputs(cell, "ko", {en: ko})["outputs"][0]["text"]
    said = korean["01.than_naive"]["ko"].format(verdict=korean["01.slower"]["ko"], why=korean["01.rounds_apart"]["ko"])
    assert out == f"배치 256, m = 8: 0.62×, {said}; 효율 35% (cpu)\n"   # not "단순 분할보다 batch 256, …"


def test_a_wrapped_message_is_not_mixed_line_by_line_with_the_cells_reading():
    import string

    from helpers.core.answers import wrap

    english = messages.english_messages()["launch.not_importable"]
    text = wrap(english.format(**{n: "worker" for _, n, _, _ in string.Formatter().parse(english) if n}))
    cell = {"cell_type": "code", "outputs": [{"output_type": "stream", "name": "stdout", "text": text + "\n"}]}
    out = outputs.localize_outputs(cell)["outputs"][0]["text"]
    assert out == outputs._localized(text + "\n", "ko", None, whole_lines=True)   # the message said whole, rewrapped
    assert "\n" in text.strip() and out != text + "\n"
