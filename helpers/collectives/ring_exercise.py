"""The check of notebook 08's code exercise: a ring reduce-scatter judged message by message (08).

Comparing the student's result with ``dist.reduce_scatter`` cannot tell a ring from a shortcut
(``dist.all_reduce`` gives the same numbers). So each rank runs the student's function under a
:class:`MessageLog`, which records every point-to-point message it sends and receives and every
collective it calls, and :func:`judge_ring` checks what a ring reduce-scatter must do: no
collective; n − 1 messages to the right neighbour and n − 1 from the left; each step's receive
posted before the rank waits for that step's send to finish (no blocking ``dist.send`` first), and every
send waited on before the function returns;
message ``k`` of rank ``r`` holds one chunk summed over ranks ``r, r − 1, …, r − k`` (what the rank holds after each
step); and at the end chunk ``r`` of ``t`` holds the sum over all ranks, as ``dist.reduce_scatter``
gives rank ``r`` piece ``r``.
"""
from __future__ import annotations

import contextlib
import functools
import random
import tempfile
from typing import Any, Callable, Sequence

import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d

from ..core.i18n import tr
from ..launching.launcher import LaunchError, check_importable, launch
from ..launching.ranks import local_device
from .stall import StallWatch, gave_up, watch_ranks

__all__ = ["MessageLog", "judge_ring", "waited_before_receiving", "reduce_scatter_check_worker", "run_reduce_scatter_check",
           "CHECK_SIZES", "CHECK_RANKS"]

_SENDS, _RECVS = ("send", "isend"), ("recv", "irecv")
_COLLECTIVES = ("all_reduce", "all_reduce_coalesced", "reduce", "broadcast", "all_gather", "all_gather_into_tensor",
                "all_gather_coalesced", "all_gather_object", "reduce_scatter", "reduce_scatter_tensor", "all_to_all",
                "all_to_all_single", "gather", "scatter", "gather_object", "scatter_object_list",
                "broadcast_object_list", "send_object_list", "recv_object_list", "_all_gather_base",
                "_reduce_scatter_base")
_PG_METHODS = ("allreduce", "allreduce_coalesced", "reduce", "broadcast", "allgather", "allgather_coalesced",
               "allgather_into_tensor_coalesced", "all_gather_single", "reduce_scatter", "reduce_scatter_single",
               "reduce_scatter_tensor_coalesced", "alltoall", "alltoall_base", "all_to_all_single", "gather",
               "gather_single", "scatter", "send", "recv", "recv_anysource")
CHECK_SIZES = (1003, 7, 10)  # 4 ranks: chunks of 251, 251, 251, 250 values, of 2, 2, 2, 1, and of 3, 3, 2, 2
# (10 values split by t.chunk(4) give 3, 3, 3, 1: a solution cut by chunk() is refused there)
CHECK_RANKS = (4, 3)  # two world sizes: a schedule hard-coded for 4 ranks is refused on 3


def _process_group_classes() -> list[type]:
    """``ProcessGroup`` and the backend classes whose methods do a collective's or a message's work, where they exist."""
    from torch._C import _distributed_c10d as c10d
    names = ("ProcessGroup", "Backend", "ProcessGroupGloo", "ProcessGroupNCCL", "ProcessGroupMPI", "ProcessGroupUCC")
    return [getattr(c10d, n) for n in names if isinstance(getattr(c10d, n, None), type)]


def _peer(args: tuple, kwargs: dict, key: str) -> int | None:
    peer = kwargs.get(key, args[1] if len(args) > 1 else None)
    return kwargs.get("group_" + key) if peer is None else peer


