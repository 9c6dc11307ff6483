"""Shared test fixtures: a kernel to run notebook code in, and the finder of processes left behind."""
from __future__ import annotations

import functools
import os
import shutil
import tempfile
import threading
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"

# Each run of the suite (a nested one too, and each xdist worker) keeps its Ray sessions in a folder of its
# own, inherited by the kernels and processes it starts: the clean-up at the end (pytest_sessionfinish) ends
# only those, never a notebook's Ray session or another run's on the same machine. Made when a session
# starts, not at import: a rank that imports a test module (and so this file) makes none to leave behind.
_RAY_DIR = None


def pytest_configure(config):
    global _RAY_DIR
    _RAY_DIR = tempfile.mkdtemp(prefix="bog-t")
    os.environ["BEYOND_ONE_GPU_RAY_DIR"] = _RAY_DIR


FORKSERVER = "multiprocessing.forkserver"


def is_rank(p: psutil.Process) -> bool:
    """A launched rank (or a process it forked): a spawned child running multiprocessing's spawn_main,
    or a child of multiprocessing's fork server (which has the server's command line)."""
    try:
        if "spawn_main" in " ".join(p.cmdline()):
            return True
        parent = p.parent()
        return parent is not None and FORKSERVER in " ".join(parent.cmdline())
    except psutil.Error:  # gone meanwhile
        return False


def launched_children() -> list[psutil.Process]:
    """Launched ranks still alive among this process's descendants.

    Other long-lived helpers of the test process (multiprocessing's resource tracker and fork
    server, the wandb-core service of the monitoring tests) are not ranks.
    """
    alive = []
    for c in psutil.Process().children(recursive=True):
        try:
            if c.status() != psutil.STATUS_ZOMBIE and is_rank(c):
                alive.append(c)
        except psutil.NoSuchProcess:
            pass
    return alive


def run_in_kernel(sources: list[str], cwd: Path | str = NOTEBOOKS, env: dict | None = None,
                  timeout: float = 300) -> list[dict]:
    """Execute ``sources`` one after another in one fresh kernel of this environment.

    Returns, per source, the reply's status, error name/value/traceback and its printed output.
    ``env`` adds environment variables to the kernel's.
    """
    from nbval.kernel import CURRENT_ENV_KERNEL_NAME, start_new_kernel

    km, kc = start_new_kernel(kernel_name=CURRENT_ENV_KERNEL_NAME, cwd=str(cwd), stderr=open(os.devnull, "w"),
                              env={**os.environ, **(env or {})})
    out = []
    try:
        for src in ["%xmode Plain"] + list(sources):
            printed: list[str] = []
            reply = kc.execute_interactive(src, timeout=timeout, allow_stdin=False,
                                           output_hook=lambda m: printed.append(m["content"].get("text", ""))
                                           if m["msg_type"] == "stream" else None)
            c = reply["content"]
            out.append({"status": c["status"], "ename": c.get("ename"), "evalue": c.get("evalue"),
                        "traceback": "\n".join(c.get("traceback", [])), "output": "".join(printed)})
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    return out[1:]


def read_lines(stream, want: int, seconds: float, match: str) -> list[str]:
    """Up to ``want`` lines containing ``match`` from ``stream``, waiting at most ``seconds`` (never blocks longer)."""
    got: list[str] = []

    def read():
        for line in stream:
            if match in line:
                got.append(line)
                if len(got) == want:
                    return

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(seconds)
    return got


@pytest.fixture
def language():
    """Set the course language (helpers.set_language) for one test; the language before it afterwards."""
    from helpers.core import i18n

    before = os.environ.get(i18n.ENV)
    yield i18n.set_language
    if before is None:
        os.environ.pop(i18n.ENV, None)
    else:
        os.environ[i18n.ENV] = before


@pytest.fixture
def kernel():
    """``kernel(sources, cwd=..., env=...)``: run code cells in a fresh kernel (see :func:`run_in_kernel`)."""
    return run_in_kernel


# --- nothing outlives the suite --------------------------------------------------------------------------

