"""The course on the web (#27): the site and the slides build offline from the committed notebooks, and in
headless Chromium every page loads with no console error and no broken link or image, Korean renders in a
Korean font, the language switch and search work, and a slide deck advances."""
import json
import re
from pathlib import Path
from urllib.parse import urljoin, urlparse

import pytest

from browser import Problems, browser, needs_browser, screenshot, serve
from web import build as site
from web.slides import CLAIM, LONGEST, claim_and_notes, deck_cells, marked, mid_cell_headings, slide_type

ROOT = Path(__file__).resolve().parent.parent
HANGUL = re.compile(r"[\uac00-\ud7a3]")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("web") / "site"
    return out, site.build(out, verbose=False)


def _images(notebook: Path) -> int:
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    return sum("image/png" in o.get("data", {}) for c in cells for o in c.get("outputs", []))


def test_the_site_builds_every_notebook_in_both_languages_without_a_warning(built):
    out, report = built
    assert report["warnings"] == {"en": "", "ko": ""}
    for lang, prefix in (("en", out), ("ko", out / "ko")):
        notebooks = site.notebooks(lang)
        assert len(notebooks) == len(site.notebooks("en")) >= 11
        for nb in notebooks:
            page = (prefix / f"{nb.stem}.html").read_text(encoding="utf-8")
            # the stored run, not a new one: every figure the notebook holds is on its page
            assert page.count('src="_images/') == _images(nb), nb.name
            assert (prefix / "_notebooks" / nb.name).read_bytes() == nb.read_bytes()
            deck = (prefix / "slides" / f"{nb.stem}.slides.html").read_text(encoding="utf-8")
            assert deck.count('<section') >= 3, nb.name
            assert f'<html lang="{lang}"' in deck and "\\n', '" not in deck, nb.name   # outputs as text, not lists
            assert f'href="../{nb.stem}.html"' in deck, "a deck links back to its page"
            staged = json.loads(nb.read_text(encoding="utf-8"))["cells"]
            split = sum(bool(claim_and_notes("".join(c["source"]))[1]) for c in staged if c["cell_type"] == "markdown"
                        and c["metadata"]["slideshow"]["slide_type"] in ("slide", "subslide"))
            assert deck.count('<aside class="notes">') >= split, f"{nb.name}: a long slide's rest, in its notes"
    front = (out / "index.html").read_text(encoding="utf-8")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (\d\d_\w+) \| (\d+ s) \|", readme, re.M)
    assert len(rows) >= 11, "the README's results table"
    for name, seconds in rows:   # the results table, on the front page
        assert re.search(rf"<td><p>{name}</p></td>\s*<td><p>{seconds}</p></td>", front), name
    for prefix in (out, out / "ko"):   # the notebook table links to the pages, not to files on GitHub
        page = (prefix / "index.html").read_text(encoding="utf-8")
        assert not re.search(r"https://github\.com/[^\"]+/blob/main/(notebooks/)?(ko/)?\d\d_\w+\.ipynb\"", page)
        assert all(f'href="{nb.stem}.html"' in page for nb in site.notebooks("en"))
    for prefix, lang in ((out, "en"), (out / "ko", "ko")):   # 05's live board: a note where the frame was
        page = (prefix / "05_monitoring.html").read_text(encoding="utf-8")
        assert "tensorboard-frame" not in page and site.LABELS[lang]["tensorboard"] in page


def test_the_build_writes_only_into_its_folder(built):
    out, _ = built
    assert sorted(p.name for p in out.parent.iterdir()) == [out.name]
    assert not list(out.rglob("jupyter_execute")), "MyST-NB's copies of the notebooks are not part of the site"


def test_no_page_loads_anything_from_the_network(built):
    out, _ = built
    external = re.compile(r"<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)=[\"'](?:https?:)?//", re.I)
    for page in out.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        assert not external.search(text), f"{page.relative_to(out)} loads {external.search(text).group(0)}"


def test_the_build_refuses_a_folder_it_did_not_make(tmp_path):
    mine = tmp_path / "notes.txt"
    mine.write_text("mine")
    with pytest.raises(FileExistsError, match="python -m web --out"):
        site.build(tmp_path, verbose=False)
    assert mine.read_text() == "mine"


