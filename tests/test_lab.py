"""What a student sees in a live JupyterLab (#27), driven in headless Chromium: Run All on 00 leaves a finished
progress bar, on 05 the embedded TensorBoard shows the scalars the notebook logged, and Stop during a launch in
03 leaves no rank process behind. JupyterLab runs on a free port with a token, over copies of the notebooks
(its autosave never touches the committed ones), with its own settings and workspace folders."""
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from browser import Problems, browser, needs_browser, screenshot

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ("00_setup.ipynb", "03_ddp.ipynb", "05_monitoring.ipynb")
pytestmark = needs_browser()

# every code cell of the notebook shows an execution count: it ran in this kernel (outputs were cleared first)
ALL_RAN = """() => { const p = [...document.querySelectorAll('.jp-NotebookPanel .jp-CodeCell .jp-InputPrompt')]
  .map(e => e.textContent.trim()); return p.length > 0 && p.every(t => /^\\[\\d+\\]:$/.test(t)); }"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server over copies of 00, 03 and 05; yields (address, token, folder, server process)."""
    home = tmp_path_factory.mktemp("lab")
    folder = home / "notebooks"
    folder.mkdir()
    for name in NOTEBOOKS:
        shutil.copy2(ROOT / "notebooks" / name, folder / name)
    settings = home / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)   # no "news" pop-up over the notebook
    (settings / "notification.jupyterlab-settings").write_text('{"fetchNews": "false", "checkForUpdates": false}')
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(home / "config"), JUPYTERLAB_SETTINGS_DIR=str(home / "settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"), JUPYTER_RUNTIME_DIR=str(home / "runtime"))
    log = (home / "lab.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--allow-root", "--ip=127.0.0.1", f"--port={port}",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={folder}"],
        stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    try:
        while True:   # until the server answers (or ends, or takes too long)
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"JupyterLab did not start: {(home / 'lab.log').read_text()[-2000:]}")
                time.sleep(0.1)
        yield base, token, folder, server
    finally:
        try:
            os.killpg(server.pid, signal.SIGTERM)   # the server ends its kernels
            server.wait(30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(10)
        log.close()


@pytest.fixture(scope="module")
def page(lab):
    with browser() as b:
        p = b.new_page(viewport={"width": 1400, "height": 900})
        yield p
        p.close()


def _kernel_state(lab, name: str) -> str | None:
    """The execution state of the kernel of ``name``'s session, as the server reports it."""
    base, token, _, _ = lab
    with urllib.request.urlopen(f"{base}/api/sessions?token={token}", timeout=10) as reply:
        sessions = json.load(reply)
    return next((s["kernel"]["execution_state"] for s in sessions if s["path"].endswith(name)), None)


def _open(page, lab, name: str):
    """Open ``name`` alone, in a workspace of its own, once its kernel is up."""
    base, token, _, _ = lab
    page.goto(f"{base}/lab/workspaces/{Path(name).stem}/tree/{name}?token={token}")
    page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-Cell", timeout=60_000)
    deadline = time.monotonic() + 90
    while _kernel_state(lab, name) != "idle":
        assert time.monotonic() < deadline, f"{name}'s kernel did not start within 90 s"
        time.sleep(0.1)
    page.wait_for_selector(".jp-NotebookPanel .jp-Notebook-ExecutionIndicator[data-status='idle']")


def _menu(page, menu: str, item: str):
    page.click(f"#jp-MainMenu >> text={menu}")
    page.get_by_text(item, exact=True).click()


def _run_all(page):
    """Clear the outputs (so that a count seen afterwards is this run's), then Restart Kernel and Run All Cells:
    JupyterLab runs the cells once the new kernel is up."""
    _menu(page, "Edit", "Clear Outputs of All Cells")
    page.wait_for_function("() => [...document.querySelectorAll('.jp-NotebookPanel "
                           ".jp-CodeCell .jp-InputPrompt')].every(e => !/\\d/.test(e.textContent))")
    _menu(page, "Run", "Restart Kernel and Run All Cells…")
    page.click(".jp-Dialog .jp-mod-accept")


def _show(page, element):
    """Scroll ``element`` into the middle of the notebook and let JupyterLab paint it (for a screenshot)."""
    element.wait_for()
    element.evaluate("e => e.scrollIntoView({block: 'center'})")
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    element.wait_for(state="visible")


def _outputs(page) -> list[str]:
    return page.eval_on_selector_all(".jp-NotebookPanel .jp-OutputArea-output",
                                     "outs => outs.map(o => o.textContent)")


def _ranks(server: subprocess.Popen) -> list[psutil.Process]:
    """Launched ranks among the server's descendants (its kernels' children): spawned, or forked by a fork server."""
    found = []
    for p in psutil.Process(server.pid).children(recursive=True):
        try:
            line, parent = " ".join(p.cmdline()), p.parent()
            if p.status() != psutil.STATUS_ZOMBIE and (
                    "spawn_main" in line or (parent and "multiprocessing.forkserver" in " ".join(parent.cmdline()))):
                found.append(p)
        except psutil.Error:
            pass
    return found


def test_run_all_on_00_leaves_a_finished_progress_bar(lab, page):
    problems = Problems(page)
    _open(page, lab, "00_setup.ipynb")
    # jupyterlab-rise's button: the notebook as reveal.js slides, live (the cells' slide metadata, web/slides.py)
    assert page.locator(".jp-NotebookPanel [data-command='RISE:preview']").count() == 1
    _run_all(page)
    page.wait_for_function(ALL_RAN, timeout=240_000)
    bars = [t for t in _outputs(page) if re.search(r"\d+/\d+ \[", t)]
    assert any(re.search(r"train: 100%\|.*\| 300/300 \[", t) for t in bars), bars
    unfinished = [t for t in bars for done, total in re.findall(r"(\d+)/(\d+) \[", t) if done != total]
    assert not unfinished, f"a bar that never finished: {unfinished}"
    assert page.locator(".jp-NotebookPanel .widget-progress").count() == 0
    _show(page, page.locator(".jp-NotebookPanel .jp-Cell", has_text="300/300").first)
    screenshot(page, "lab-00-progress-bar")
    assert not [p for p in problems.take() if "console error" in p and "/api/" not in p]


def test_the_embedded_tensorboard_shows_the_logged_scalars(lab, page):
    from helpers.monitor import read_back
    _open(page, lab, "05_monitoring.ipynb")
    _run_all(page)
    page.wait_for_function(ALL_RAN, timeout=240_000)
    _, _, folder, _ = lab
    logged = read_back(folder / "runs" / "05_monitoring")["runs"]   # with TensorBoard's own reader
    tags = sorted({tag for run in logged.values() for tag in run["scalars"]})
    assert len(tags) >= 3, logged
    frame_element = page.wait_for_selector("iframe[id^=tensorboard-frame]", timeout=60_000)
    frame_element.scroll_into_view_if_needed()
    board = frame_element.content_frame()
    for run in logged:   # every run in the board's run list
        board.wait_for_selector(f"text='{run}'", timeout=60_000)
    search = board.locator("input[placeholder*='Filter tags']").first
    for tag in tags:     # each logged scalar has its card, with a chart drawn
        search.fill(f"^{re.escape(tag)}$")
        card = board.locator("scalar-card", has=board.get_by_text(tag, exact=True)).first
        card.wait_for(timeout=60_000)
        card.locator("canvas, svg").first.wait_for(timeout=60_000)
    search.fill("")
    search.press("Escape")
    _show(page, page.locator("iframe[id^=tensorboard-frame]").first)
    screenshot(page, "lab-05-tensorboard")


def test_stop_during_a_launch_in_03_leaves_no_rank_process_behind(lab, page):
    _, _, _, server = lab
    _open(page, lab, "03_ddp.ipynb")
    _run_all(page)
    deadline = time.monotonic() + 180
    while not _ranks(server):   # a launch is running: its ranks are up
        if time.monotonic() > deadline:
            screenshot(page, "lab-03-stopped-launch")
            raise AssertionError("no launch started within 180 s of Run All (see the screenshot)")
        time.sleep(0.02)
    _menu(page, "Kernel", "Interrupt Kernel")   # what the Stop button does
    deadline = time.monotonic() + 60
    while _kernel_state(lab, "03_ddp.ipynb") != "idle":   # the interrupted cell has ended
        assert time.monotonic() < deadline, "the kernel was still busy 60 s after Stop"
        time.sleep(0.1)
    deadline = time.monotonic() + 30
    while (left := _ranks(server)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, f"ranks still alive after Stop: {[(p.pid, ' '.join(p.cmdline())[:80]) for p in left]}"
    stopped = page.locator(".jp-NotebookPanel .jp-Cell", has_text="KeyboardInterrupt").first
    _show(page, stopped)
    screenshot(page, "lab-03-stopped-launch")
    prompts = page.eval_on_selector_all(".jp-NotebookPanel .jp-CodeCell .jp-InputPrompt",
                                        "ps => ps.map(p => p.textContent.trim())")
    assert "[ ]:" in prompts, "Run All went on after Stop"
