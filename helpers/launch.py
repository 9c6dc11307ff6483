"""Run a function on N processes from a notebook, and get their results back (01, 02, 03).

``launch(fn, nprocs=2)`` is the course's notebook launcher, in the spirit of Accelerate's
``notebook_launcher`` and ``torch.multiprocessing.spawn``, with what a notebook needs on top:

- the backend is chosen for you (nccl with one GPU per process, gloo otherwise) and said;
- the rendezvous port is free by construction: the launcher opens the ``TCPStore`` itself on
  port 0, so two launches at once never collide;
- the *spawn* start method, safe after CUDA has been initialised in the notebook;
- each rank's return value comes back to the notebook, its prints are relayed to the cell;
- when a rank raises, every other rank is ended at once and the notebook gets the failing
  rank's traceback; a hung launch is ended by ``timeout``; no process is left behind.

``fn`` is called as ``fn(rank, world_size, *args)`` with ``torch.distributed`` already
initialised. It must be importable by the new processes: define it in a module (a file next to
the notebook, or ``helpers``), not in a notebook cell (see notebook 03).
"""
from __future__ import annotations

import io
import os
import pickle
import queue as queue_mod
import sys
import time
import traceback
from datetime import timedelta
from typing import Any, Callable

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from .device import hardware_label
from .ranks import choose_backend, local_device

HOST = "127.0.0.1"


class LaunchError(RuntimeError):
    """A rank failed; the message carries its traceback."""

    def __init__(self, rank: int, details: str) -> None:
        self.rank = rank
        self.details = details
        super().__init__(f"rank {rank} failed; its traceback:\n{details}")


def check_importable(fn: Callable) -> None:
    """Refuse a function that spawned processes cannot import, saying how to fix it (03)."""
    if not callable(fn):
        raise TypeError(f"launch() needs a function to run, got {type(fn).__name__}")
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", "")
    interactive_main = module == "__main__" and not hasattr(sys.modules.get("__main__"), "__file__")
    if interactive_main or "<locals>" in qualname or "<lambda>" in qualname:
        raise ValueError(
            f"{qualname or fn!r} is defined in a notebook cell (module __main__) or inside another function, so a "
            "spawned process cannot import it (it would fail with \"Can't get attribute ... on <module '__main__'\"). "
            "Put it in a file, e.g. with %%writefile my_worker.py, then `from my_worker import ...`.")


class _Relay(io.TextIOBase):
    """A file-like object in a rank that sends what is written to the notebook's process."""

    def __init__(self, q: Any, rank: int, stream: str) -> None:
        self.q, self.rank, self.stream = q, rank, stream

    def write(self, s: str) -> int:
        if s:
            self.q.put(("out", self.rank, (self.stream, s)))
        return len(s)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def _entry(fn_bytes: bytes, rank: int, world_size: int, backend: str, port: int, threads: int,
           timeout_s: float, args: tuple, q: Any, relay: bool) -> None:
    if relay:
        sys.stdout = _Relay(q, rank, "stdout")
        sys.stderr = _Relay(q, rank, "stderr")
    try:
        torch.set_num_threads(threads)
        os.environ.update(MASTER_ADDR=HOST, MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world_size),
                          LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world_size), OMP_NUM_THREADS=str(threads))
        device = local_device(backend)  # one machine: the local rank is the rank
        if device.type == "cuda":
            torch.cuda.set_device(device)
        fn = pickle.loads(fn_bytes)  # here, not in spawn's bootstrap, so an import failure is reported
        store = dist.TCPStore(HOST, port, world_size, False, timedelta(seconds=timeout_s))
        dist.init_process_group(backend, store=store, rank=rank, world_size=world_size,
                                timeout=timedelta(seconds=timeout_s))
        result = fn(rank, world_size, *args)
        buf = io.BytesIO()
        torch.save(result, buf)
        q.put(("ok", rank, buf.getvalue()))
    except BaseException:
        q.put(("error", rank, traceback.format_exc()))
        raise SystemExit(1)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
        sys.stdout.flush()
        sys.stderr.flush()


def _end(procs: list) -> None:
    """Terminate, then kill, every process still alive; reap them all."""
    procs = [p for p in procs if p.pid is not None]  # started ones only
    for p in procs:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + 3
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join(2)