def test_links_that_leave_the_course_point_to_its_repository():
    repo, names = site.repository(), {"03_ddp.ipynb"}
    nb = ROOT / "notebooks"
    assert site._repo_link("03_ddp.ipynb", nb, "en", names) == "03_ddp.ipynb"
    assert site._repo_link("03_ddp.ipynb#recap", nb, "en", names) == "03_ddp.ipynb#recap"
    assert site._repo_link("../helpers/core/bars.py", nb, "en", names) == f"{repo}/blob/main/helpers/core/bars.py"
    assert site._repo_link("../../helpers/core/bars.py", nb / "ko", "ko", names) == \
        f"{repo}/blob/main/helpers/core/bars.py"
    assert site._repo_link("../tests", nb, "en", names) == f"{repo}/tree/main/tests"
    assert site._repo_link("https://pytorch.org/docs", nb, "en", names) == "https://pytorch.org/docs"


def test_the_slide_rule():
    def cell(kind, text, **more):
        return {"cell_type": kind, "source": text, "metadata": {}, **more}
    plot = {"output_type": "display_data", "data": {"image/png": "", "text/plain": ""}}
    cells = [cell("markdown", "# Title"), cell("markdown", "**Learning goals**", id="goals"),
             cell("code", "# Setup (the same in every notebook): …", outputs=[]),
             cell("markdown", "## 1. A claim"), cell("code", "x = 1", outputs=[]),
             cell("code", "plot(x)", outputs=[plot]), cell("code", "if x:\n    assert x == 1", outputs=[]),
             cell("markdown", "More words."), cell("markdown", "### A part"), cell("code", "print('assertion')"),
             cell("code", "check('00.x', my_x)\nassert True"), cell("markdown", "## Exercises"),
             cell("code", "assert my_answer", outputs=[plot])]
    assert [slide_type(cells, i) for i in range(len(cells))] == [
        "slide", "slide", "skip", "slide", "skip", "subslide", "subslide", "notes", "subslide", "skip",
        "skip", "slide", "skip"]


def _words(text: str) -> list[str]:
    return text.split()


def test_a_long_slide_keeps_its_claim_and_the_rest_goes_to_the_notes():
    claim = ("## 2. A section\n\nThe claim comes first: pipelining overlaps the stages, and the gain is measured "
             "below on your machine. " * 3)
    rest = ("More words follow here, as in Narayanan et al. 2021, with `code. Not a sentence end` and a "
            "[link. Still inside](https://example.org/a.b) that no cut may split. " * 8)
    text = claim + "\n\n" + rest
    slide, notes = claim_and_notes(text)
    assert slide.startswith("## 2. A section\n\nThe claim comes first") and CLAIM <= len(slide) <= LONGEST
    assert notes and _words(slide) + _words(notes) == _words(text)   # nothing lost, nothing added
    for piece in (slide, notes):   # cut between sentences only: code, links and "et al." stay whole
        assert piece.count("`") % 2 == 0 and piece.count("[") == piece.count("]")
        assert not piece.rstrip().endswith("et al.")
    assert claim_and_notes("## Short\n\nA short section stays whole.") == ("## Short\n\nA short section stays whole.", "")
    recap = "## Recap\n" + "- a point that the recap makes, in a sentence. More of it.\n" * 30
    assert claim_and_notes(recap) == (recap, "")   # a list is the slide
    exercises = "## Exercises\nEach exercise ends with a check. " * 10 + "\n\n" + "1. A question? Answer it.\n" * 40
    assert claim_and_notes(exercises) == (exercises, "")   # the exercises are not hidden in the notes
    table = "## 1. Bytes\n\n" + "Training keeps, for each parameter, these bytes. " * 8 + \
        "The table below lists each of them, for the three ways of counting:\n\n" + \
        "| a | b |\n|---|---|\n| 1 | 2 |\n\n" + "Sources and more words for the notes, in sentences. " * 9
    slide, notes = claim_and_notes(table)
    assert slide.rstrip().endswith("| 1 | 2 |") and notes.startswith("Sources")   # a colon keeps what it opens
    korean = "## 1. 절\n\n" + "파이프라이닝은 스테이지를 겹치게 하며, 그 이득을 아래에서 잽니다. " * 30
    slide, notes = claim_and_notes(korean)
    assert notes and slide.endswith("잽니다.") and _words(slide) + _words(notes) == _words(korean)


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


# --- in a real browser -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def served(built):
    out, _ = built
    with serve(out) as base, browser() as b:
        page = b.new_page(viewport={"width": 1280, "height": 860})
        yield out, base, page, Problems(page)
        page.close()


def _broken(page, base: str, out: Path) -> list[str]:
    """Images that did not load and same-site links whose file is not in the site."""
    bad = page.eval_on_selector_all("img", "imgs => imgs.filter(i => !(i.complete && i.naturalWidth > 0))"
                                           ".map(i => 'image ' + i.src)")
    for href in page.eval_on_selector_all("a[href]", "links => links.map(a => a.href)"):
        url = urlparse(urljoin(page.url, href))
        if url.scheme == "http" and href.startswith(base):
            path = out / url.path.lstrip("/")
            if not (path.is_file() or (path / "index.html").is_file()):
                bad.append(f"link {href}")
        elif url.scheme not in ("https", "mailto", "javascript") and not href.startswith(base):
            bad.append(f"link {href}")
    return bad