class MessageLog:
    """While active in a rank: every message sent (peer, a copy of the data), received (peer, size), and every
    collective called, by ``torch.distributed``'s functions however they were imported (08).

    Patches ``torch.distributed``, ``distributed_c10d``, the names in ``namespace`` (the student's
    module: ``from torch.distributed import isend``) and the process group's own methods
    (``pg.allreduce``, called past those functions; logged as ``ProcessGroup.allreduce``) for as long
    as the ``with`` lasts.
    """

    def __init__(self, namespace: dict | None = None) -> None:
        self.namespace = namespace if namespace is not None else {}
        self.sent: list[tuple[int | None, torch.Tensor]] = []
        self.received: list[tuple[int | None, int]] = []
        self.collectives: list[str] = []
        # in call order: ("recv", k) when receive k is posted (recv or irecv called), ("sent", k) when this rank
        # waited for send k to finish: at the end of dist.send, or when the Work that isend returned is waited on
        self.events: list[tuple[str, int]] = []
        self._depth = 0  # dist.send calls isend inside: log the outer call only
        self._undo: list[tuple[Any, str, Any]] = []

    def _note(self, name: str, args: tuple, kwargs: dict) -> None:
        if name in _SENDS:
            tensor = kwargs.get("tensor", args[0] if args else None)
            self.sent.append((_peer(args, kwargs, "dst"), tensor.detach().reshape(-1).cpu().clone()))
        elif name in _RECVS:
            tensor = kwargs.get("tensor", args[0] if args else None)
            self.received.append((_peer(args, kwargs, "src"), tensor.numel()))
        elif name == "batch_isend_irecv":
            for op in (args[0] if args else kwargs.get("p2p_op_list", [])):
                kind = getattr(op.op, "__name__", "")
                self._note(kind, (op.tensor, op.peer), {})
        else:
            self.collectives.append(name)

    def _wrap(self, name: str, original: Callable) -> Callable:
        @functools.wraps(original)
        def logged(*args: Any, **kwargs: Any) -> Any:
            if self._depth:
                return original(*args, **kwargs)
            self._depth += 1
            try:
                sends, recvs = len(self.sent), len(self.received)
                self._note(name, args, kwargs)
                self.events += [("recv", k) for k in range(recvs, len(self.received))]  # posted now
                result = original(*args, **kwargs)
            finally:
                self._depth -= 1
            posted = range(sends, len(self.sent))
            if name == "send":  # synchronous: it returns once its message is sent
                self.events += [("sent", k) for k in posted]
            elif posted and result is not None:  # isend's Work, or batch_isend_irecv's list of them
                works = result if isinstance(result, list) else [result]
                wrapped = [_WaitLog(w, self, posted) for w in works]
                return wrapped if isinstance(result, list) else wrapped[0]
            return result
        return logged

    def __enter__(self) -> MessageLog:
        wrappers: dict[int, Callable] = {}
        for name in (*_SENDS, *_RECVS, "batch_isend_irecv", *_COLLECTIVES):
            original = getattr(distributed_c10d, name, None) or getattr(dist, name, None)
            if original is None:
                continue
            wrappers[id(original)] = wrapper = self._wrap(name, original)
            for module in (dist, distributed_c10d):
                if getattr(module, name, None) is original:
                    self._undo.append((module, name, original))
                    setattr(module, name, wrapper)
        for key, value in list(self.namespace.items()):
            if id(value) in wrappers:
                self._undo.append((self.namespace, key, value))
                self.namespace[key] = wrappers[id(value)]
        for cls in _process_group_classes():  # past torch.distributed's functions: the process group's own methods
            for name in _PG_METHODS:
                original = cls.__dict__.get(name)
                if original is not None:
                    self._undo.append((cls, name, original))
                    setattr(cls, name, self._wrap(f"{cls.__name__}.{name}", original))
        return self

    def __exit__(self, *exc: object) -> None:
        for where, name, original in reversed(self._undo):
            if isinstance(where, dict):
                where[name] = original
            else:
                setattr(where, name, original)
        self._undo.clear()


class _WaitLog:
    """A Work (what isend returns) that notes in its :class:`MessageLog` when it is waited on; else the Work itself."""

    def __init__(self, work: Any, log: MessageLog, sends: range) -> None:
        self._work, self._log, self._sends = work, log, sends

    def wait(self, *args: Any, **kwargs: Any) -> Any:
        done = self._work.wait(*args, **kwargs)
        self._log.events += [("sent", k) for k in self._sends if ("sent", k) not in self._log.events]
        return done

    def is_completed(self) -> bool:   # polled until True: as good as a wait
        done = self._work.is_completed()
        if done:
            self._log.events += [("sent", k) for k in self._sends if ("sent", k) not in self._log.events]
        return done

    def __getattr__(self, name: str) -> Any:
        return getattr(self._work, name)


