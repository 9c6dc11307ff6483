"""Collectives by hand: the code notebook 08 teaches (its recipe).

- A ring all-reduce built from point-to-point messages, twice: :func:`ring_all_reduce_naive`
  passes the whole tensor around the ring; :func:`ring_all_reduce` is the bandwidth-optimal one,
  :func:`ring_reduce_scatter` then :func:`ring_all_gather`, each ``n − 1`` steps of ``size / n``.
- DDP rebuilt from gradient hooks, in three steps: :func:`allreduce_gradients` (one all-reduce
  per parameter, after backward), :func:`allreduce_gradients_bucketed` (a few flat buckets) and
  :class:`OverlappedDDP` (buckets all-reduced asynchronously from the hooks, during backward).

Every function runs inside a launched process (``fn(rank, world_size, …)``) and works on the
tensor's own device, so the same code runs under gloo (CPU) and nccl (GPUs).
"""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

__all__ = ["ring_neighbours", "ring_step", "owned_chunk", "recv_buffer", "ring_all_reduce_naive", "ring_reduce_scatter", "ring_all_gather",
           "ring_all_reduce", "broadcast_state", "allreduce_gradients",
           "allreduce_gradients_bucketed", "make_buckets", "OverlappedDDP"]


def ring_neighbours() -> tuple[int, int]:
    """This rank's neighbours on the ring: (left, right), i.e. whom it receives from and sends to (08)."""
    rank, n = dist.get_rank(), dist.get_world_size()
    return (rank - 1) % n, (rank + 1) % n


def ring_step(send: torch.Tensor, recv: torch.Tensor) -> None:
    """One ring step: send to the right and receive from the left, both posted together in one batch (08).

    Posted one after the other, under nccl a rank's receive may queue behind its send, which may wait for
    the neighbour's receive, queued behind that rank's send: every rank waits. nccl asks for calls that
    must progress together to be grouped: https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/usage/p2p.html
    """
    left, right = ring_neighbours()
    for req in dist.batch_isend_irecv([dist.P2POp(dist.isend, send, right), dist.P2POp(dist.irecv, recv, left)]):
        req.wait()


_BUFFERS: dict[tuple, torch.Tensor] = {}


def recv_buffer(like: torch.Tensor) -> torch.Tensor:
    """A receive buffer shaped like ``like``: one per (shape, dtype, device), allocated on first use and kept (08).

    A fresh large tensor each call would be allocated (and its pages touched) again every time.
    Every size keeps its own buffer for the life of the process, so a sweep that takes turns over
    its sizes allocates each buffer once, in its warm-up call, and no timed call pays for one
    (as the separately timed ring step, whose receive buffer is allocated before it is timed).
    """
    key = (tuple(like.shape), like.dtype, like.device)
    if key not in _BUFFERS:
        _BUFFERS[key] = torch.empty_like(like, memory_format=torch.contiguous_format)
    return _BUFFERS[key]


def ring_all_reduce_naive(t: torch.Tensor) -> torch.Tensor:
    """Sum ``t`` over all ranks, in place, by passing whole tensors around the ring: n − 1 steps of size (08).

    Each step every rank forwards what it received last and adds what arrives. Correct, but each
    rank sends ``(n − 1) · size``: the traffic grows with the number of ranks.
    """
    send, recv = t.detach().clone(), torch.empty_like(t)
    for _ in range(dist.get_world_size() - 1):
        ring_step(send, recv)
        t += recv
        send, recv = recv, send
    return t


def owned_chunk(rank: int, world_size: int) -> int:
    """The chunk a rank holds fully reduced after :func:`ring_reduce_scatter`: the one it added into last (08)."""
    return (rank - (world_size - 2) - 1) % world_size if world_size > 1 else 0