@needs_browser()
def test_every_page_loads_with_no_error_and_no_broken_link_or_image(served):
    out, base, page, problems = served
    pages = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.html")   # not the libraries' own files
                   if not {"_static", "_reveal"} & set(p.parts))
    assert len(pages) >= 2 * (11 + 11 + 3)
    failures = {}
    for rel in pages:
        page.goto(f"{base}/{rel}", wait_until="load")
        page.wait_for_function("Array.from(document.images).every(i => i.complete)")
        found = problems.take() + _broken(page, base, out)
        if found:
            failures[rel] = found
        if rel in ("index.html", "ko/index.html", "03_ddp.html", "ko/03_ddp.html"):
            screenshot(page, "site-" + rel.replace("/", "-").removesuffix(".html"))
    assert not failures, json.dumps(failures, indent=1, ensure_ascii=False)[:3000]


@needs_browser()
def test_korean_text_renders_in_a_korean_font(served):
    out, base, page, problems = served
    page.goto(f"{base}/ko/03_ddp.html")
    heading = page.inner_text("article p")   # the notebook's first paragraph
    assert HANGUL.search(heading), heading
    cdp = page.context.new_cdp_session(page)
    cdp.send("DOM.enable")
    cdp.send("CSS.enable")
    root = cdp.send("DOM.getDocument", {"depth": -1})["root"]["nodeId"]
    node = cdp.send("DOM.querySelector", {"nodeId": root, "selector": "article p"})["nodeId"]
    fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
    korean = [f for f in fonts if re.search(r"CJK|KR|Korean|Gothic|Hangul", f["familyName"]) and f["glyphCount"]]
    screenshot(page, "site-korean-font", clip={"x": 0, "y": 0, "width": 1280, "height": 300})
    assert korean, f"the Korean paragraph was drawn with {fonts}: install fonts-noto-cjk"
    hangul = len(HANGUL.findall(heading))
    assert sum(f["glyphCount"] for f in korean) >= hangul, (fonts, hangul)
    assert not problems.take()


@needs_browser()
def test_the_language_switch_goes_to_the_twin_and_back(served):
    out, base, page, problems = served
    page.goto(f"{base}/05_monitoring.html")
    assert page.get_attribute("html", "lang") == "en"
    page.click("a.course-twin")
    page.wait_for_url(f"{base}/ko/05_monitoring.html")
    assert page.get_attribute("html", "lang") == "ko"
    assert HANGUL.search(page.inner_text("h1"))
    screenshot(page, "site-language-switch-ko")
    page.click("a.course-twin")
    page.wait_for_url(f"{base}/05_monitoring.html")
    assert page.get_attribute("html", "lang") == "en" and not HANGUL.search(page.inner_text("h1"))
    for link, want in (("a.course-colab", r"^https://colab\.research\.google\.com/github/.+/notebooks/05_monitoring"),
                       ("a.course-download", r"_notebooks/05_monitoring\.ipynb$"),
                       ("a.course-slides", r"slides/05_monitoring\.slides\.html$")):
        assert re.search(want, page.eval_on_selector(link, "a => a.href")), link
    assert not problems.take()


@needs_browser()
@pytest.mark.parametrize("lang, query, expect", [("en", "bubble", "01_model_parallel.html"),
                                                 ("ko", "파이프라이닝", "01_model_parallel.html")])
def test_search_finds_a_notebook(served, lang, query, expect):
    out, base, page, problems = served
    prefix = "" if lang == "en" else "ko/"
    page.goto(f"{base}/{prefix}search.html?q={query}")
    page.wait_for_selector(f"#search-results a[href*='{expect}']", timeout=20_000)
    screenshot(page, f"site-search-{lang}")
    assert not problems.take()


@needs_browser()
def test_a_slide_deck_advances(served):
    out, base, page, problems = served
    page.goto(f"{base}/slides/01_model_parallel.slides.html")
    page.wait_for_function("window.Reveal && Reveal.isReady()")
    assert page.evaluate("Reveal.getIndices().h") == 0
    assert "01 · Model parallelism" in page.text_content("section.present")
    page.keyboard.press("ArrowRight")
    page.wait_for_function("Reveal.getIndices().h === 1")
    assert "Learning goals" in page.text_content("section.present")
    assert page.evaluate("Reveal.getTotalSlides()") >= 10
    screenshot(page, "slides-01-goals")
    assert not problems.take()