def waited_before_receiving(log: MessageLog) -> int | None:
    """The first step ``k`` (from 0) at which this rank waited for its send to finish before posting receive ``k`` (08).

    Such a rank relies on its message being taken before its neighbour has posted a receive; when
    every rank does it, each waits on a neighbour that is itself waiting to send, a deadlock wherever
    a send waits for its receiver (``dist.send`` is documented as synchronous; whether it returns
    before the receiver takes the message depends on the backend and the message size). ``None``
    when every step posted its receive first (``isend``, then ``recv``, then ``wait``).
    """
    at = {event: i for i, event in reversed(list(enumerate(log.events)))}  # first time of each event
    for k in range(min(len(log.sent), len(log.received))):
        if ("sent", k) in at and at["sent", k] < at.get(("recv", k), len(log.events)):
            return k
    return None


def _inputs(seed: int, numel: int, rank: int) -> torch.Tensor:
    return torch.randn(numel, generator=torch.Generator().manual_seed(seed * 1009 + rank))


def judge_ring(log: MessageLog, t: torch.Tensor, inputs: Sequence[torch.Tensor], rank: int) -> str | None:
    """What is wrong with this rank's ring reduce-scatter, from its messages and its result; None if nothing (08).

    ``inputs``: every rank's tensor before the call; ``t``: this rank's after it.
    """
    n = len(inputs)
    left, right = (rank - 1) % n, (rank + 1) % n
    tol = 1e-5 * (1 + max(float(x.abs().max()) for x in inputs) * n)
    if log.collectives:
        return tr("collectives.ex_collective", "it called dist.{name}, a collective: build the reduce-scatter from "
                  "dist.isend and dist.recv between ring neighbours only", name=log.collectives[0])
    for peer, _ in log.sent:
        if peer != right:
            return tr("collectives.ex_send_peer", "rank {rank} sent a message to rank {peer}; on a ring each rank sends "
                      "only to its right neighbour, rank {right}", rank=rank, peer=peer, right=right)
    for peer, _ in log.received:
        if peer is None:
            return tr("collectives.ex_recv_any", "rank {rank} received from any rank (no src); on a ring each rank "
                      "receives only from its left neighbour, rank {left}", rank=rank, left=left)
        if peer != left:
            return tr("collectives.ex_recv_peer", "rank {rank} received from rank {peer}; on a ring each rank receives "
                      "only from its left neighbour, rank {left}", rank=rank, peer=peer, left=left)
    if len(log.sent) != n - 1 or len(log.received) != n - 1:
        return tr("collectives.ex_count", "on {n} ranks, rank {rank} sent {sent} and received {received} messages; a "
                  "ring reduce-scatter takes n − 1 = {steps} steps of one chunk each", n=n, rank=rank,
                  sent=len(log.sent), received=len(log.received), steps=n - 1)
    blocked = waited_before_receiving(log)
    if blocked is not None:
        return tr("collectives.ex_blocking", "at step {step} rank {rank} waited for its send to finish before it "
                  "posted that step's receive (dist.send, or isend(...).wait() before dist.recv): when every rank does "
                  "so, each waits on a neighbour that is itself still sending, a deadlock wherever a send waits for its "
                  "receiver (whether it does depends on the backend and the message size). Start the send with "
                  "dist.isend, receive with dist.recv, then wait on the isend", step=blocked + 1, rank=rank)
    unwaited = [k for k in range(len(log.sent)) if ("sent", k) not in log.events]
    if unwaited:
        return tr("collectives.ex_unwaited", "rank {rank} returned without waiting on the isend of step {step}: until "
                  "its request is waited on, the send may not be finished and its chunk must not be changed. Wait on "
                  "each isend after that step's dist.recv", rank=rank, step=unwaited[0] + 1)
    partial = torch.zeros_like(inputs[0])
    for k, (_, data) in enumerate(log.sent):
        partial = partial + inputs[(rank - k) % n]  # ranks rank, rank − 1, …, rank − k
        if not any(c.numel() == data.numel() and float((c - data).abs().max()) <= tol for c in partial.tensor_split(n)):
            return tr("collectives.ex_step", "message {step} of rank {rank} (of {size} values) is not one chunk summed "
                      "over ranks {ranks}: at each step a rank sends one chunk of t.view(-1).tensor_split(n), holding "
                      "its own value plus everything received for that chunk so far", step=k + 1, rank=rank,
                      size=data.numel(), ranks=", ".join(str((rank - j) % n) for j in range(k + 1)))
    mine, total = t.detach().reshape(-1).cpu().tensor_split(n)[rank], sum(inputs).tensor_split(n)[rank]
    if mine.numel() != total.numel() or float((mine - total).abs().max()) > tol:
        return tr("collectives.ex_owned", "after the ring, chunk {rank} of t on rank {rank} is not the sum of chunk "
                  "{rank} over all ranks: like dist.reduce_scatter, rank r must end with piece r complete", rank=rank)
    return None


