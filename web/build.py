"""Build the course's static site from the committed notebooks: ``python -m web`` (README, "The course on the web").

No notebook is executed again: the stored outputs are the course's measured run. The build is offline
(Sphinx with MyST-NB and the Book theme, MathJax from ``sphinx-mathjax-offline``, reveal.js from
``sphinx-revealjs``'s copy) and writes, under ``web/_site`` unless told otherwise:

* ``index.html`` and one page per notebook, in course order; ``ko/`` the same in Korean; every
  notebook page links to its twin in the other language, to Colab, to its ``.ipynb`` and to its slides;
* ``slides/NN_name.slides.html`` (and ``ko/slides/``): reveal.js decks cut where the notebook's
  cells say, a long slide's prose beyond its claim in its speaker notes (``web/slides.py``);
* Sphinx's search page for each language, and the README's results table on each front page.
"""
from __future__ import annotations

import copy
import html
import io
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from web.labels import LABELS
from web.slides import cell_text, course_notebooks, deck_cells

ROOT = Path(__file__).resolve().parent.parent
WEB = ROOT / "web"
DEFAULT_OUT = WEB / "_site"
NOTEBOOKS = ROOT / "notebooks"
LANGS = ("en", "ko")
PAGES_FILE = "_course_pages.json"   # read by web/conf.py: each page's header links
COLAB_BADGE = "https://colab.research.google.com/assets/colab-badge.svg"


def repository() -> str:
    """The course's GitHub address, from ``pyproject.toml`` (helpers/publish.py)."""
    from helpers.publish import repository as repo
    return repo().rstrip("/")


def notebooks(lang: str) -> list[Path]:
    """The notebooks of one language, in course order."""
    return course_notebooks(NOTEBOOKS if lang == "en" else NOTEBOOKS / lang)


def _repo_link(target: str, base: Path, lang: str, names: set[str]) -> str:
    """A relative link in a notebook or README, as the site needs it: a course notebook stays a page link,
    anything else in the repository becomes its GitHub address."""
    if re.match(r"^([a-z][a-z0-9+.-]*:|#|/)", target):
        return target
    path, _, anchor = target.partition("#")
    resolved = (base / path).resolve()
    if resolved.suffix == ".ipynb" and resolved.name in names and resolved.parent == (
            NOTEBOOKS if lang == "en" else NOTEBOOKS / lang):
        return resolved.name + (f"#{anchor}" if anchor else "")
    if lang != "en" and resolved.suffix == ".ipynb" and resolved.parent == NOTEBOOKS and resolved.exists():
        return f"../{resolved.stem}.html"   # the English original's page, one folder up
    try:
        rel = resolved.relative_to(ROOT).as_posix()
    except ValueError:
        return target
    kind = "tree" if resolved.is_dir() else "blob"
    return f"{repository()}/{kind}/main/{rel}" + (f"#{anchor}" if anchor else "")


def _links(text: str, base: Path, lang: str, names: set[str]) -> str:
    def link(m: re.Match) -> str:
        target = _repo_link(m.group(2), base, lang, names)
        if target.startswith("../"):   # a page of the other build: plain HTML (MyST would look for a source file)
            return f'<a href="{target}">{m.group(1)}</a>'
        return f"[{m.group(1)}]({target})"
    return re.sub(r"(?<!!)\[([^\]]+)\]\(([^)\s]+)\)", link, text)


def staged_notebook(path: Path, lang: str, names: set[str]) -> dict:
    """A notebook as the site shows it: links that leave the course point to GitHub, and the live
    TensorBoard frame (a server the static page does not have) is replaced by a sentence saying so."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        src = cell_text(cell)
        cell["source"] = _links(src, path.parent, lang, names) if cell["cell_type"] == "markdown" else src
        for i, out in enumerate(cell.get("outputs", [])):
            html = out.get("data", {}).get("text/html")
            if html and "tensorboard-frame" in "".join(html):
                cell["outputs"][i] = {"output_type": "display_data", "metadata": {},
                                      "data": {"text/html": _admonition(LABELS[lang]["tensorboard"], lang),
                                               "text/plain": LABELS[lang]["tensorboard"]}}
    nb["metadata"].pop("widgets", None)
    return nb


def _admonition(text: str, lang: str) -> str:
    return (f'<div class="admonition note"><p class="admonition-title">{LABELS[lang]["note"]}</p>'
            f"<p>{text}</p></div>")


def with_stored_run_note(nb: dict, lang: str) -> dict:
    """The notebook as its page shows it: a note under the title that the outputs are the stored run."""
    nb = copy.deepcopy(nb)
    note = {"cell_type": "markdown", "id": "site-stored-run", "metadata": {},
            "source": f"```{{note}}\n{LABELS[lang]['stored']}\n```"}
    nb["cells"].insert(1, note)
    return nb


def _section(text: str, heading: str, end: str | None = None) -> str:
    """From the ``## heading`` line to the next ``## `` heading (or to the line ``end``), of a README."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("## ") and line[3:].strip() == heading)
    out = [lines[start]]
    for line in lines[start + 1:]:
        if (end is None and line.startswith("## ")) or (end is not None and line.strip() == end):
            break
        out.append(line)
    return "\n".join(out).strip()


