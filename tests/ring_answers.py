"""Answers to notebook 08's code exercise (a ring reduce-scatter), right and plausibly wrong, with what the check says
about each (tests/test_collectives_ring_exercise.py).

Launched ranks import a function by its module's name, so the answers live at module level in a module of their own."""
from __future__ import annotations

import torch

from torch.distributed import all_reduce as _all_reduce_imported  # noqa: E402  (bound before any check runs)


def returns_owned_chunk_only(t):
    """A half-done exercise: nothing sent, nothing summed (module level: the ranks import it)."""
    import torch.distributed as dist
    return (dist.get_rank() + 1) % dist.get_world_size()


def ring_that_leaves_rank_r_piece_r(t):
    """A right answer: the ring's schedule shifted by one, so rank r ends with chunk r complete."""
    import torch.distributed as dist
    rank, n = dist.get_rank(), dist.get_world_size()
    chunks = t.view(-1).tensor_split(n)
    buf = torch.empty_like(chunks[0])
    for s in range(n - 1):
        send_i, recv_i = (rank - s - 1) % n, (rank - s - 2) % n
        got = buf[:chunks[recv_i].numel()]
        req = dist.isend(chunks[send_i], (rank + 1) % n)
        dist.recv(got, (rank - 1) % n)
        req.wait()
        chunks[recv_i].add_(got)


def ring_with_batched_p2p(t):
    """Another right answer: each step as one batch_isend_irecv of a P2POp pair."""
    import torch.distributed as dist
    rank, n = dist.get_rank(), dist.get_world_size()
    chunks = t.view(-1).tensor_split(n)
    for s in range(n - 1):
        send_i, recv_i = (rank - s - 1) % n, (rank - s - 2) % n
        got = torch.empty_like(chunks[recv_i])
        ops = [dist.P2POp(dist.isend, chunks[send_i].clone(), (rank + 1) % n),
               dist.P2POp(dist.irecv, got, (rank - 1) % n)]
        for req in dist.batch_isend_irecv(ops):
            req.wait()
        chunks[recv_i].add_(got)


def ring_with_irecv_posted_before_a_blocking_send(t):
    """A right answer too: the receive is posted (irecv) before the blocking send, so no rank waits on a sender."""
    import torch.distributed as dist
    rank, n = dist.get_rank(), dist.get_world_size()
    chunks = t.view(-1).tensor_split(n)
    for s in range(n - 1):
        send_i, recv_i = (rank - s - 1) % n, (rank - s - 2) % n
        got = torch.empty_like(chunks[recv_i])
        req = dist.irecv(got, (rank - 1) % n)
        dist.send(chunks[send_i], (rank + 1) % n)
        req.wait()
        chunks[recv_i].add_(got)


def ring_with_blocking_send(t):
    """Wrong: the right schedule and sums, but each step a synchronous dist.send before dist.recv on every rank."""
    import torch.distributed as dist
    rank, n = dist.get_rank(), dist.get_world_size()
    chunks = t.view(-1).tensor_split(n)
    for s in range(n - 1):
        send_i, recv_i = (rank - s - 1) % n, (rank - s - 2) % n
        got = torch.empty_like(chunks[recv_i])
        dist.send(chunks[send_i], (rank + 1) % n)
        dist.recv(got, (rank - 1) % n)
        chunks[recv_i].add_(got)


def ring_with_isend_waited_at_once(t):
    """Wrong: isend, but waited on before the receive: the same as a blocking send."""
    import torch.distributed as dist
    rank, n = dist.get_rank(), dist.get_world_size()
    chunks = t.view(-1).tensor_split(n)
    for s in range(n - 1):
        send_i, recv_i = (rank - s - 1) % n, (rank - s - 2) % n
        got = torch.empty_like(chunks[recv_i])
        dist.isend(chunks[send_i], (rank + 1) % n).wait()
        dist.recv(got, (rank - 1) % n)
        chunks[recv_i].add_(got)


def ring_blocking_send_on_even_ranks_first(t):
    """Wrong: the classic blocking ring without deadlock on some backends: even ranks send first, odd ranks receive first."""
    import torch.distributed as dist
    rank, n = dist.get_rank(), dist.get_world_size()
    chunks = t.view(-1).tensor_split(n)
    for s in range(n - 1):
        send_i, recv_i = (rank - s - 1) % n, (rank - s - 2) % n
        got = torch.empty_like(chunks[recv_i])
        if rank % 2 == 0:
            dist.send(chunks[send_i].clone(), (rank + 1) % n)
            dist.recv(got, (rank - 1) % n)
        else:
            dist.recv(got, (rank - 1) % n)
            dist.send(chunks[send_i].clone(), (rank + 1) % n)
        chunks[recv_i].add_(got)


def plain_all_reduce(t):
    """Wrong: the collective itself; rank r's chunk r is then the full sum, as asked."""
    import torch.distributed as dist
    dist.all_reduce(t)


