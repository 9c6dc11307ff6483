"""Notebook 06's recorded GPU run (helpers/memory/recorded.py): its output and memory rows read from the recording,
never typed; the intro says when the recording ran other code."""
import pytest

from helpers import memory as M


def test_recorded_gpu_output_is_read_not_typed():
    out = M.recorded_gpu_output("d78593a6")
    assert "after del block" in out and "empty_cache" in out
    assert "H100" in M.recorded_gpu_run()
    with pytest.raises(KeyError, match="record a new GPU run"):
        M.recorded_gpu_output("no-such-cell")


def test_recorded_gpu_intro_says_when_the_recording_ran_other_code(tmp_path):
    import json
    import zipfile
    from pathlib import Path

    nb = json.loads((Path(M.__file__).resolve().parents[2] / "notebooks" / "06_oom_troubleshooting.ipynb").read_text())
    cells = {c["id"]: c for c in nb["cells"]}
    cells["d78593a6"]["source"] = "print('older code')"
    folder = tmp_path / "a" / "b" / "2026-01-01-gpu"
    folder.mkdir(parents=True)
    (folder / "notebooks.log").write_text("GPU run: torch 9, 1 x Some GPU\n")
    with zipfile.ZipFile(folder / "executed_notebooks.zip", "w") as z:
        z.writestr("06_oom_troubleshooting.ipynb", json.dumps(nb))
    # without a README naming the commit, the label says the helpers' commit is unknown
    assert M.recorded_gpu_intro("fa91ff67", folder=folder) == (
        "Recorded on a GPU (torch 9, a course commit the recording does not name; same cell code)")  # "1 x Some GPU": no model number
    older = M.recorded_gpu_intro("d78593a6", folder=folder)
    assert "; an earlier version of this cell, its code in" in older and older.endswith(")")
    assert "2026-01-01-gpu/executed_notebooks.zip" in older                # where that code can be read
    assert "Some GPU" in M.recorded_gpu_intro("d78593a6", folder=folder, details=True)   # the full name, once
    # only the cell's code is compared, not the helpers it calls: the label names the commit whose helpers ran
    (folder / "README.md").write_text("# A run\n\n`tests/gpu/run.sh` on one GPU, from main at abc1234, run as two commands\n")
    assert M.recorded_gpu_commit(folder) == "abc1234"
    assert M.recorded_gpu_intro("fa91ff67", folder=folder).endswith("(torch 9, course commit abc1234; same cell code)")
    assert "course commit abc1234; an earlier version" in M.recorded_gpu_intro("d78593a6", folder=folder)
    assert M.recorded_gpu_intro("fa91ff67", folder=folder).startswith("Recorded on a GPU (")


def test_recorded_gpu_commit_is_read_from_the_recordings_readme():
    assert M.recorded_gpu_commit() == "b57ce86"   # "from main at b57ce86" in its README.md
    assert M.recorded_gpu_intro("302c14df").startswith("Recorded on an H100 (torch 2.11.0+cu130, course commit b57ce86; ")
    first = M.recorded_gpu_intro("00c6803b", details=True)   # the detail, once, in the notebook's first recorded cell
    assert "1 × NVIDIA H100 80GB HBM3" in first and "tests/gpu/recorded/2026-11-27-h100" in first
    assert first.splitlines()[-1] == M.recorded_gpu_intro("00c6803b")


