"""Failure drill wired into nbval: after a notebook's cells have run, Run All again in the same kernel,
on a loaded machine.

A notebook that holds ports, process groups, Ray, TensorBoard servers, W&B runs or files it wrote
must survive a second "Run All" in the kernel that ran the first one, and a notebook must never
assert a speed that a slower or busier machine misses. So for every notebook that declares
``"rerun_drill": true`` in its metadata (``metadata.course``: the notebooks that hold such
resources across cells), an extra item "Run All again" re-executes every code cell in that kernel
**while a busy-loop process occupies one core**, and fails on the first error. The loop runs at the lowest
priority (nice 19): it takes the CPU time the machine would leave idle, a whole core on an idle machine, and little
inside the suite, whose two workers already keep both cores busy, so the rerun is loaded either way without the
loop taking work time from the suite. (The suite's own "one core busy" run keeps a core busy at normal priority.) A notebook without
cross-cell resources declares ``"rerun_drill": false`` with the reason. Set
BEYOND_ONE_GPU_NO_RERUN=1 to leave the drill out (the drills that start a nested pytest do).
"""
from __future__ import annotations

import json
import os
import queue
import subprocess
import sys

import pytest

CELL_TIMEOUT = 600
BUSY_LOOP = "import time\nend = time.monotonic() + 900\nwhile time.monotonic() < end: pass"


def wants_rerun(path) -> bool:
    """Whether a notebook declares the Run-All-again drill (``metadata.course.rerun_drill``)."""
    meta = json.loads(open(path).read()).get("metadata", {}).get("course", {})
    if "rerun_drill" not in meta:
        raise pytest.UsageError(f"{path}: metadata.course.rerun_drill is missing: declare true (the notebook holds "
                                "processes, ports, servers or files across cells) or false with a reason")
    return bool(meta["rerun_drill"])


class RunAllAgain(pytest.Item):
    """Re-execute every code cell of the parent notebook in its (still running) nbval kernel, one core busy."""

    def runtest(self) -> None:
        kernel = self.parent.kernel
        busy = subprocess.Popen([sys.executable, "-c", BUSY_LOOP], preexec_fn=lambda: os.nice(19))  # a core's idle time
        try:
            for i, cell in enumerate(c for c in self.parent.nb.cells if c.cell_type == "code"):
                self._run(kernel, i, cell)
        finally:
            busy.kill()
            busy.wait()

    @staticmethod
    def _run(kernel, i: int, cell) -> None:
        msg_id = kernel.execute_cell_input(cell.source, allow_stdin=False)
        while True:
            try:
                msg = kernel.get_message(stream="shell", timeout=CELL_TIMEOUT)
            except queue.Empty:
                raise AssertionError(f"second Run All: code cell {i} gave no reply within {CELL_TIMEOUT} s")
            if msg["parent_header"].get("msg_id") == msg_id:
                break
        kernel.await_idle(msg_id, CELL_TIMEOUT)
        content = msg["content"]
        if content["status"] != "ok":
            raise AssertionError(f"second Run All (one core busy) in the same kernel failed at code cell {i}: "
                                 f"{content.get('ename')}: {content.get('evalue')}\n--- cell ---\n{cell.source}")

    def reportinfo(self):
        return self.path, 0, f"{self.parent.name}::Run All again"


def pytest_collection_modifyitems(session, config, items):
    if os.environ.get("BEYOND_ONE_GPU_NO_RERUN") == "1":
        return
    out, last_parent = [], None

    def close(parent) -> None:
        if parent is not None and type(parent).__name__ == "IPyNbFile" and wants_rerun(parent.path):
            out.append(RunAllAgain.from_parent(parent, name="Run All again"))

    for item in items:
        if item.parent is not last_parent:
            close(last_parent)
        out.append(item)
        last_parent = item.parent
    close(last_parent)
    items[:] = out
