"""Run a function on N processes from a notebook, and get their results back (01, 02, 03).

``launch(fn, nprocs=2)`` is the course's notebook launcher, in the spirit of Accelerate's
``notebook_launcher`` and ``torch.multiprocessing.spawn``, with what a notebook needs on top:

- the backend is chosen for you (nccl with one GPU per process, gloo otherwise) and said;
- the rendezvous port is free by construction: the launcher opens the ``TCPStore`` itself on
  port 0, so two launches at once never collide;
- processes started by multiprocessing's *forkserver* on Linux (*spawn* elsewhere), both safe after
  CUDA has been initialised in the notebook; the fork server (one per process, started at the
  first forkserver start in it: the first launch, unless something else started it before) imports
  torch once and forks every rank from itself instead of each rank importing torch again;
- each rank's return value comes back to the notebook, its prints are relayed to the cell;
- when a rank fails, every other rank is ended and the notebook is told which rank is the cause
  and how (its traceback, or the signal that killed it; the rule: :meth:`.failures._Run.diagnose`),
  after up to ``SETTLE`` s more of listening, in case the cause arrives second; a hung launch is ended
  by ``timeout``; no process is left behind, not even one a rank started, and not when the
  kernel itself dies.

``fn`` is called as ``fn(rank, world_size, *args)`` with ``torch.distributed`` already
initialised. It must be importable by the new processes: define it in a module (a file next to
the notebook, or ``helpers``), not in a notebook cell (see notebook 03).
"""
from __future__ import annotations

import gc
import inspect
import io
import math
import multiprocessing
import os
import pickle
import queue
import sys
import time
import traceback
from datetime import timedelta
from typing import Any, Callable

import torch
import torch.distributed as dist

from ..core.device import hardware_label
from ..core.i18n import tr
from ..core.procs import end_processes
from . import relay
from .failures import LaunchError, Stopped, _Run  # noqa: F401  (raised here, importable from here)
from .ranks import choose_backend, local_device
from .startup import context, die_with_launcher


HOST = "127.0.0.1"
SETTLE = 1.0  # seconds to keep listening after a first failure: the root cause may arrive second


def check_importable(fn: Callable) -> None:
    """Refuse a function that spawned processes cannot import, saying how to fix it (03)."""
    if not callable(fn):
        raise TypeError(f"launch() needs a function to run, got {type(fn).__name__}")
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", "")
    interactive_main = module == "__main__" and not hasattr(sys.modules.get("__main__"), "__file__")
    if interactive_main or "<locals>" in qualname or "<lambda>" in qualname:
        raise ValueError(tr(
            "launch.not_importable",
            "{fn} is defined in a notebook cell (module __main__) or inside another function, so a "
            "spawned process cannot import it (it would fail with \"Can't get attribute ... on <module '__main__'\"). "
            "Put it in a file, e.g. with %%writefile my_worker.py, then `from my_worker import ...`.",
            fn=repr(qualname or fn)))


def _entry(fn_bytes: bytes, rank: int, world_size: int, backend: str, port: int, threads: int,
           timeout_s: float, args: tuple, conn: Any, relay_output: bool, env: dict,
           launcher: int) -> None:
    os.setpgrp()  # a process group of its own: the rank and anything it starts end together
    die_with_launcher(launcher)
    os.environ.clear()  # the launcher's environment now, not the fork server's from its start
    os.environ.update(env)
    dist.set_debug_level_from_env()  # TORCH_DISTRIBUTED_DEBUG: read at import, in the fork server; again here
    channel = relay.Channel(conn, rank)
    channel.send("started", os.getpid())
    pumps = relay.relay_output(channel) if relay_output else []
    message: tuple = ("error", "")
    try:
        torch.set_num_threads(threads)
        os.environ.update(MASTER_ADDR=HOST, MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world_size),
                          LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world_size), OMP_NUM_THREADS=str(threads))
        device = local_device(backend)  # one machine: the local rank is the rank
        if device.type == "cuda":
            torch.cuda.set_device(device)
        fn = pickle.loads(fn_bytes)  # here, not in spawn's bootstrap, so an import failure is reported
        store = dist.TCPStore(HOST, port, world_size, False, timedelta(seconds=timeout_s))
        # device_id: nccl binds this rank's communicator to its own GPU instead of guessing one from the rank
        dist.init_process_group(backend, store=store, rank=rank, world_size=world_size,
                                timeout=timedelta(seconds=timeout_s),
                                device_id=device if device.type == "cuda" else None)
        # every rank through init before any runs fn: a rank whose fn returned at once would tear down its
        # connections under one still connecting (gloo: "Connection closed by peer", seen under load)
        dist.barrier()
        result = fn(rank, world_size, *args)
        buf = io.BytesIO()
        torch.save(result, buf)
        message = ("ok", buf.getvalue())
    except BaseException:
        message = ("error", traceback.format_exc())
        channel.send(*message)  # at once: the launcher ends the other ranks while this one cleans up
    finally:
        if dist.is_initialized():
            gc.collect()  # free what holds the process group (a DDP reducer) while Python is still alive
            dist.destroy_process_group()
        sys.stdout.flush()
        sys.stderr.flush()
        relay.end_relay(pumps)
    if message[0] == "error":
        raise SystemExit(1)
    channel.send(*message)  # last: everything the rank printed has reached the launcher before its result