def test_recorded_gpu_intro_tells_no_gpu_lines_from_gpu_code(tmp_path):
    # only the else of `if torch.cuda.is_available()` differs: the GPU ran the code shown; a change
    # in the GPU branch, or outside it, is an earlier version
    import json
    import zipfile
    from pathlib import Path

    nb = json.loads((Path(M.__file__).resolve().parents[2] / "notebooks" / "06_oom_troubleshooting.ipynb").read_text())
    cells = {c["id"]: c for c in nb["cells"]}
    now = "".join(cells["c67d3342"]["source"])
    assert "if torch.cuda.is_available():" in now and "then = step_model_at(commit) if commit else None" in now
    cells["c67d3342"]["source"] = now.replace("then = step_model_at(commit) if commit else None", "then = None")
    assert cells["c67d3342"]["source"] != now
    gpu_changed = "".join(cells["d78593a6"]["source"]).replace('show_memory("start")', 'show_memory("begin")')
    assert gpu_changed != "".join(cells["d78593a6"]["source"])
    cells["d78593a6"]["source"] = gpu_changed
    folder = tmp_path / "a" / "b" / "2026-01-01-gpu"
    folder.mkdir(parents=True)
    (folder / "notebooks.log").write_text("GPU run: torch 9, 1 x Some GPU, Python 3.12.3\n")
    with zipfile.ZipFile(folder / "executed_notebooks.zip", "w") as z:
        z.writestr("06_oom_troubleshooting.ipynb", json.dumps(nb))
    assert M.recorded_gpu_run(folder).startswith("1 x Some GPU, torch 9, ")   # the log's ", Python …" is not the GPU's name
    same_gpu = M.recorded_gpu_intro("c67d3342", folder=folder)
    assert same_gpu.endswith("; same cell code on a GPU)")
    assert "earlier version" not in same_gpu
    assert "an earlier version of this cell" in M.recorded_gpu_intro("d78593a6", folder=folder)
    assert M.gpu_path("if torch.cuda.is_available():\n    a()\nelse:\n    b()") == M.gpu_path("a()  # note")
    assert M.gpu_path("if not torch.cuda.is_available():\n    b()\nc()") == M.gpu_path("c()")
    assert M.gpu_path("if torch.cuda.is_available():\n    a()") != M.gpu_path("if torch.cuda.is_available():\n    a2()")


def test_step_model_at_reads_the_recorded_commits_default():
    # cell 37 prints the model the recorded GPU run trained, read from its commit (skipped in a shallow clone)
    import subprocess

    commit = M.recorded_gpu_commit()
    if subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True).returncode:
        pytest.skip(f"this clone lacks {commit}")
    assert M.step_model_at(commit) == "deep_mlp(blocks=8, width=4096)"
    assert M.step_model_at("0" * 40) is None


def test_recorded_memory_rows_are_parsed_from_the_recording():
    rows = M.recorded_memory_rows("d78593a6")
    assert list(rows) == ["start", "after clearing cuBLAS workspaces", "after a 256 MiB tensor", "after del block",
                          "after empty_cache()"]
    (a0, r0), (a1, r1) = rows["start"], rows["after empty_cache()"]
    assert a1 < r1 < r0   # what cell 9's generated sentence says: empty_cache() keeps segments holding live tensors
    assert rows["after del block"] == (rows["after clearing cuBLAS workspaces"][0], rows["after a 256 MiB tensor"][1])
    assert M.recorded_memory_rows("00c6803b") == {}   # a cell without such rows gives none


def test_step_model_reads_the_factories_defaults():
    assert M.step_model(M.training_step_under_budget) == "deep_mlp(blocks=4, width=256)"
    assert M.step_model(M.training_step_on_gpu) == "deep_mlp(blocks=8, width=4096)"
    assert M.step_model(lambda width=7, blocks=3: None) == "deep_mlp(blocks=3, width=7)"


def test_gpu_status_line_prints_gib(monkeypatch):
    from helpers.memory import instruments
    row = {"index": 0, "utilization_pct": 5.0, "memory_used_gb": 2**30 / 1e9, "memory_total_gb": 80 * 2**30 / 1e9}
    monkeypatch.setattr(instruments, "gpu_status", lambda: [row])
    assert M.gpu_status_line(3) == "step 3: GPU 0 5% GPU-Util, 1.00/80.0 GiB used"


def test_the_batch_search_cell_still_runs_the_recorded_gpu_code():
    # cell 37's GPU path must stay the recorded one, or its recorded line is an earlier version's
    intro = M.recorded_gpu_intro("c67d3342")
    assert "; same cell code" in intro and "earlier version" not in intro and "course commit" in intro


def test_in_korean_a_recording_says_the_cells_sentences_as_the_korean_notebook_stores_them(language):
    """A Korean run replays a recorded cell's output with the cell's printed sentences in Korean, exactly as the Korean
    notebook's stored output re-renders the English run (i18n/cell_strings.py); its rows are parsed as recorded."""
    import json
    import sys

    from conftest import ROOT

    sys.path.insert(0, str(ROOT))
    from i18n import cell_strings

    raw = M.recorded_gpu_output("bf60e06a", said=False)
    entry = json.loads((ROOT / "i18n" / "ko" / "06_oom_troubleshooting.json").read_text(encoding="utf-8"))["bf60e06a"]
    rows = M.recorded_memory_rows()
    language("ko")
    said = M.recorded_gpu_output("bf60e06a")
    assert said == cell_strings.say_again(raw, cell_strings.usable_strings(entry)) != raw
    assert M.recorded_memory_rows() == rows
    language("en")
    assert M.recorded_gpu_output("bf60e06a") == raw
