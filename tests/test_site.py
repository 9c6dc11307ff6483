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
from web.slides import LONG_CODE, claim_and_notes

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
            folded = sum(c["metadata"]["slideshow"]["slide_type"] == "subslide" and c["cell_type"] == "code" and (
                any("image/png" in o.get("data", {}) for o in c.get("outputs", []))
                or "".join(c["source"]).count("\n") >= LONG_CODE) for c in staged)
            assert deck.count('<details class="deck-code">') == folded, f"{nb.name}: a plot's code, long code, folded"
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
