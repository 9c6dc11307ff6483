"""The slides (#27): which cell starts a slide (web/slides.py's rule, carried by every notebook and its Korean
twin), and how a deck on the site cuts a long slide into its claim and its speaker notes."""
import json

from web import build as site
from web.slides import (CLAIM, KEEP_WHOLE, claim_and_notes, deck_cells, marked, mid_cell_headings, slide_type,
                        width)


def test_the_slide_rule():
    def cell(kind, text, **more):
        return {"cell_type": kind, "source": text, "metadata": {}, **more}
    plot = {"output_type": "display_data", "data": {"image/png": "", "text/plain": ""}}
    cells = [cell("markdown", "# Title"), cell("markdown", "**Learning goals**", id="goals"),
             cell("code", "# Setup (the same in every notebook): …", outputs=[]),
             cell("markdown", "## 1. A claim"), cell("code", "x = 1", outputs=[]),
             cell("code", "plot(x)", outputs=[plot]), cell("code", "if x:\n    assert x == 1", outputs=[]),
             cell("markdown", "More words."), cell("markdown", "### A part"), cell("code", "print('assertion')"),
             cell("code", "check('00.x', my_x)\nassert True"), cell("markdown", "With DTensor it is a plan:"),
             cell("code", "plan = {...}", outputs=[]),
             cell("code", "shutil.rmtree(work)\nassert not left", metadata={"tags": ["slides-skip"]}),
             cell("markdown", "## Exercises"), cell("code", "assert my_answer", outputs=[plot])]
    assert [slide_type(cells, i) for i in range(len(cells))] == [
        "slide", "slide", "skip", "slide", "skip", "subslide", "subslide", "notes", "subslide", "skip",
        "skip", "notes", "subslide", "skip", "slide", "skip"]


def _words(text: str) -> list[str]:
    return text.split()


def test_a_long_slide_keeps_its_claim_and_the_rest_goes_to_the_notes():
    claim = "## 2. A section\n\n" + ("The claim comes first: pipelining overlaps the stages, and the gain is "
                                     "measured below on your machine. ") * 3
    rest = ("More words follow here, as in Narayanan et al. 2021, with `code. Not a sentence end` and a "
            "[link. Still inside](https://example.org/a.b) that no cut may split. " * 8)
    text = claim + "\n\n" + rest
    slide, notes = claim_and_notes(text)
    assert slide == claim.strip(), "the first paragraph is the claim"
    assert notes and _words(slide) + _words(notes) == _words(text)   # nothing lost, nothing added
    for piece in (slide, notes):   # cut between sentences only: code, links and "et al." stay whole
        assert piece.count("`") % 2 == 0 and piece.count("[") == piece.count("]")
        assert not piece.rstrip().endswith("et al.")
    assert claim_and_notes("## Short\n\nA short section stays whole.") == ("## Short\n\nA short section stays whole.", "")
    recap = "## Recap\n" + "- a point that the recap makes, in a sentence. More of it.\n" * 30
    assert claim_and_notes(recap) == (recap, "")   # a list is the slide
    exercises = "## Exercises\n" + "Each exercise ends with a check. " * 10 + "\n\n" + "1. A question? Answer it.\n" * 40
    assert claim_and_notes(exercises) == (exercises, "")   # the exercises are not hidden in the notes
    table = "## 1. Bytes\n\n" + "Training keeps, for each parameter, these bytes. " * 7 + \
        "The table below lists each of them, for the three ways of counting:\n\n" + \
        "| a | b |\n|---|---|\n| 1 | 2 |\n\n" + "Sources and more words for the notes, in sentences. " * 9
    slide, notes = claim_and_notes(table)
    assert slide.rstrip().endswith("| 1 | 2 |") and notes.startswith("Sources")   # a colon keeps what it opens
    korean = "## 1. 절\n\n" + "파이프라이닝은 스테이지를 겹치게 하며, 그 이득을 아래에서 잽니다. " * 30
    slide, notes = claim_and_notes(korean)
    assert notes and slide.endswith("잽니다.") and _words(slide) + _words(notes) == _words(korean)
    assert abs(width(slide) - CLAIM) < 70 and len(slide) < 0.7 * CLAIM, \
        "Hangul reads two columns wide: a Korean slide is not denser"
    first = "## 3. Threads\n\n**The point: more threads are measured, not assumed**, on this machine. " * 2
    slide, notes = claim_and_notes(first + "\n\n" + "Details for the speaker, a sentence at a time. " * 30)
    assert slide == first.strip() and notes.startswith("Details"), "a first paragraph of its own is the claim"
    listed = "## 2. Four steps\n\n" + "".join(f"{i}. step {i}, in a sentence.\n" for i in range(1, 5))
    slide, notes = claim_and_notes(listed + "\n" + "What the steps cost, measured below. " * 30)
    assert slide == listed.strip() and notes.startswith("What"), "an opening list stays; what follows, the notes"
    mid = "## 5. Ways\n\n" + "A sentence that sets the scene for the ways. " * 8 + "The ways are:\n- one way;\n" + \
        "- another way.\n\n" + "Notes text, in sentences. " * 20
    slide, notes = claim_and_notes(mid)
    assert slide.endswith("- another way.") and notes.startswith("Notes"), "a list opened in mid-paragraph stays"
    long_list = "## 4. Four ways\n\n" + "The same work, done four ways, each in words. " * 2 + "They are:\n\n" + \
        "".join(f"- **way {i}**: " + "a long description of this way. " * 8 + "\n" for i in range(4))
    slide, notes = claim_and_notes(long_list + "\n" + "More for the notes, in sentences. " * 10)
    assert not slide.rstrip().endswith(":") and width(slide) <= KEEP_WHOLE, "a colon's block too long: cut before"