def launch(fn: Callable, nprocs: int = 2, args: tuple = (), backend: str | None = None, timeout: float = 120.0,
           threads: int = 1, verbose: bool = True, relay_output: bool = True, check: bool = True) -> list[Any]:
    """Run ``fn(rank, world_size, *args)`` on ``nprocs`` processes; return their results by rank (01–03).

    ``threads`` is ``torch.set_num_threads`` in every rank (1 by default, so that N processes on
    N cores do not fight over them). ``timeout`` (seconds) bounds the whole launch. Raises
    :class:`LaunchError` with the failing rank's traceback, or ``TimeoutError``; in both cases
    every rank has been ended before it raises. ``check=False`` skips the importability check,
    to show the error spawn itself gives.
    """
    backend = choose_backend(nprocs, backend)
    if check:
        check_importable(fn)
    if not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be a positive int, got {threads!r}")
    if not (isinstance(timeout, (int, float)) and timeout > 0):
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    try:
        fn_bytes = pickle.dumps(fn)
        pickle.dumps(args)
    except Exception as e:
        raise TypeError(f"launch() needs a picklable function and args to reach the processes: {e}") from e
    if verbose:
        print(f"launching {nprocs} process{'es' if nprocs > 1 else ''} (backend {backend}, "
              f"{threads} thread{'s' if threads > 1 else ''} each)")
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    store = dist.TCPStore(HOST, 0, None, True, timedelta(seconds=timeout), wait_for_workers=False)
    procs = [ctx.Process(target=_entry, daemon=True, name=f"rank{r}",
                         args=(fn_bytes, r, nprocs, backend, store.port, threads, timeout, args, q, relay_output))
             for r in range(nprocs)]
    results: dict[int, Any] = {}
    failure: tuple[int, str] | None = None
    deadline = time.monotonic() + timeout
    try:
        for p in procs:
            p.start()
        while len(results) < nprocs and failure is None:
            try:
                kind, rank, payload = q.get(timeout=0.05)
            except queue_mod.Empty:
                dead = [(r, p.exitcode) for r, p in enumerate(procs) if p.exitcode not in (None, 0) and r not in results]
                if dead:
                    _drain_for_errors(q, results)  # a traceback may still be in flight
                    failure = failure or (dead[0][0], f"process exited with code {dead[0][1]} without a traceback "
                                                      "(killed, out of memory, or a crash in native code)")
                elif time.monotonic() > deadline:
                    running = [r for r in range(nprocs) if r not in results]
                    raise TimeoutError(
                        f"launch did not finish within {timeout:g} s; rank(s) {running} still running were ended. "
                        "A rank may be waiting in a collective (send/recv, all_reduce) that another rank never "
                        "reaches; raise timeout= if the work is just slow.")
                continue
            if kind == "out":
                _relay(rank, *payload)
            elif kind == "ok":
                results[rank] = torch.load(io.BytesIO(payload), weights_only=False)
            else:
                failure = (rank, payload)
        if failure is not None:
            raise LaunchError(*failure)
    finally:
        _end(procs)
        _flush_output(q)
        q.close()
        q.join_thread()
        del store
    return [results[r] for r in range(nprocs)]


def describe_launch(nprocs: int, threads: int = 1, backend: str | None = None) -> str:
    """What ``launch(fn, nprocs)`` computes on, for a figure's label (01, 03): devices, processes, threads."""
    backend = choose_backend(nprocs, backend)
    if backend == "nccl":
        return f"{hardware_label('cuda:0')}, {nprocs} processes on cuda:0…{nprocs - 1} (nccl)"
    return f"{hardware_label('cpu', processes=nprocs, threads=threads)} (gloo)"


def _relay(rank: int, stream: str, text: str) -> None:
    out = sys.stderr if stream == "stderr" else sys.stdout
    out.write(text)
    out.flush()


def _drain_for_errors(q: Any, results: dict) -> None:
    time.sleep(0.2)
    while True:
        try:
            kind, rank, payload = q.get_nowait()
        except queue_mod.Empty:
            return
        if kind == "out":
            _relay(rank, *payload)
        elif kind == "error":
            raise LaunchError(rank, payload)
        elif kind == "ok":
            results[rank] = torch.load(io.BytesIO(payload), weights_only=False)


def _flush_output(q: Any) -> None:
    while True:
        try:
            kind, rank, payload = q.get_nowait()
        except (queue_mod.Empty, OSError, ValueError):
            return
        if kind == "out":
            _relay(rank, *payload)