def ring_reduce_scatter(t: torch.Tensor) -> int:
    """The first half of the ring all-reduce: n − 1 steps after which each rank owns one summed chunk (08).

    ``t`` (contiguous) is cut into ``n`` chunks. At step ``s`` rank ``r`` sends its running sum of
    chunk ``r − s`` to the right and adds what arrives from the left into chunk ``r − s − 1``.
    Returns the index of the chunk that then holds the sum over all ranks; for n > 1 it is never
    chunk ``rank``, where ``dist.reduce_scatter`` puts rank ``r``'s piece.
    """
    rank, n = dist.get_rank(), dist.get_world_size()
    chunks = t.view(-1).tensor_split(n)  # views: the sums land in t itself
    recv = recv_buffer(chunks[0])
    recv_i = rank  # one rank: its own chunk is already the sum
    for s in range(n - 1):
        send_i, recv_i = (rank - s) % n, (rank - s - 1) % n
        buf = recv[:chunks[recv_i].numel()]
        ring_step(chunks[send_i], buf)
        chunks[recv_i].add_(buf)
    return recv_i  # complete: every rank's contribution has been added into it


def ring_all_gather(t: torch.Tensor, owned: int) -> torch.Tensor:
    """The second half: n − 1 steps that pass each rank's finished chunk around the ring (08).

    At step ``s`` rank ``r`` sends chunk ``owned − s`` and receives chunk ``owned − s − 1``,
    copying it in place of its partial sum. Afterwards every rank holds every chunk.
    """
    n = dist.get_world_size()
    chunks = t.view(-1).tensor_split(n)
    for s in range(n - 1):
        ring_step(chunks[(owned - s) % n], chunks[(owned - s - 1) % n])
    return t


def ring_all_reduce(t: torch.Tensor) -> torch.Tensor:
    """Bandwidth-optimal ring all-reduce of ``t`` in place: reduce-scatter, then all-gather (08).

    2(n − 1) steps, each sending ``size / n``: every rank sends ``2 (n − 1) / n · size`` in all,
    nearly ``2 · size`` however many ranks there are. nccl implements a ring like it among other
    algorithms (Tree, NVLS, CollNet, …) and picks one per call unless ``NCCL_ALGO`` restricts it:
    https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-algo
    """
    if not t.is_contiguous():
        raise ValueError("ring_all_reduce works on a contiguous tensor; pass t.contiguous() and copy back")
    return ring_all_gather(t, ring_reduce_scatter(t))


def broadcast_state(model: nn.Module, src: int = 0) -> None:
    """Make every rank start from rank ``src``'s parameters and buffers, as DDP does when it wraps a model (08).

    Buffers too: BatchNorm's running statistics are part of the model, and DDP broadcasts them
    when it wraps the model (``init_sync=True``, its default).
    """
    for t in [*model.parameters(), *model.buffers()]:
        dist.broadcast(t.data, src)



def allreduce_gradients(model: nn.Module) -> None:
    """DDP v1: after ``backward()``, average each parameter's gradient over the ranks, one all-reduce each (08).

    A parameter without a gradient is skipped: every rank must then lack it alike, else the ranks
    call different numbers of all-reduces (DDP's ``find_unused_parameters`` exists for that case).
    """
    n = dist.get_world_size()
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad)
            p.grad.div_(n)


def make_buckets(params: list[nn.Parameter], bucket_bytes: float) -> list[list[nn.Parameter]]:
    """Group parameters into buckets, last layer first (backward's order), each closed once it holds ``bucket_bytes`` (08).

    The last bucket holds what remains and may be smaller. DDP closes its buckets the same way
    (``bucket_cap_mb``; plus a 1 MiB first bucket, section 4, and one bucket list per dtype and
    device: ``compute_bucket_assignment_by_size`` in its reducer), from its rebuild after the first
    iteration: with ``find_unused_parameters=False`` that iteration has one bucket holding every
    parameter (``compute_bucket_size_limits``). No bucket is empty:
    ``bucket_bytes=0`` gives one bucket per parameter, no parameters no bucket.
    """
    if isinstance(bucket_bytes, bool) or not isinstance(bucket_bytes, (int, float)) or not bucket_bytes >= 0:
        raise ValueError(f"bucket_bytes must be a number >= 0 (bytes per bucket), got {bucket_bytes!r}")
    buckets: list[list[nn.Parameter]] = []
    size = 0
    for p in reversed(params):
        if not buckets or size >= bucket_bytes:
            buckets.append([])
            size = 0
        buckets[-1].append(p)
        size += p.numel() * p.element_size()
    return buckets