def front_page(lang: str, names: list[str]) -> str:
    """The front page (MyST markdown): the README's opening, its notebook table and its results table."""
    readme_path = ROOT / ("README.md" if lang == "en" else f"README.{lang}.md")
    readme = readme_path.read_text(encoding="utf-8")
    lines = readme.splitlines()
    title = lines[0]
    first_section = next(i for i, line in enumerate(lines) if line.startswith("## "))
    intro = [line for line in lines[1:first_section]   # the header's switch replaces the README's language line
             if not re.match(r"^(\*\*한국어판?\*\*:|\[English\]\(README\.md\))", line)]
    headings = {"en": ("Start", "The notebooks", "Results on reference hardware"),
                "ko": ("시작하기", "노트북", "기준 하드웨어에서의 결과")}[lang]
    start = _section(readme, headings[0])
    table = _section(readme, headings[1])
    results = _section(readme, headings[2], end="<!-- results:end -->")
    rows = []
    for line in table.splitlines():   # a column with each notebook's slides
        m = re.match(r"^\| (\d\d) \|", line)
        if m:
            name = next(n for n in names if n.startswith(m.group(1)))
            line += f' <a href="slides/{Path(name).stem}.slides.html">{LABELS[lang]["slides"]}</a> |'
        elif line.startswith("|---"):
            line += "---|"
        elif line.startswith("| #"):
            line += f" {LABELS[lang]['slides_column']} |"
        rows.append(line)
    note = f"```{{note}}\n{LABELS[lang]['front']}\n```"
    body = "\n".join([title, "", *intro, "", note, "", start, "", "\n".join(rows), "",
                      results.replace("<!-- results:start -->", "")])
    body = re.sub(rf"\[!\[([^\]]*)\]\({re.escape(COLAB_BADGE)}\)\]\(([^)]+)\)",   # the badge, from the site
                  r'<a href="\2"><img src="_static/colab-badge.svg" alt="\1" height="20"></a>', body)
    body = _links(body, ROOT, lang, set(names))
    toc = "\n".join(Path(n).stem for n in names)
    return f"{body}\n\n```{{toctree}}\n:hidden:\n:maxdepth: 1\n\n{toc}\n```\n"


def page_links(lang: str, names: list[str]) -> dict:
    """What each page's header links to: its twin in the other language, Colab, its .ipynb, its slides."""
    labels, repo = LABELS[lang], repository()
    twin_prefix = "ko/" if lang == "en" else "../"
    pages = {"index": {"twin": f"{twin_prefix}index.html", "twin_label": labels["twin"],
                       "twin_lang": labels["twin_lang"]}}
    folder = "notebooks" if lang == "en" else f"notebooks/{lang}"
    for name in names:
        stem = Path(name).stem
        pages[stem] = {**pages["index"], "twin": f"{twin_prefix}{stem}.html",
                       "colab": f"https://colab.research.google.com/github/{repo.split('github.com/')[-1]}"
                                f"/blob/main/{folder}/{name}",
                       "download": f"_notebooks/{name}", "download_name": name,
                       "download_title": labels["download_title"],
                       "slides": f"slides/{stem}.slides.html",
                       "labels": labels}
    pages["index"]["labels"] = labels
    for page in ("search", "genindex"):
        pages[page] = {**pages["index"], "twin": f"{twin_prefix}{page}.html"}
    return pages


