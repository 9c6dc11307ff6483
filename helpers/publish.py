"""Where the course is published, in one place: ``[project.urls] Repository`` in ``pyproject.toml``.

Every notebook's setup cell clones the course from that address in Colab, and every Colab badge in
the README points at it. To publish the course elsewhere, change the URL in ``pyproject.toml``,
then run::

    python -m helpers.publish

which rewrites the setup cell of every notebook and the README's badges to match (the tests check
that they agree). A reader can also point one Colab session at a fork without editing anything:
``os.environ["BEYOND_ONE_GPU_REPO"] = "https://github.com/me/fork"`` before the setup cell.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"

# The first code cell of every notebook; {repository} is filled in from pyproject.toml.
SETUP_CELL = '''\
# Setup (the same in every notebook): in Colab, fetch and install the course; locally, do nothing.
import os, subprocess, sys
REPO = os.environ.get("BEYOND_ONE_GPU_REPO", "{repository}")
COURSE = os.environ.get("BEYOND_ONE_GPU_HOME", "/content/beyond-one-gpu")
def _step(cmd, fix):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        why = r.stderr.strip()[-1500:]
        raise RuntimeError(f"Course setup failed: {{' '.join(cmd)}}\\n{{why}}\\nFix: {{fix}}")
if "google.colab" in sys.modules and not os.path.exists(f"{{COURSE}}/.installed"):  # half-done: redo
    if not os.path.isdir(f"{{COURSE}}/.git"):
        _step(["git", "clone", "-q", "--depth", "1", REPO, COURSE],
              f"is {{REPO}} the course's address (set BEYOND_ONE_GPU_REPO to change it), and is the "
              f"network on? If {{COURSE}} exists, delete it")
    _step([sys.executable, "-m", "pip", "install", "-q", "-r",
           f"{{COURSE}}/requirements-runtime.txt"],
          f"run this cell again; if it fails the same way, delete {{COURSE}}")
    open(f"{{COURSE}}/.installed", "w").close()
if "google.colab" in sys.modules and COURSE not in sys.path: sys.path.insert(0, COURSE)
import helpers'''


def repository() -> str:
    """The course's public repository URL, from ``pyproject.toml`` (every notebook's setup cell)."""
    text = (ROOT / "pyproject.toml").read_text()
    m = re.search(r'^\s*Repository\s*=\s*"([^"]+)"', text, re.M)
    if not m:
        raise RuntimeError('pyproject.toml has no [project.urls] Repository = "https://…" line; add one')
    return m.group(1).rstrip("/")


def setup_cell(repo: str | None = None) -> str:
    """The setup cell every notebook starts with, for ``repo`` (default: :func:`repository`) (all notebooks)."""
    return SETUP_CELL.format(repository=repo or repository())


def colab_url(notebook: str, repo: str | None = None) -> str:
    """The Colab address that opens ``notebook`` (e.g. ``notebooks/00_setup.ipynb``) from GitHub (README)."""
    repo = repo or repository()
    m = re.match(r"https://github\.com/([^/]+)/([^/]+?)(\.git)?$", repo)
    if not m:
        raise ValueError(f"Colab opens notebooks from GitHub; {repo!r} is not a https://github.com/OWNER/NAME URL")
    return f"https://colab.research.google.com/github/{m.group(1)}/{m.group(2)}/blob/main/{notebook}"


def notebook_paths() -> list[Path]:
    """Every course notebook, English and translations (all notebooks)."""
    return sorted(NOTEBOOKS.rglob("*.ipynb"))


def publish() -> list[str]:
    """Rewrite every notebook's setup cell and the README's Colab badges for :func:`repository` (all notebooks)."""
    repo = repository()
    changed = []
    cell = setup_cell(repo)
    for path in notebook_paths():
        nb = json.loads(path.read_text())
        first = next(c for c in nb["cells"] if c["cell_type"] == "code")
        old = "".join(first["source"])
        new = _keep_language_line(old, cell)
        if old != new:
            first["source"] = new.splitlines(keepends=True)
            path.write_text(json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
            changed.append(str(path.relative_to(ROOT)))
    for readme in sorted(ROOT.glob("README*.md")):
        text = readme.read_text()
        new = re.sub(r"https://colab\.research\.google\.com/github/[^)\s]+?/blob/main/(notebooks/[^)\s]+\.ipynb)",
                     lambda m: colab_url(m.group(1), repo), text)
        if new != text:
            readme.write_text(new)
            changed.append(readme.name)
    return changed


def _keep_language_line(old: str, cell: str) -> str:
    """A translated notebook's setup cell ends with its language line; keep it after the rewrite."""
    extra = old.split("import helpers", 1)[1] if "import helpers" in old else ""
    return cell + extra


if __name__ == "__main__":
    done = publish()
    print("\n".join(done) if done else f"everything already points at {repository()}")
