"""The Colab start (every notebook's setup cell), simulated on a CPU: a fake ``google.colab`` module,
the course cloned from a local ``file://`` URL into a temporary folder instead of /content."""
import json

import pytest

from conftest import NOTEBOOKS, ROOT
from helpers.publish import colab_url, notebook_paths, repository, setup_cell

pytestmark = pytest.mark.skipif(not (ROOT / ".git").exists(), reason="clones the course with git: needs a git checkout")

FAKE_COLAB = "import sys, types; sys.modules['google.colab'] = types.ModuleType('google.colab')"
COUNT_COMMANDS = ("import subprocess; _calls = []; _run = subprocess.run\n"
                  "subprocess.run = lambda cmd, *a, **k: (_calls.append(cmd[1] if cmd[0] == 'git' else cmd[2]), "
                  "_run(cmd, *a, **k))[1]")


def _setup(kernel, home, repo, extra=()):
    env = {"BEYOND_ONE_GPU_REPO": repo, "BEYOND_ONE_GPU_HOME": str(home)}
    return kernel([FAKE_COLAB, COUNT_COMMANDS, setup_cell(), "print(helpers.__file__, _calls)", *extra],
                  cwd=home.parent, env=env, timeout=600)


def test_setup_cell_clones_installs_and_imports_a_rerun_is_instant_and_a_half_install_is_redone(kernel, tmp_path):
    home = tmp_path / "content" / "beyond-one-gpu"
    home.parent.mkdir()
    unmark = f"import os; os.remove({str(home / '.installed')!r})"   # as if the kernel died during pip
    res = _setup(kernel, home, f"file://{ROOT}",
                 extra=[setup_cell(), "print(helpers.__file__, _calls)",          # Run All twice in one session
                        unmark, setup_cell(), "print(_calls)"])
    assert all(r["status"] == "ok" for r in res), [r for r in res if r["status"] != "ok"]
    first, second, third = res[3]["output"], res[5]["output"], res[8]["output"]
    assert first.startswith(str(home / "helpers")), first             # the cloned course is the one imported
    assert "['clone', 'pip']" in first
    assert "['clone', 'pip']" in second                                 # the second run called nothing new
    assert "['clone', 'pip', 'pip']" in third                           # half done: installed again, not cloned
    assert (home / ".installed").exists()


def test_a_bad_course_url_stops_with_the_fix(kernel, tmp_path):
    home = tmp_path / "content" / "beyond-one-gpu"
    home.parent.mkdir()
    res = _setup(kernel, home, f"file://{tmp_path}/no-such-course")
    err = res[2]
    assert err["status"] == "error" and err["ename"] == "RuntimeError"
    assert "Course setup failed: git clone" in err["evalue"] and "Fix:" in err["evalue"]
    assert "BEYOND_ONE_GPU_REPO" in err["evalue"] and "no-such-course" in err["evalue"]
    assert not (home / ".installed").exists()


def test_locally_the_setup_cell_only_imports_helpers(kernel, tmp_path):
    res = kernel([setup_cell(), "print(helpers.__file__)"], cwd=NOTEBOOKS)
    assert res[0]["status"] == "ok" and res[1]["output"].startswith(str(ROOT / "helpers"))


@pytest.mark.parametrize("path", notebook_paths(), ids=lambda p: p.name)
def test_every_notebook_starts_with_the_setup_cell_for_the_published_address(path):
    nb = json.loads(path.read_text())
    first = "".join(next(c for c in nb["cells"] if c["cell_type"] == "code")["source"])
    assert first.startswith(setup_cell()), f"{path.name}: run `python -m helpers.publish`"


def test_readme_badges_open_the_published_repository():
    for readme in sorted(ROOT.glob("README*.md")):
        text = readme.read_text()
        for nb in notebook_paths():
            rel = str(nb.relative_to(ROOT))
            if f"({rel})" in text:
                assert colab_url(rel) in text, f"{readme.name}: badge for {rel}; run `python -m helpers.publish`"
    assert repository().startswith("https://github.com/")
