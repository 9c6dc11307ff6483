"""Workers for the launcher's failure drills (tests/test_launch_faults.py, and test_ddp.py's checkpoint drill).

Spawned ranks import this module by name: tests/ is on the path of the test process (pyproject's
``pythonpath``), and spawn gives every rank the path of the process that started it.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from multiprocessing import connection


def die_while_sending_result(rank: int, world_size: int, nbytes: int = 4_000_000) -> bytes:
    """Rank 1 is SIGKILLed half-way through writing its large result to the launcher (the OOM killer's moment)."""
    if rank == 1:
        send = connection.Connection._send_bytes

        def half_then_die(self, buf):  # noqa: ANN001
            if len(buf) < nbytes:
                return send(self, buf)
            data = bytes(buf)
            self._send(len(data).to_bytes(4, "big", signed=True) + data[: len(data) // 2])
            os.kill(os.getpid(), signal.SIGKILL)

        connection.Connection._send_bytes = half_then_die
    return b"x" * nbytes


def write_natively(rank: int, world_size: int) -> int:
    """Write to file descriptors 1 and 2 as native code does, and from a child process."""
    os.write(1, f"native stdout of rank {rank}\n".encode())
    os.write(2, f"native stderr of rank {rank}\n".encode())
    subprocess.run([sys.executable, "-c", f"print('child of rank {rank}')"], check=True)
    return rank


def one_argument(rank: int) -> int:
    """A function that forgot ``world_size``: the launcher must refuse it before starting anything."""
    return rank


def bar_and_return(rank: int, world_size: int, steps: int = 40) -> int:
    """Rank 0 draws a text progress bar (as the training loop does in a rank), slowly enough to be seen live."""
    from tqdm import tqdm

    for _ in tqdm(range(steps), desc="rank 0 bar", disable=rank != 0, mininterval=0.05):
        time.sleep(0.05)
    return rank



def checkpoint_per_node(rank: int, world_size: int, root: str) -> dict:
    """Rank 0 writes a checkpoint; what ``require_same_file`` says on this rank, in three cases (03).

    "shared": every rank reads the same path. "own disk" and "stale" simulate nodes without a shared
    filesystem: every rank reads its own directory, where rank 1 finds no file, or one from an earlier run.
    """
    import torch
    import torch.distributed as dist
    from helpers.ddp.recipe import require_same_file

    said = {}
    for case in ("own disk", "stale", "shared"):
        path = os.path.join(root, case, "shared" if case == "shared" else f"node{rank}", "ck.pt")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if rank == 0:
            torch.save({"w": torch.ones(3)}, path)
        elif case == "stale":
            torch.save({"w": torch.zeros(3)}, path)
        dist.barrier()
        try:
            require_same_file(path, rank)
            said[case] = None
        except RuntimeError as e:
            said[case] = str(e)
    return said