def _sphinx(stage: Path, out: Path, doctrees: Path, lang: str) -> subprocess.Popen:
    """Start Sphinx on one language's staged notebooks, in a process of its own (the two run side by side)."""
    return subprocess.Popen(
        [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-E", "-c", str(WEB), "-D", f"language={lang}",
         "-d", str(doctrees), "-w", str(stage.parent / f"warnings-{lang}.txt"), str(stage), str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)


def slides(notebook: Path, nb: dict, out: Path, lang: str) -> Path:
    """One notebook (as staged for the site) as a reveal.js deck served from the site itself (``web/course_reveal``)."""
    import nbformat
    from nbconvert import SlidesExporter
    nb = copy.deepcopy(nb)
    for cell in nb["cells"]:   # links to pages: the deck is one folder further down than its page
        if cell["cell_type"] == "markdown":
            cell["source"] = re.sub(r"\]\((\d\d_[\w-]+)\.ipynb", r"](../\1.html", cell["source"])
            cell["source"] = cell["source"].replace('<a href="../', '<a href="../../')
    nb["cells"] = deck_cells(nb["cells"])   # long slides cut at their claim; prose notes by their slide
    title = nb["cells"][0]["source"].splitlines()[0].lstrip("# ").strip()
    nb["metadata"]["title"] = title
    labels, stem = LABELS[lang], notebook.stem
    exporter = SlidesExporter(template_name="course_reveal", extra_template_basedirs=[str(WEB)],
                              reveal_url_prefix="../_reveal" if lang == "en" else "../../_reveal",
                              reveal_theme="white", reveal_scroll=True, reveal_number="c/t",
                              reveal_width="1280", reveal_height="800", exclude_input_prompt=True,
                              exclude_output_prompt=True, language_code=lang)
    course = {"mathjax": "../_static/mathjax/tex-chtml.js", "page": f"../{stem}.html", "page_label": labels["page"],
              "twin": f"../ko/slides/{stem}.slides.html" if lang == "en" else f"../../slides/{stem}.slides.html",
              "twin_label": labels["twin"], "twin_lang": labels["twin_lang"], "code_label": labels["code"]}
    # nbformat.reads, not from_dict: it joins the multi-line fields (a stored output's list of lines)
    body, _ = exporter.from_notebook_node(nbformat.reads(json.dumps(nb), as_version=4), resources={"course": course})
    body = body.replace(f"<title>{html.escape(title, quote=False)} slides</title>",
                        f"<title>{html.escape(title, quote=False)} · {labels['slides']}</title>")
    target = out / f"{stem}.slides.html"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(body, encoding="utf-8")
    return target


def reveal_source() -> Path:
    """reveal.js as ``sphinx-revealjs`` ships it (its ``dist`` and ``plugin`` folders)."""
    import sphinx_revealjs
    return Path(sphinx_revealjs.__file__).resolve().parent / "_static" / "revealjs"


def build(out: Path = DEFAULT_OUT, verbose: bool = True) -> dict:
    """Build the site into ``out`` (replaced if it is a site built here before); return what was built.

    Refuses a folder that holds anything but a site this function built, so nothing else is deleted.
    """
    out = Path(out).resolve()
    marker = out / ".course-site"
    if out.exists() and any(out.iterdir()) and not marker.exists():
        raise FileExistsError(f"{out} holds files this build did not write; give an empty or new folder "
                              f"(python -m web --out DIR)")
    started = time.perf_counter()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    marker.write_text("built by python -m web; the next build replaces this folder\n")
    report = {"out": str(out), "pages": [], "slides": [], "warnings": {}}
    with tempfile.TemporaryDirectory(prefix="course-site-") as tmp:
        builds, staged = {}, {}
        for lang in LANGS:
            paths = notebooks(lang)
            names = [p.name for p in paths]
            stage, site = Path(tmp) / lang, out if lang == "en" else out / lang
            stage.mkdir()
            staged[lang] = {p.name: staged_notebook(p, lang, set(names)) for p in paths}
            for name, nb in staged[lang].items():
                (stage / name).write_text(json.dumps(with_stored_run_note(nb, lang), ensure_ascii=False),
                                          encoding="utf-8")
            (stage / "index.md").write_text(front_page(lang, names), encoding="utf-8")
            (stage / PAGES_FILE).write_text(json.dumps(page_links(lang, names), ensure_ascii=False),
                                            encoding="utf-8")
            if verbose:
                print(f"[{lang}] Sphinx: {len(names)} notebooks and the front page …", flush=True)
            # Sphinx writes into the temporary folder (MyST-NB puts its copies of the notebooks in the html folder's
            # parent, jupyter_execute/): only the html folder is moved into the site
            html_dir = Path(tmp) / f"build-{lang}" / "html"
            builds[lang] = (_sphinx(stage, html_dir, Path(tmp) / f"doctrees-{lang}", lang), paths, site, html_dir)
        for lang, (process, paths, site, _) in builds.items():
            (site / "slides").mkdir(parents=True, exist_ok=True)
            for p in paths:   # while Sphinx runs
                deck = slides(p, staged[lang][p.name], site / "slides", lang)
                report["slides"].append(str(deck.relative_to(out)))
        for lang, (process, paths, site, html_dir) in builds.items():
            said, _ = process.communicate(timeout=600)
            warnings = (Path(tmp) / f"warnings-{lang}.txt")
            report["warnings"][lang] = warnings.read_text() if warnings.exists() else ""
            if process.returncode:
                raise RuntimeError(f"Sphinx failed on the {lang} pages (exit {process.returncode}):\n{said}")
            shutil.copytree(html_dir, site, dirs_exist_ok=True)
            (site / "_notebooks").mkdir()
            for p in paths:
                shutil.copy2(p, site / "_notebooks" / p.name)
            report["pages"] += [str((site / f"{Path(n).stem}.html").relative_to(out))
                                for n in ["index", *[p.name for p in paths]]]
    source = reveal_source()
    for part in ("dist", "plugin/notes"):
        shutil.copytree(source / part, out / "_reveal" / part, ignore=shutil.ignore_patterns("*.map", "*.esm.js"))
    report["seconds"] = round(time.perf_counter() - started, 1)
    if verbose:
        for lang, text in report["warnings"].items():
            if text.strip():
                print(f"[{lang}] Sphinx warnings:\n{text}")
        print(f"built {len(report['pages'])} pages and {len(report['slides'])} slide decks in "
              f"{report['seconds']} s: open {out / 'index.html'}")
    return report