def _end(procs: list) -> None:
    """Terminate, then kill, every rank and its process group (what the rank started); reap them all.

    Pressing Stop again while this runs does not cut it short: the interrupt is re-raised once
    every process is gone (:func:`~helpers.core.procs.end_processes`).
    """
    started = [p for p in procs if p.pid is not None]
    end_processes(started, grace=3.0, groups=[p.pid for p in started])


def _refuse_during_bootstrap() -> None:
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        raise RuntimeError(tr(
            "launch.during_bootstrap",
            "launch() was called while this process was itself being started by launch(): your script calls "
            "launch() when it is imported. Every new process imports the script again, so put the call "
            "under `if __name__ == \"__main__\":`."))


def _check_run_arguments(threads: int, timeout: float) -> None:
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        raise ValueError(f"threads must be a positive int, got {threads!r}")
    if (not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not math.isfinite(timeout)
            or not 1 <= timeout <= 86400):
        raise ValueError(f"timeout must be a number of seconds from 1 to 86400 (a day), got {timeout!r}; starting "
                         "the processes alone takes about a second")


def _check_call(fn: Callable, args: Any) -> None:
    """Refuse, before any process starts, args that are not a tuple and a function that cannot take them."""
    if not isinstance(args, (tuple, list)):
        raise TypeError(tr(
            "launch.args_not_tuple",
            "args must be a tuple of the arguments that follow (rank, world_size), got {got!r}; for one argument "
            "write args=({got!r},) with the comma", got=args))
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin without a signature: let it run
        return
    try:
        signature.bind(0, 1, *args)
    except TypeError as e:
        raise TypeError(tr(
            "launch.bad_signature",
            "{fn} cannot be called as {fn}(rank, world_size, *args) with args={args!r} ({why}). A launched "
            "function takes the rank and the number of processes first, then the items of args.",
            fn=getattr(fn, "__name__", repr(fn)), args=tuple(args), why=e)) from None