def all_reduce_imported_by_name(t):
    """Wrong: the same, through a name imported from torch.distributed at the module's top."""
    _all_reduce_imported(t)


def all_reduce_on_the_process_group(t):
    """Wrong: the collective through the process group object, past torch.distributed's functions."""
    from torch.distributed import distributed_c10d
    distributed_c10d._get_default_group().allreduce([t]).wait()


def ring_with_a_process_group_all_reduce_besides(t):
    """Wrong: a right ring's messages, but the result from the process group's all-reduce, past dist's functions."""
    from torch.distributed import distributed_c10d
    full = t.clone()
    distributed_c10d._get_default_group().allreduce([full]).wait()
    ring_that_leaves_rank_r_piece_r(t.clone())
    t.copy_(full)


def the_recipes_own_ring(t):
    """Wrong: the recipe's ring_reduce_scatter as it is: rank r ends with chunk r + 1 complete, not chunk r."""
    from helpers.collectives.recipe import ring_reduce_scatter
    ring_reduce_scatter(t)


def the_recipes_ring_then_one_more_step(t):
    """Wrong: the recipe's ring, then each rank passes its finished chunk right: right result, n steps."""
    import torch.distributed as dist

    from helpers.collectives.recipe import ring_reduce_scatter
    rank, n = dist.get_rank(), dist.get_world_size()
    chunks = t.view(-1).tensor_split(n)
    done = ring_reduce_scatter(t)
    req = dist.isend(chunks[done], (rank + 1) % n)
    dist.recv(chunks[rank], (rank - 1) % n)
    req.wait()


def ring_cut_by_chunk(t):
    """Wrong: the right schedule, but cut by t.chunk(n), whose pieces differ from tensor_split's (10 values, 4 ranks)."""
    import torch.distributed as dist
    rank, n = dist.get_rank(), dist.get_world_size()
    chunks = t.view(-1).chunk(n)
    for s in range(n - 1):
        send_i, recv_i = (rank - s - 1) % n, (rank - s - 2) % n
        got = torch.empty_like(chunks[recv_i])
        req = dist.isend(chunks[send_i], (rank + 1) % n)
        dist.recv(got, (rank - 1) % n)
        req.wait()
        chunks[recv_i].add_(got)


def ring_shift_hard_coded_for_4_ranks(t):
    """Wrong: the recipe's schedule shifted by + 3, which is − 1 only when n = 4: right on 4 ranks, wrong on 3."""
    import torch.distributed as dist
    rank, n = dist.get_rank(), dist.get_world_size()
    chunks = t.view(-1).tensor_split(n)
    for s in range(n - 1):
        send_i, recv_i = (rank - s + 3) % n, (rank - s + 2) % n
        got = torch.empty_like(chunks[recv_i])
        req = dist.isend(chunks[send_i], (rank + 1) % n)
        dist.recv(got, (rank - 1) % n)
        req.wait()
        chunks[recv_i].add_(got)


def direct_exchange(t):
    """Wrong (not a ring): every rank sends chunk j straight to rank j and sums what it receives."""
    import torch.distributed as dist
    rank, n = dist.get_rank(), dist.get_world_size()
    chunks = t.view(-1).tensor_split(n)
    reqs = [dist.isend(chunks[j], j) for j in range(n) if j != rank]
    for j in range(n):
        if j != rank:
            got = torch.empty_like(chunks[rank])
            dist.recv(got, j)
            chunks[rank].add_(got)
    for r in reqs:
        r.wait()


def naive_ring_whole_tensor(t):
    """Wrong: the naive ring (whole tensors round the ring): the right sums, n − 1 steps to the right, but not chunks."""
    from helpers.collectives.recipe import ring_all_reduce_naive
    ring_all_reduce_naive(t)


RIGHT = (ring_that_leaves_rank_r_piece_r, ring_with_batched_p2p, ring_with_irecv_posted_before_a_blocking_send)


WRONG = {  # each wrong answer, and what the check says about it
    plain_all_reduce: "dist.all_reduce, a collective",
    all_reduce_imported_by_name: "dist.all_reduce, a collective",
    all_reduce_on_the_process_group: "dist.ProcessGroup.allreduce, a collective",
    ring_with_a_process_group_all_reduce_besides: "dist.ProcessGroup.allreduce, a collective",
    the_recipes_own_ring: "rank r must end with piece r complete",
    the_recipes_ring_then_one_more_step: "sent 4 and received 4 messages",
    direct_exchange: "only to its right neighbour",
    naive_ring_whole_tensor: "is not one chunk summed",
    returns_owned_chunk_only: "sent 0 and received 0 messages",
    ring_cut_by_chunk: "is not one chunk summed",
    ring_blocking_send_on_even_ranks_first: "rank 0 waited for its send to finish",
}
