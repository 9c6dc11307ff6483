"""Failure drills (issue: the course as one product): offline suite, cells out of order, regression strength."""
from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import OFFLINE_NOTEBOOKS, OFFLINE_TESTS, can_unshare

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"


def _nested_pytest(args: list[str], env_extra: dict | None = None, prefix: list[str] | None = None,
                   timeout: int = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "BEYOND_ONE_GPU_NO_RERUN": "1", **(env_extra or {})}
    cmd = (prefix or []) + [sys.executable, "-m", "pytest", "-n", "0", "-q", "-x", *args]  # -n 0: one process, no workers of its own
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


# --- the suite passes with the network unavailable ---------------------------------------------------

@pytest.mark.skipif(not can_unshare(), reason="needs `unshare -n` (root or user namespaces) and `ip` to cut the network")
def test_suite_passes_with_no_network():
    """Data, launcher, W&B, TensorBoard and notebooks 00 and 05 (each with its Run-All-again drill) in a network
    namespace with only loopback. The notebooks run here instead of in the suite's own items (conftest.py deselects
    those where this test runs), so each runs once, offline."""
    probe = subprocess.run(["unshare", "-n", "sh", "-c", "ip link set lo up && " + sys.executable +
                            " -c \"import socket; socket.getaddrinfo('pypi.org', 443)\""], capture_output=True, text=True)
    assert probe.returncode != 0, "the namespace still resolves names: the drill would prove nothing"
    inner = " ".join([sys.executable, "-m", "pytest", "-n", "0", "-q", "-x", "-rA", *(f"tests/{t}" for t in OFFLINE_TESTS),
                      *(f"notebooks/{name}" for name in OFFLINE_NOTEBOOKS)])
    env = {k: v for k, v in os.environ.items() if k != "BEYOND_ONE_GPU_NO_RERUN"}   # the Run-All-again drills too
    r = subprocess.run(["unshare", "-n", "sh", "-c", f"ip link set lo up && {inner}"], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert " passed" in r.stdout and "failed" not in r.stdout
    for name in OFFLINE_NOTEBOOKS:   # every notebook ran, its second Run All included where it declares one
        assert f"PASSED notebooks/{name}::Cell 0" in r.stdout, r.stdout[-2000:]
    assert "PASSED notebooks/05_monitoring.ipynb::Run All again" in r.stdout, r.stdout[-2000:]


# --- cells out of order ----------------------------------------------------------------------------------

def _run_cells_in_one_kernel(sources: list[str], cwd: Path) -> list[dict]:
    """Execute sources one after another in a fresh kernel; return each reply's status and error."""
    from nbval.kernel import CURRENT_ENV_KERNEL_NAME, RunningKernel

    kernel = RunningKernel(CURRENT_ENV_KERNEL_NAME, cwd=str(cwd))
    out = []
    try:
        for src in ["%xmode Plain"] + sources:
            msg_id = kernel.execute_cell_input(src, allow_stdin=False)
            while True:
                msg = kernel.get_message(stream="shell", timeout=300)
                if msg["parent_header"].get("msg_id") == msg_id:
                    break
            kernel.await_idle(msg_id, 300)
            c = msg["content"]
            out.append({"status": c["status"], "ename": c.get("ename"), "evalue": c.get("evalue"),
                        "traceback": "\n".join(c.get("traceback", []))})
    finally:
        kernel.stop()
    return out[1:]


@pytest.mark.parametrize("name", ["00_setup.ipynb", "06_oom_troubleshooting.ipynb"])
def test_cells_out_of_order_fail_clearly(name):
    """Run every code cell in reverse order (so the setup cell comes last): each works or stops at once
    with a plain NameError in the cell itself, never deep inside helpers."""
    nb = json.loads((NOTEBOOKS / name).read_text())
    sources = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    results = _run_cells_in_one_kernel(list(reversed(sources)), NOTEBOOKS)
    errors = [r for r in results if r["status"] == "error"]
    assert errors, "running cells backwards should hit at least one undefined name"
    for r in errors:
        assert r["ename"] == "NameError", f"{r['ename']}: {r['evalue']}\n{r['traceback']}"
        assert "helpers/" not in r["traceback"], r["traceback"]


def test_skipping_the_setup_cell_is_harmless_locally():
    """Locally the setup cell only imports helpers; the rest of a notebook runs without it."""
    nb = json.loads((NOTEBOOKS / "06_oom_troubleshooting.ipynb").read_text())
    sources = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"][1:]
    results = _run_cells_in_one_kernel(sources, NOTEBOOKS)
    assert all(r["status"] == "ok" for r in results), [r for r in results if r["status"] != "ok"][:1]


# --- regression strength -----------------------------------------------------------------------------------

def test_a_changed_helper_result_fails_the_suite(tmp_path):
    """Change one helper's result (a wider MLP in the leak demo) and nbval must fail on the compared output."""
    (tmp_path / "sitecustomize.py").write_text(
        "import helpers.memory.recipe as m, helpers.memory.instruments as mi\n"
        "from torch import nn\n"
        "import torch\n"
        "def small_mlp(seed=0):\n"
        "    torch.manual_seed(seed)\n"
        "    return nn.Sequential(nn.Flatten(), nn.Linear(64, 257), nn.ReLU(), nn.Linear(257, 256), nn.ReLU(),"
        " nn.Linear(256, 10))\n"
        "m.small_mlp = mi.small_mlp = small_mlp\n")
    env = {"PYTHONPATH": str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    r = _nested_pytest(["notebooks/06_oom_troubleshooting.ipynb"], env_extra=env)
    assert r.returncode != 0, "nbval passed although a helper's result changed"
    assert "150,532" in r.stdout  # the committed output the changed run no longer matches
    # (the unchanged notebook passing is the main nbval run of 06 itself)


@pytest.mark.skipif(not can_unshare(), reason="needs `unshare -n`: without it the notebooks run in the suite itself")
def test_the_notebooks_the_offline_drill_runs_are_not_run_twice():
    def collected(*args: str) -> str:
        r = subprocess.run([sys.executable, "-m", "pytest", "-n", "0", "-q", "--collect-only", *args], cwd=ROOT,
                           env={**os.environ, "BEYOND_ONE_GPU_NO_RERUN": "1"}, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        return r.stdout
    with_drill = collected("tests/test_drills.py::test_suite_passes_with_no_network", "notebooks", "tests/test_monitor.py")
    assert "00_setup.ipynb::" not in with_drill and "06_oom_troubleshooting.ipynb::Cell 0" in with_drill
    assert "notebooks/ko" not in with_drill, "nbval would run the Korean notebooks a second time"   # test_i18n's, here
    assert "test_monitor.py::" not in with_drill   # the test files the drill runs offline: run once, there
    assert "test_suite_passes_with_no_network" in with_drill


def test_without_the_offline_drill_its_notebooks_and_tests_stay_in_the_suite():
    """Run alone (`pytest notebooks/00_setup.ipynb`, or with `-k` leaving the drill out), they run as ever: only
    the drill's presence among the collected items moves them (conftest.py), checked here on items of both kinds."""
    from types import SimpleNamespace

    from conftest import OFFLINE_DRILL, _leave_to_the_offline_drill

    def item(nodeid: str) -> SimpleNamespace:
        return SimpleNamespace(nodeid=nodeid, path=ROOT / nodeid.split("::")[0])
    items = [item("notebooks/00_setup.ipynb::Cell 0"), item("tests/test_monitor.py::test_x"), item("tests/test_ddp.py::t")]
    deselected = []
    config = SimpleNamespace(hook=SimpleNamespace(pytest_deselected=lambda items: deselected.extend(items)))
    alone = list(items)
    _leave_to_the_offline_drill(config, alone)
    assert alone == items and deselected == []
    with_drill = items + [item(OFFLINE_DRILL)]
    _leave_to_the_offline_drill(config, with_drill)
    kept = ["tests/test_ddp.py::t", OFFLINE_DRILL] if can_unshare() else [i.nodeid for i in items] + [OFFLINE_DRILL]
    assert [i.nodeid for i in with_drill] == kept and len(deselected) == (2 if can_unshare() else 0)


def test_a_process_that_imports_a_test_module_leaves_no_folder_behind(tmp_path):
    """A rank that unpickles a function from a test module imports it, and so conftest.py: only a pytest
    session makes the suite's Ray folder (and removes it at its end), so such a rank leaves nothing in /tmp."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    code = "import sys; sys.path[:0] = ['tests', '.']; import conftest, test_pipeline"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True, timeout=120)
    assert not list(tmp_path.iterdir())
