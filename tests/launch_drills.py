"""Workers for the launcher's failure drills: ranks that hang, die, ignore SIGTERM, leave children behind
(tests/test_launch.py, test_launch_faults.py, test_faults.py, test_pipeline.py, and test_ddp.py's checkpoint drill).

Only the tests run these; the workers a notebook runs are in helpers/launching/workers.py.
Spawned ranks import this module by name: tests/ is on the path of the test process (pyproject's
``pythonpath``), and the fork server (or spawn) gives every rank the path of the process that started it.
A script or kernel that a test starts puts tests/ on its path itself (``TESTS``).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from multiprocessing import connection
from pathlib import Path

import torch
import torch.distributed as dist

from helpers.launching.ranks import local_device

TESTS = str(Path(__file__).resolve().parent)  # for a script or kernel a drill starts: sys.path.insert(0, TESTS)


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


def note_order(rank: int, world_size: int) -> int:
    """Write "fn" to the file named by BOG_ORDER_FILE: when the launched function ran, among the rank's steps."""
    with open(os.environ["BOG_ORDER_FILE"], "a") as f:
        f.write("fn\n")
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


def parent_and_env(rank: int, world_size: int, name: str) -> dict:
    """This rank's parent process and the value of environment variable ``name`` in it."""
    return {"ppid": os.getppid(), "env": os.environ.get(name)}


def print_and_return(rank: int, world_size: int, message: str = "hello") -> str:
    """Print from every rank (relayed to the launching process) and return the message with the rank."""
    print(f"rank {rank}: {message}", flush=True)
    return f"{message} from {rank}"


def hang_on_rank(rank: int, world_size: int, bad_rank: int = 1) -> int:
    """Rank ``bad_rank`` sleeps forever (a hung rank); the launcher's timeout must end it."""
    if rank == bad_rank:
        while True:
            time.sleep(1)
    return rank


def failing_stage(rank: int, world_size: int) -> int:
    """A 2-stage pipeline whose second stage raises after its first receive, while stage 0 waits (01's failure)."""
    buf = torch.zeros(1024, device=local_device())
    if rank == 0:
        dist.send(buf, 1)
        dist.recv(buf, 1)  # never answered: stage 1 has crashed
    else:
        dist.recv(buf, 0)
        raise RuntimeError("stage 1 crashed in its forward")
    return rank


def die_on_rank(rank: int, world_size: int, bad_rank: int = 1, how: str = "SIGKILL") -> int:
    """Rank ``bad_rank`` dies without a traceback while the others wait in a collective.

    ``how``: a signal name (``"SIGKILL"``, as the out-of-memory killer sends; ``"SIGSEGV"``, as a
    crash in native code ends) or ``"exit0"`` (``os._exit(0)``: gone, and with a success code).
    """
    if rank == bad_rank:
        time.sleep(0.3)  # let the others reach the collective first
        if how == "exit0":
            os._exit(0)
        os.kill(os.getpid(), getattr(signal, how))
    dist.barrier()
    return rank


def start_child_and_return(rank: int, world_size: int, seconds: float = 300) -> int:
    """Start a long-running subprocess and return at once: the launch must not leave it behind."""
    child = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({seconds})"])
    return child.pid


def ignore_sigterm_and_hang(rank: int, world_size: int, report_dir: str | None = None) -> int:
    """A rank that ignores SIGTERM and never returns: only SIGKILL ends it.

    With ``report_dir``, it writes ``ready.<rank>`` there once it is running, and ``sigterm.<rank>``
    each time a SIGTERM arrives, so a drill can act on events instead of guessing times.
    """
    def note(name: str) -> None:
        if report_dir:
            (Path(report_dir) / f"{name}.{rank}").touch()

    signal.signal(signal.SIGTERM, lambda *_: note("sigterm"))
    note("ready")
    while True:
        time.sleep(1)


def print_pid_and_hang(rank: int, world_size: int) -> int:
    """Print this rank's process id, then hang: for drills that kill the launching process."""
    print(f"rank {rank} pid {os.getpid()}", flush=True)
    while True:
        time.sleep(1)
