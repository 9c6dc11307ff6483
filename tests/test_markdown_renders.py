"""Every markdown cell renders as written, English and Korean (issue #26): no bold or italic span left as literal
asterisks, no bare URL that runs into the text after it.

`**용어(term)**조사` breaks CommonMark's closing rule: a `**` preceded by punctuation (`)`) and followed by a letter
(a Hangul particle) is not right-flanking, so it cannot close the span, and JupyterLab and nbconvert's HTML show the
asterisks. A bare URL is extended to the next space by GFM's autolinks (JupyterLab's renderer), so
`(https://example.org)에서` links `https://example.org)에서`. The rendering is mistune's, nbconvert's own renderer.
"""
import json
import re
from pathlib import Path

import mistune
import pytest

ROOT = Path(__file__).resolve().parents[1]
PATHS = sorted((ROOT / "notebooks").glob("*.ipynb")) + sorted((ROOT / "notebooks" / "ko").glob("*.ipynb"))
_MD = mistune.create_markdown(renderer="html", plugins=["table", "strikethrough"])
_BARE_URL = re.compile(r"(?<!\]\()(?<!<)\bhttps?://[^\s<>]*")
_HANGUL = re.compile(r"[\uac00-\ud7a3]")


def _cells(path: Path) -> list[tuple[int, str]]:
    return [(i, "".join(c["source"])) for i, c in enumerate(json.loads(path.read_text())["cells"])
            if c["cell_type"] == "markdown"]


def literal_emphasis(markdown: str) -> list[str]:
    """The rendered text around each `**` or `*` left unrendered, code and math aside (the check's reference)."""
    html = re.sub(r"<(code|pre)>.*?</\1>", "", _MD(markdown), flags=re.S)
    text = re.sub(r"<[^>]+>", "", html)
    text = re.sub(r"\$[^$\n]+\$", "", text)   # inline math: a * there is multiplication
    return [text[max(0, m.start() - 30):m.end() + 30] for m in re.finditer(r"\*\*|(?<![\w*])\*(?=\S)[^*\n]*\*(?!\*)",
                                                                          text)]


def runaway_urls(markdown: str) -> list[str]:
    """Bare URLs (not a link's destination) whose run up to the next space takes in Hangul."""
    return [m.group(0) for m in _BARE_URL.finditer(markdown) if _HANGUL.search(m.group(0))]


@pytest.mark.parametrize("path", PATHS, ids=lambda p: str(p.relative_to(ROOT / "notebooks")))
def test_every_markdown_cell_renders_its_emphasis_and_links(path):
    bad = [(i, s) for i, md in _cells(path) for s in literal_emphasis(md)]
    bad += [(i, u) for i, md in _cells(path) for u in runaway_urls(md)]
    assert not bad, f"{path.name}: cell(s) render wrongly (write **용어**(term), and links as [text](url)): {bad[:5]}"


def test_the_check_catches_the_patterns_issue_26_found():
    assert literal_emphasis("**파이프라이닝(pipelining)**은 배치를")
    assert not literal_emphasis("**파이프라이닝**(pipelining)은 배치를")
    assert literal_emphasis("*단독 스텝 이상치(solo-step ideal)*입니다")
    assert runaway_urls("**Perfetto**(https://ui.perfetto.dev)가 이 파일을")
    assert not runaway_urls("[**Perfetto**](https://ui.perfetto.dev)가 이 파일을")