def allreduce_gradients_bucketed(model: nn.Module, bucket_bytes: int = 2**20) -> None:
    """DDP v2: after ``backward()``, flatten the gradients into a few buckets and all-reduce each once (08).

    Fewer, larger messages: each all-reduce pays the latency α once for many parameters.
    """
    n = dist.get_world_size()
    params = [p for p in model.parameters() if p.grad is not None]
    for bucket in make_buckets(params, bucket_bytes):
        flat = torch.cat([p.grad.view(-1) for p in bucket])
        dist.all_reduce(flat)
        flat.div_(n)
        for p, g in zip(bucket, flat.split([p.numel() for p in bucket])):
            p.grad.copy_(g.view_as(p))


class OverlappedDDP:
    """DDP v3: each bucket is all-reduced asynchronously as soon as backward has produced its gradients (08).

    ``register_post_accumulate_grad_hook`` tells us when a parameter's ``.grad`` is final; when a
    bucket's last gradient arrives, its all-reduce is started (``async_op=True``) and the hook
    returns, so that backward can go on with earlier layers while it runs: that is the design;
    whether the two really overlap depends on the backend and on the CPU cores free (notebook 08 counts
    the all-reduces already finished when backward returns). Call the wrapper as the model (it first copies rank 0's buffers to
    every rank, as DDP does at each forward by default: ``forward_sync_buffers``); call :meth:`finish` after ``backward()``, before ``optimizer.step()``:
    it waits for the all-reduces and writes the averaged gradients back. Several backward passes
    before ``finish()`` each send the buckets again, so the gradients end up summed over the passes
    and averaged over the ranks, as with DDP.
    """

    def __init__(self, model: nn.Module, bucket_bytes: int = 2**20) -> None:
        broadcast_state(model)
        self.model = model
        self.buckets = make_buckets([p for p in model.parameters() if p.requires_grad], bucket_bytes)
        self.bucket_of = {p: i for i, b in enumerate(self.buckets) for p in b}
        self.arrived: list[set[int]] = [set() for _ in self.buckets]  # ids of the parameters whose gradient is in
        self.seen: set[int] = set()  # every parameter whose gradient arrived since the last finish()
        self.pending: list[tuple[dist.Work, torch.Tensor, int]] = []
        for p in self.bucket_of:
            p.register_post_accumulate_grad_hook(self._grad_ready)

    def __call__(self, *args, **kwargs):
        for b in self.model.buffers():  # DDP's forward_sync_buffers: rank 0's running statistics everywhere
            dist.broadcast(b.data, 0)
        return self.model(*args, **kwargs)

    def _grad_ready(self, p: nn.Parameter) -> None:
        i = self.bucket_of[p]
        self.arrived[i].add(id(p))
        self.seen.add(id(p))
        if len(self.arrived[i]) == len(self.buckets[i]):  # the bucket is complete: send it now, during backward
            self.arrived[i].clear()  # a second backward before finish() sends it again
            flat = torch.cat([q.grad.view(-1) for q in self.buckets[i]]).div_(dist.get_world_size())
            self.pending.append((dist.all_reduce(flat, async_op=True), flat, i))

    def finish(self) -> None:
        """Wait for every bucket's all-reduce and copy the averaged gradients back into ``.grad`` (08).

        Raises RuntimeError if backward gave some trainable parameters no gradient: their buckets
        were never complete, so the other gradients in them were never averaged (DDP refuses this
        too, unless it is built with ``find_unused_parameters=True``, or ``static_graph=True`` when the same
        parameters go unused every step).
        """
        for work, flat, i in self.pending:
            work.wait()
            bucket = self.buckets[i]
            for p, g in zip(bucket, flat.split([p.numel() for p in bucket])):
                p.grad.copy_(g.view_as(p))
        self.pending.clear()
        names = {p: name for name, p in self.model.named_parameters()}
        missing = [names[p] for p in self.bucket_of if self.seen and id(p) not in self.seen]
        self.arrived, self.seen = [set() for _ in self.buckets], set()
        if missing:
            raise RuntimeError(
                f"these trainable parameters got no gradient in backward: {', '.join(missing)}. Their buckets were "
                "never complete, so the gradients sharing those buckets were not averaged and the ranks would drift apart. "
                "Use every trainable parameter in the loss, or freeze the unused ones with requires_grad_(False) "
                "before wrapping the model. DDP refuses this too, unless built with find_unused_parameters=True (or "
                "static_graph=True, when the same parameters go unused every step), but only at the next forward "
                "(\"Expected to have finished reduction in the prior iteration\").")