def reduce_scatter_check_worker(rank: int, world_size: int, fn: Callable, sizes: Sequence[int], seed: int,
                                folder: str | None = None, patience: float = 5.0, give_up: float = 20.0) -> list:
    """In each rank: run the student's ``fn(t)`` under a :class:`MessageLog` for each size; judge each run (08).

    With ``folder``, a :class:`~helpers.collectives.stall.StallWatch` notes there where this rank
    stands still for ``patience`` s, and ends it after ``give_up`` s (a deadlocked ring).
    """
    verdicts = []
    with StallWatch(folder, rank, patience, give_up) if folder else contextlib.nullcontext():
        for numel in sizes:
            inputs = [_inputs(seed, numel, r) for r in range(world_size)]  # every rank's, to judge the sums
            t = inputs[rank].clone().to(local_device())
            with MessageLog(getattr(fn, "__globals__", None)) as log:
                fn(t)
            verdicts.append((numel, judge_ring(log, t, inputs, rank)))
            dist.barrier()
    return verdicts


def run_reduce_scatter_check(fn: Callable, nprocs: int = 4, sizes: Sequence[int] = CHECK_SIZES, timeout: float = 60,
                             patience: float = 5.0, give_up: float = 20.0, numel: int | None = None) -> dict:
    """Judge a student's ring reduce-scatter ``fn(t)`` on ``nprocs`` ranks, message by message (08's code exercise).

    ``fn`` must live in a file (``%%writefile my_ring.py``), since the ranks import it; ``numel``
    is short for ``sizes=(numel,)``. Returns
    ``{"ok", "problem"}``: the first problem any rank's run showed (:func:`judge_ring`), with where.
    Ranks that stand still for ``patience`` s are said to wait, with where; after ``give_up`` s
    they are ended and :class:`~helpers.collectives.stall.RingDeadlock` (a ``TimeoutError``) says
    why, long before ``timeout``.
    """
    check_importable(fn)
    sizes = (numel,) if numel is not None else tuple(sizes)
    if not 0 < patience <= give_up:
        raise ValueError(f"need 0 < patience <= give_up (seconds), got patience={patience!r}, give_up={give_up!r}")
    seed = random.randrange(10**6)  # inputs no one can know in advance
    with tempfile.TemporaryDirectory(prefix="ring-check-") as folder, watch_ranks(folder, patience, give_up):
        try:
            ranks = launch(reduce_scatter_check_worker, nprocs, args=(fn, sizes, seed, folder, patience,
                                                                      give_up), timeout=timeout, verbose=False)
        except LaunchError:
            deadlock = gave_up(folder, give_up)
            if deadlock is None:
                raise
            raise deadlock from None
    for verdicts in ranks:
        for numel, problem in verdicts:
            if problem:
                return {"ok": False, "problem": tr("collectives.ex_where", "on {n} ranks with {numel} values, {problem}",
                                                   n=nprocs, numel=numel, problem=problem)}
    return {"ok": True, "problem": None}

