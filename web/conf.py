"""Sphinx configuration of the course's site (``python -m web`` builds it; see web/build.py).

One configuration for both languages: web/build.py runs Sphinx once for English and once for Korean,
each over a staged copy of the committed notebooks (never executed again: the stored outputs are the
course's measured run), with ``-D language=…``.
Everything the pages load comes from the site itself: the theme's files, MathJax
(``sphinx-mathjax-offline``) and reveal.js for the slides.
"""
import json
from pathlib import Path

project = "Beyond One GPU"
author = "the Beyond One GPU authors"
copyright = "the Beyond One GPU authors"
language = "en"

extensions = ["myst_nb", "sphinx-mathjax-offline"]
root_doc = "index"
exclude_patterns = ["_build", "**.ipynb_checkpoints"]
templates_path = ["_templates"]
html_static_path = ["_static"]
html_css_files = ["course.css"]

# The notebooks' stored outputs are the course's run: show them, never execute.
nb_execution_mode = "off"
# The widget state a notebook keeps would load the widget manager from a CDN; the course's bars
# leave their final text line in the output (helpers/core/bars.py), which is what the site shows.
nb_ipywidgets_js = {}
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3

html_theme = "sphinx_book_theme"
html_title = "Beyond One GPU"
html_favicon = "_static/favicon.svg"
html_context = {"default_mode": "light"}   # the theme's colour mode until the reader picks one
html_show_sourcelink = False
html_copy_source = False
from helpers.publish import repository  # noqa: E402  (the course's address, from pyproject.toml)

html_theme_options = {
    "repository_url": repository(),
    "use_repository_button": True,
    "footer_content_items": ["copyright.html", "last-updated.html", "extra-footer.html"],
    "article_header_end": ["course-links.html", "article-header-buttons.html"],
    "use_download_button": False,
    "use_fullscreen_button": False,
    "home_page_in_toc": True,
    "show_navbar_depth": 1,
    "show_toc_level": 2,
}


def _page_links(app, pagename, templatename, context, doctree):
    """Each page's header links (the other language's page, Colab, the .ipynb, the slides), which
    web/build.py writes beside the staged notebooks."""
    pages = Path(app.srcdir) / "_course_pages.json"
    links = json.loads(pages.read_text(encoding="utf-8")) if pages.exists() else {}
    context["course_page"] = links.get(pagename)


def setup(app):
    app.connect("html-page-context", _page_links)
