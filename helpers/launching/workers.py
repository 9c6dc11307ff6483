"""Small worker functions for launched processes: demonstrations and failure drills (03, tests).

Launched processes import the function they run, so workers live in a module like this one.
Each is called as ``fn(rank, world_size, *args)`` by :func:`helpers.launching.launcher.launch`.
"""
from __future__ import annotations

import os
import time

import torch
import torch.distributed as dist

from .ranks import local_device


def whoami(rank: int, world_size: int) -> dict:
    """Rank, world size, backend and process id of each rank, and the device its process group is bound to (03, 09)."""
    bound = getattr(dist.group.WORLD, "bound_device_id", None)
    return {"rank": rank, "world_size": world_size, "backend": dist.get_backend(), "pid": os.getpid(),
            "threads": torch.get_num_threads(), "bound_device": None if bound is None else str(bound)}


def parent_and_env(rank: int, world_size: int, name: str) -> dict:
    """This rank's parent process and the value of environment variable ``name`` in it (tests)."""
    return {"ppid": os.getppid(), "env": os.environ.get(name)}


def all_reduce_sum(rank: int, world_size: int) -> float:
    """Each rank contributes rank+1; all_reduce sums them: every rank returns n(n+1)/2 (03)."""
    t = torch.tensor([float(rank + 1)], device=local_device())  # nccl reduces GPU tensors only
    dist.all_reduce(t)
    return t.item()


def fail_on_rank(rank: int, world_size: int, bad_rank: int = 1) -> int:
    """Rank ``bad_rank`` raises; the others wait in a collective that will never complete (failure drill)."""
    if rank == bad_rank:
        raise ValueError(f"rank {rank} hit a bug on purpose")
    dist.barrier()
    return rank


def hang_on_rank(rank: int, world_size: int, bad_rank: int = 1) -> int:
    """Rank ``bad_rank`` sleeps forever (a hung rank); the launcher's timeout must end it (failure drill)."""
    if rank == bad_rank:
        while True:
            time.sleep(1)
    return rank


def print_and_return(rank: int, world_size: int, message: str = "hello") -> str:
    """Print from every rank (relayed to the notebook) and return the message with the rank (03, tests)."""
    print(f"rank {rank}: {message}", flush=True)
    return f"{message} from {rank}"


def failing_stage(rank: int, world_size: int) -> int:
    """A 2-stage pipeline whose second stage raises after its first receive, while stage 0 waits (01 drill)."""
    buf = torch.zeros(1024, device=local_device())
    if rank == 0:
        dist.send(buf, 1)
        dist.recv(buf, 1)  # never answered: stage 1 has crashed
    else:
        dist.recv(buf, 0)
        raise RuntimeError("stage 1 crashed in its forward")
    return rank


def bars_worker(rank: int, world_size: int, steps: int = 20) -> bool:
    """Each rank loops with a tqdm bar that only rank 0 draws; returns whether this rank drew (05)."""
    from tqdm.auto import tqdm

    bar = tqdm(range(steps), desc=f"rank {rank}", disable=rank != 0)
    drew = not bar.disable  # read it now: close() sets disable
    for _ in bar:
        time.sleep(0.01)
    return drew


def die_on_rank(rank: int, world_size: int, bad_rank: int = 1, how: str = "SIGKILL") -> int:
    """Rank ``bad_rank`` dies without a traceback while the others wait in a collective (failure drill).

    ``how``: a signal name (``"SIGKILL"``, as the out-of-memory killer sends; ``"SIGSEGV"``, as a
    crash in native code ends) or ``"exit0"`` (``os._exit(0)``: gone, and with a success code).
    """
    import signal

    if rank == bad_rank:
        time.sleep(0.3)  # let the others reach the collective first
        if how == "exit0":
            os._exit(0)
        os.kill(os.getpid(), getattr(signal, how))
    dist.barrier()
    return rank


def start_child_and_return(rank: int, world_size: int, seconds: float = 300) -> int:
    """Start a long-running subprocess and return at once: the launch must not leave it behind (failure drill)."""
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({seconds})"])
    return child.pid


def ignore_sigterm_and_hang(rank: int, world_size: int, report_dir: str | None = None) -> int:
    """A rank that ignores SIGTERM and never returns: only SIGKILL ends it (failure drill).

    With ``report_dir``, it writes ``ready.<rank>`` there once it is running, and ``sigterm.<rank>``
    each time a SIGTERM arrives, so a drill can act on events instead of guessing times.
    """
    import signal
    from pathlib import Path

    def note(name: str) -> None:
        if report_dir:
            (Path(report_dir) / f"{name}.{rank}").touch()

    signal.signal(signal.SIGTERM, lambda *_: note("sigterm"))
    note("ready")
    while True:
        time.sleep(1)


def print_pid_and_hang(rank: int, world_size: int) -> int:
    """Print this rank's process id, then hang: for drills that kill the launching process (failure drill)."""
    print(f"rank {rank} pid {os.getpid()}", flush=True)
    while True:
        time.sleep(1)