def launch(fn: Callable, nprocs: int = 2, args: tuple = (), backend: str | None = None, timeout: float = 120.0,
           threads: int = 1, verbose: bool = True, relay_output: bool = True, check: bool = True) -> list[Any]:
    """Run ``fn(rank, world_size, *args)`` on ``nprocs`` processes; return their results by rank (01–03).

    ``threads`` is ``torch.set_num_threads`` in every rank (1 by default, so that N processes on
    N cores do not fight over them). ``timeout`` (seconds) bounds the whole launch. Raises
    :class:`LaunchError` naming the rank that is the cause (its traceback, or the signal that
    killed it; the rule: :meth:`.failures._Run.diagnose`), or ``TimeoutError``; in both cases
    every rank has been ended before it raises.
    ``check=False`` skips the importability check, to show the error the spawned processes hit.

    Example::

        from helpers.launching import launch, workers
        launch(workers.all_reduce_sum, nprocs=4)   # [10.0, 10.0, 10.0, 10.0]
    """
    _refuse_during_bootstrap()
    backend = choose_backend(nprocs, backend)
    if check:
        check_importable(fn)
    elif not callable(fn):
        raise TypeError(f"launch() needs a function to run, got {type(fn).__name__}")
    _check_call(fn, args)
    _check_run_arguments(threads, timeout)
    try:
        fn_bytes = pickle.dumps(fn)
        pickle.dumps(args)
    except Exception as e:
        raise TypeError(f"launch() needs a picklable function and args to reach the processes: {e}") from e
    cores = os.cpu_count() or 1
    if verbose:
        processes = (tr("launch.processes", "{n} processes", n=nprocs) if nprocs > 1 else
                     tr("launch.process", "{n} process", n=nprocs))
        each = (tr("launch.threads_each", "{n} threads each", n=threads) if threads > 1 else
                tr("launch.thread_each", "{n} thread each", n=threads))
        print(tr("launch.launching", "launching {processes} (backend {backend}, {each})", processes=processes,
                 backend=backend, each=each))
    if nprocs * threads > 2 * cores:
        print(f"note: {nprocs} process(es) × {threads} thread(s) on {cores} core(s): each gets about "
              f"{cores / (nprocs * threads):.2g} of a core, so this will be slow; timeout={timeout:g} s may be too short",
              file=sys.stderr)
    ctx = context()
    # world_size None: a store for any number of users, which does not wait for the ranks to connect (TCPStore docs)
    store = dist.TCPStore(HOST, 0, None, True, timedelta(seconds=timeout))
    pipes = [ctx.Pipe(duplex=False) for _ in range(nprocs)]
    procs = [ctx.Process(target=_entry, daemon=True, name=f"rank{r}",
                         args=(fn_bytes, r, nprocs, backend, store.port, threads, timeout, args, pipes[r][1],
                               relay_output, dict(os.environ), os.getpid()))
             for r in range(nprocs)]
    run, inbox = _Run(nprocs), queue.Queue()
    deadline = time.monotonic() + timeout
    readers = []
    try:
        for r, p in enumerate(procs):
            p.start()
            pipes[r][1].close()  # the rank holds the only writing end: when it dies, its pipe ends
            readers.append(relay.read_into(pipes[r][0], r, inbox))
        _wait_for_results(procs, run, inbox, deadline, timeout)  # a rank's result comes after its cleanup
    except KeyboardInterrupt:
        _end(procs)
        procs = []  # ended
        raise Stopped(tr("launch.stopped", "the {n} rank(s) of this launch were ended; nothing is left running.",
                         n=nprocs)) from None
    finally:
        _end(procs)
        for t in readers:
            t.join(1.0)  # every rank is gone: its pipe has ended, unless a process it started outlived it
        while not inbox.empty():
            run.receive(inbox, wait=0.0)
        relay.flush()
        for (r_end, w_end), t in zip(pipes, readers + [None] * nprocs):
            w_end.close()
            if t is None or not t.is_alive():  # a reader still waiting keeps its end: its fd is not reused
                r_end.close()
        del store
    return [run.results[r] for r in range(nprocs)]


def _wait_for_results(procs: list, run: _Run, inbox: "queue.Queue", deadline: float, timeout: float) -> None:
    """Relay what the ranks say until each has returned; raise at the first failure, or at the deadline."""
    nprocs = len(procs)
    while len(run.results) < nprocs:
        run.receive(inbox, wait=0.05)
        exits = {r: p.exitcode for r, p in enumerate(procs) if p.exitcode is not None}
        if run.failed(exits):
            settle = time.monotonic() + SETTLE  # let the root cause arrive, if it comes second
            while time.monotonic() < settle and any(p.exitcode is None for p in procs):
                run.receive(inbox, wait=0.05)
            run.receive(inbox, wait=0.2)
            raise run.diagnose({r: p.exitcode for r, p in enumerate(procs)})
        if time.monotonic() > deadline:
            running = [r for r in range(nprocs) if r not in run.results]
            raise TimeoutError(tr(
                "launch.timeout",
                "launch did not finish within {timeout:g} s; rank(s) {running} still running were ended. "
                "A rank may be waiting in a collective (send/recv, all_reduce) that another rank never "
                "reaches; raise timeout= if the work is just slow.", timeout=timeout, running=running))


def describe_launch(nprocs: int, threads: int = 1, backend: str | None = None) -> str:
    """What ``launch(fn, nprocs)`` computes on, for a figure's label (01, 03): devices, processes, threads."""
    backend = choose_backend(nprocs, backend)
    if backend == "nccl":
        return f"{hardware_label('cuda:0')}, {nprocs} processes on cuda:0…{nprocs - 1} (nccl)"
    return f"{hardware_label('cpu', processes=nprocs, threads=threads)} (gloo)"
