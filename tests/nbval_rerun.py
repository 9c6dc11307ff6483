"""Failure drill wired into nbval: after a notebook's cells have run, Run All again in the same kernel.

A notebook that holds ports, process groups, Ray, TensorBoard writers or W&B runs must survive a
second "Run All" in the kernel that ran the first one. For every notebook nbval collects, an
extra item "Run All again" re-executes every code cell in that kernel and fails on the first
error. Set BEYOND_ONE_GPU_NO_RERUN=1 to leave it out (the drills that start a nested pytest do).
"""
from __future__ import annotations

import os
import queue

import pytest

CELL_TIMEOUT = 600


class RunAllAgain(pytest.Item):
    """Re-execute every code cell of the parent notebook in its (still running) nbval kernel."""

    def runtest(self) -> None:
        kernel = self.parent.kernel
        for i, cell in enumerate(c for c in self.parent.nb.cells if c.cell_type == "code"):
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
                raise AssertionError(f"second Run All in the same kernel failed at code cell {i}: "
                                     f"{content.get('ename')}: {content.get('evalue')}\n--- cell ---\n{cell.source}")

    def reportinfo(self):
        return self.path, 0, f"{self.parent.name}::Run All again"


def pytest_collection_modifyitems(session, config, items):
    if os.environ.get("BEYOND_ONE_GPU_NO_RERUN") == "1":
        return
    out, last_parent = [], None
    for item in items:
        parent = item.parent
        if last_parent is not None and parent is not last_parent and type(last_parent).__name__ == "IPyNbFile":
            out.append(RunAllAgain.from_parent(last_parent, name="Run All again"))
        out.append(item)
        last_parent = parent
    if last_parent is not None and type(last_parent).__name__ == "IPyNbFile":
        out.append(RunAllAgain.from_parent(last_parent, name="Run All again"))
    items[:] = out