def _leftovers() -> list[psutil.Process]:
    """Processes the suite started that are still alive: descendants of this process, and Ray's session
    processes (which `ray start` detaches), minus multiprocessing's resource tracker and fork server (not
    the ranks it forked) and wandb's service."""
    from helpers.core.procs import session_processes
    from helpers.launching.ray_cluster import ray_temp_dir

    keep = ("resource_tracker", "wandb-core", "wandb_core", "wandb/bin")
    procs = {p.pid: p for p in psutil.Process().children(recursive=True)}
    procs.update({p.pid: p for p in session_processes(str(ray_temp_dir()))})
    out = []
    for p in procs.values():
        try:
            line = " ".join(p.cmdline())
            server = FORKSERVER in line and not is_rank(p)
            if p.status() != psutil.STATUS_ZOMBIE and not server and not any(k in line for k in keep):
                out.append(p)
        except psutil.Error:
            pass
    return out


def pytest_sessionfinish(session, exitstatus):
    """Fail the run if any process it started is still alive at the end (and end those processes)."""
    import time

    deadline = time.monotonic() + 10  # processes being torn down get a moment
    left = _leftovers()
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = _leftovers()
    if left:
        from helpers.core.procs import end_processes

        names = [f"{p.pid}: {' '.join(p.cmdline())[:100]}" for p in left]
        end_processes(left)
        print("\nProcesses left behind by the test suite (now ended):\n  " + "\n  ".join(names))
        session.exitstatus = 1
    if _RAY_DIR:
        shutil.rmtree(_RAY_DIR, ignore_errors=True)


@pytest.fixture
def default_sigint():
    """Python's own SIGINT handler for the test's duration: a suite started as a background job (``nohup pytest
    &``) inherits SIGINT ignored, and a drill of the Stop button would press a button that does nothing."""
    import signal

    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


# The longest files first, so that the two xdist workers (``--dist loadfile``: a file's items stay on one worker)
# do not finish one long notebook alone at the end: the notebooks by their run time on the results table's machine
# (a new notebook first of all, until it has a place here), then the test files with the longest drills. The rest
# keep their collection order. A file's own items keep theirs (``sorted`` is stable). 10 comes after 07 so that it
# follows 04 on 04's worker: both start Ray clusters, and run side by side each took half as long again.
LONGEST_FIRST = ["04_", "test_drills.py", "07_", "10_", "03_", "09_", "01_", "08_", "02_", "05_", "00_", "06_",
                 "test_lab.py", "test_site.py", "test_ray_faults.py", "test_colab_setup.py", "test_ddp.py", "test_sharding.py"]

# The offline drill (test_drills.py) runs these notebooks under nbval, each with its Run-All-again drill, and these
# test files, in a network namespace with only loopback. Where it runs in a session, their items here are
# deselected: run once, offline.
OFFLINE_NOTEBOOKS = ("00_setup.ipynb", "05_monitoring.ipynb")
OFFLINE_TESTS = ("test_data.py", "test_monitor.py")
OFFLINE_DRILL = "tests/test_drills.py::test_suite_passes_with_no_network"


@functools.cache   # asked by the collection hook and by skip marks in several files: one probe per process
def can_unshare() -> bool:
    """Whether this machine can cut the network for a process: ``unshare -n`` (root or user namespaces) and ``ip``."""
    import subprocess

    if not shutil.which("unshare") or not shutil.which("ip"):
        return False
    return subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0


def _leave_to_the_offline_drill(config, items) -> None:
    if any(i.nodeid == OFFLINE_DRILL for i in items) and can_unshare():
        moved = [i for i in items if (i.path.suffix == ".ipynb" and i.path.name in OFFLINE_NOTEBOOKS)
                 or (i.path.parent.name == "tests" and i.path.name in OFFLINE_TESTS)]
        if moved:
            config.hook.pytest_deselected(items=moved)
            items[:] = [i for i in items if i not in moved]


@pytest.hookimpl(trylast=True)   # after nbval_rerun has added its "Run All again" items to their notebooks
def pytest_collection_modifyitems(session, config, items):
    def rank(item) -> int:
        name = item.path.name
        if item.path.suffix == ".ipynb" and not any(name.startswith(p) for p in LONGEST_FIRST):
            return -1
        return next((i for i, p in enumerate(LONGEST_FIRST) if name.startswith(p) or name == p), len(LONGEST_FIRST))

    items.sort(key=rank)
    _leave_to_the_offline_drill(config, items)