def test_a_deck_puts_the_prose_before_a_plot_in_that_plots_notes():
    def cell(kind, source, slide_type):
        return {"cell_type": kind, "id": source[:12], "source": source,
                "metadata": {"slideshow": {"slide_type": slide_type}}}
    long_section = "## 1. A section\n\n" + "A claim in a sentence of words. " * 40
    cells = [cell("markdown", long_section, "slide"), cell("markdown", "How the plot is made.", "notes"),
             cell("code", "x = 1", "skip"), cell("code", "plot(x)", "subslide"),
             cell("markdown", "What to read in it.", "notes"), cell("markdown", "### A part", "subslide"),
             cell("markdown", "A part's words.", "notes"), cell("markdown", "## 2. Next", "slide")]
    deck = deck_cells(cells)
    assert [(c["source"][:12], c["metadata"]["slideshow"]["slide_type"]) for c in deck] == [
        (long_section[:12], "slide"), ("A claim in a", "notes"), ("x = 1", "skip"), ("plot(x)", "subslide"),
        ("How the plot", "notes"), ("What to read", "notes"), ("### A part", "subslide"),
        ("A part's wor", "notes"), ("## 2. Next", "slide")]
    assert cells[0]["source"] == long_section, "the notebook's own cells stay as they are"


def test_every_long_slide_of_every_notebook_splits_cleanly():
    for nb in site.notebooks("en") + site.notebooks("ko"):
        for cell in json.loads(nb.read_text(encoding="utf-8"))["cells"]:
            if cell["metadata"].get("slideshow", {}).get("slide_type") not in ("slide", "subslide") \
                    or cell["cell_type"] != "markdown":
                continue
            text = "".join(cell["source"])
            slide, notes = claim_and_notes(text)
            assert _words(slide) + _words(notes) == _words(text), (nb.name, cell["id"])
            assert slide.count("```") % 2 == 0 and slide.replace("```", "").count("`") % 2 == 0, (nb.name, cell["id"])
            if notes:   # cut where every link and bracket the slide opened is closed
                assert slide.count("[") == slide.count("]") and slide.count("(") == slide.count(")"), \
                    (nb.name, cell["id"])


def test_every_notebook_carries_the_slide_rule_and_the_korean_ones_the_same():
    for nb in site.notebooks("en"):
        english = json.loads(nb.read_text(encoding="utf-8"))
        wrong = [(cid, have, want) for cid, have, want in marked(english) if have != want]
        assert not wrong, f"{nb.name}: run python -m web.slides, then python -m i18n.build: {wrong[:3]}"
        assert not mid_cell_headings(english), f"{nb.name}: a section's heading opens a cell of its own"
        korean = json.loads((nb.parent / "ko" / nb.name).read_text(encoding="utf-8"))
        assert [c["metadata"].get("slideshow") for c in korean["cells"]] == \
            [c["metadata"]["slideshow"] for c in english["cells"]], nb.name
