"""Notebook 08's recipe and instruments: the ring by hand, the cost model, DDP rebuilt, the code exercise's check."""
from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from helpers.collectives import (alpha_beta_time, bus_bandwidth, fit_alpha_beta, make_buckets, owned_chunk,
                                 ring_model_time, run_reduce_scatter_check, run_ring_check, two_point_alpha_beta)
from helpers.core.checks import verify

import torch.distributed as dist  # noqa: E402,I001  (the skeleton below uses it as the notebook's file does)


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


from torch.distributed import all_reduce as _all_reduce_imported  # noqa: E402  (bound before any check runs)


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
# ring_with_blocking_send and ring_with_isend_waited_at_once deadlock under gloo (its send waits for the receiver),
# where the stall watch refuses them (test_refusals.py); the rule that refuses them without a deadlock is tested below


def judge_every_answer(rank, world_size, fns):
    """In each rank: the check's own worker on every candidate in turn (one launch for all; the ranks import it)."""
    from helpers.collectives import CHECK_SIZES, reduce_scatter_check_worker
    return {fn.__name__: reduce_scatter_check_worker(rank, world_size, fn, CHECK_SIZES, seed=7) for fn in fns}


def test_the_ring_check_passes_rings_and_refuses_shortcuts_the_recipe_and_other_exchanges():
    from helpers.dist import launch
    ranks = launch(judge_every_answer, 4, args=((*RIGHT, *WRONG),), timeout=120, verbose=False)
    for fn in RIGHT:
        assert all(problem is None for r in ranks for _, problem in r[fn.__name__]), (fn.__name__, ranks)
    for fn, said in WRONG.items():
        problems = [problem for r in ranks for _, problem in r[fn.__name__] if problem]
        assert problems and said in problems[0], (fn.__name__, problems)


def test_the_notebooks_check_refuses_all_reduce_and_passes_a_ring():
    ok, msg = verify("08.reduce_scatter", plain_all_reduce)  # 4 ranks, two sizes, fresh inputs
    assert not ok and msg.startswith("❌") and "dist.all_reduce, a collective" in msg, msg
    ok, msg = verify("08.reduce_scatter", ring_that_leaves_rank_r_piece_r)
    assert ok and msg.startswith("✅"), msg
    assert run_reduce_scatter_check(ring_that_leaves_rank_r_piece_r, nprocs=3, numel=10)["ok"]


def test_the_notebooks_check_refuses_blocking_sends_that_do_not_deadlock_here():
    ok, msg = verify("08.reduce_scatter", ring_blocking_send_on_even_ranks_first)
    assert not ok and msg.startswith("❌") and "dist.send, or isend(...).wait() before dist.recv" in msg, msg


def test_a_send_waited_on_before_its_step_s_receive_is_found_from_the_order_of_events():
    from helpers.collectives import MessageLog, waited_before_receiving
    log = MessageLog()
    log.sent, log.received = [(1, torch.zeros(1))] * 2, [(3, 1)] * 2
    log.events = [("recv", 0), ("sent", 0), ("recv", 1), ("sent", 1)]    # isend, recv, wait: fine
    assert waited_before_receiving(log) is None
    log.events = [("recv", 0), ("sent", 0), ("sent", 1), ("recv", 1)]    # step 2's send finished first
    assert waited_before_receiving(log) == 1
    log.events = [("recv", 0), ("recv", 1)]                              # isends never waited on: nothing blocked
    assert waited_before_receiving(log) is None


def test_a_ring_that_returns_without_waiting_on_an_isend_is_refused():
    # under gloo here such a ring stalls (the stall watch refuses it); where it finishes, the message log refuses it
    from helpers.collectives import MessageLog, judge_ring
    n, rank = 4, 1
    inputs = [torch.randn(10, generator=torch.Generator().manual_seed(r)) for r in range(n)]
    log = MessageLog()
    partial, sent = torch.zeros(10), []
    for k in range(n - 1):   # the right messages: chunk r − k − 1... summed over ranks r, r − 1, …, r − k
        partial = partial + inputs[(rank - k) % n]
        sent.append((rank + 1, partial.tensor_split(n)[(rank - k - 1) % n].clone()))
    log.sent, log.received = sent, [(rank - 1, 3)] * (n - 1)
    log.events = [("recv", 0), ("sent", 0), ("recv", 1), ("recv", 2), ("sent", 2)]   # step 2's isend never waited
    problem = judge_ring(log, sum(inputs), inputs, rank)
    assert problem and "returned without waiting on the isend of step 2" in problem, problem
    log.events.insert(3, ("sent", 1))                                                 # every isend waited on
    assert judge_ring(log, sum(inputs), inputs, rank) is None


def test_recv_buffer_keeps_one_buffer_per_size_so_taking_turns_over_sizes_allocates_nothing_new():
    from helpers.collectives import recv_buffer
    a, b = torch.zeros(1000), torch.zeros(10)
    first = recv_buffer(a)
    assert recv_buffer(b).shape == b.shape and recv_buffer(b) is recv_buffer(b)
    assert recv_buffer(a) is first   # another size in between did not drop it


def test_a_schedule_hard_coded_for_4_ranks_passes_on_4_and_is_refused_by_the_notebooks_check_on_3():
    assert run_reduce_scatter_check(ring_shift_hard_coded_for_4_ranks, nprocs=4)["ok"]   # why one world size is not enough
    res = run_reduce_scatter_check(ring_shift_hard_coded_for_4_ranks, nprocs=3)
    assert not res["ok"] and res["problem"].startswith("on 3 ranks"), res
    ok, msg = verify("08.reduce_scatter", ring_shift_hard_coded_for_4_ranks)
    assert not ok and msg.startswith("❌") and "on 3 ranks" in msg, msg


def test_a_ring_cut_by_chunk_passes_where_chunk_and_tensor_split_agree_and_is_refused_at_10_values():
    assert run_reduce_scatter_check(ring_cut_by_chunk, nprocs=4, sizes=(1003, 7))["ok"]   # why 10 values are checked
    from helpers.collectives import CHECK_SIZES
    assert 10 in CHECK_SIZES and not run_reduce_scatter_check(ring_cut_by_chunk, nprocs=4)["ok"]


def test_the_ring_check_leaves_torch_distributed_as_it_found_it():
    import torch.distributed as dist
    from torch.distributed import distributed_c10d

    from helpers.collectives import MessageLog
    before = (dist.isend, dist.all_reduce, distributed_c10d.isend, distributed_c10d.recv)
    pg_before = (dist.ProcessGroup.__dict__["allreduce"], dist.ProcessGroup.__dict__["send"])
    namespace = {"all_reduce": dist.all_reduce, "other": 1}
    with MessageLog(namespace):
        assert dist.isend is not before[0] and namespace["all_reduce"] is not before[1]
        assert dist.ProcessGroup.__dict__["allreduce"] is not pg_before[0]
    assert (dist.isend, dist.all_reduce, distributed_c10d.isend, distributed_c10d.recv) == before
    assert (dist.ProcessGroup.__dict__["allreduce"], dist.ProcessGroup.__dict__["send"]) == pg_before
    assert namespace == {"all_reduce": before[1], "other": 1}


def test_an_untouched_skeleton_is_not_answered_yet_without_starting_ranks(monkeypatch):
    from helpers.collectives import lesson

    def no_launch(*a, **k):
        raise AssertionError("the skeleton started processes")

    monkeypatch.setattr(lesson, "run_reduce_scatter_check", no_launch)
    ok, msg = verify("08.reduce_scatter", skeleton_of_the_exercise)
    assert not ok and msg.startswith("⏳")


def skeleton_of_the_exercise(t):
    """The notebook's skeleton, as it stands before the student writes anything."""
    rank, n = dist.get_rank(), dist.get_world_size()
    chunks = t.view(-1).tensor_split(n)   # views into t: add into them in place
    ...   # your code: n - 1 ring steps with dist.isend to the right and dist.recv from the left


def test_rings_equal_all_reduce_with_unequal_chunks():
    d = run_ring_check(nprocs=3, numel=1001)
    assert d["naive_vs_all_reduce"] < 1e-5 * d["scale"]
    assert d["ring_vs_all_reduce"] < 1e-5 * d["scale"]
    assert d["reduce_scatter_vs_dist"] < 1e-5 * d["scale"]
    assert d["ring_between_ranks"] == 0   # each chunk's sum one chain of additions, then copied: same bits
    assert d["naive_between_ranks"] >= 0
    assert owned_chunk(0, 3) == 1 and owned_chunk(0, 1) == 0


def test_the_code_exercise_rejects_a_function_defined_in_a_cell():
    ok, msg = verify("08.reduce_scatter", lambda t: 0)
    assert not ok and "file" in msg


def test_alpha_beta_fits_recover_a_line():
    b = [2**10 * 4**k for k in range(8)]
    t = [alpha_beta_time(x, 3e-4, 5e-10) for x in b]
    alpha, beta = fit_alpha_beta(b, t)
    assert math.isclose(alpha, 3e-4, rel_tol=1e-6) and math.isclose(beta, 5e-10, rel_tol=1e-6)
    alpha, beta = two_point_alpha_beta(b, t)
    assert math.isclose(alpha, t[0]) and math.isclose(beta, 5e-10, rel_tol=1e-3)


def test_bus_bandwidth_and_ring_model_follow_their_definitions():
    assert bus_bandwidth(1e6, 1e-3, 4) == pytest.approx(1e9 * 2 * 3 / 4)
    assert bus_bandwidth(1e6, 1e-3, 4, "all_gather") == pytest.approx(1e9 * 3 / 4)
    # 2(n-1) steps of size/n, plus n-1 additions
    assert ring_model_time(8e6, 4, 1e-4, 1e-9, 1e-10) == pytest.approx(6 * (1e-4 + 2e6 * 1e-9) + 3 * 2e6 * 1e-10)
    with pytest.raises(KeyError):
        bus_bandwidth(1e6, 1e-3, 4, "gossip")


def test_buckets_hold_every_parameter_once_last_layer_first():
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    params = list(model.parameters())
    buckets = make_buckets(params, bucket_bytes=2**18)
    flat = [p for b in buckets for p in b]
    assert len(flat) == len(params) and {id(p) for p in flat} == {id(p) for p in params}
    assert flat[0] is params[-1]                      # backward produces the last layer's gradients first
    assert len(buckets) > 1
    assert all(sum(p.numel() * 4 for p in b[:-1]) < 2**18 for b in buckets)  # a bucket closes once it is full


def test_make_buckets_closes_where_ddp_s_bucket_assignment_does_and_ddp_splits_by_dtype():
    # make_buckets' docstring: DDP closes a bucket the same way, with one bucket list per dtype and device
    sizes = [100, 50, 200, 25, 300, 75]
    params = [nn.Parameter(torch.zeros(n)) for n in sizes]
    for limit in (1, 400, 600, 801, 10**6):
        ours = [[id(p) for p in b] for b in make_buckets(params, limit)]
        # DDP's function in the order make_buckets walks (last layer first), one limit for every bucket
        rev = list(reversed(params))
        theirs = [[id(rev[i]) for i in b] for b in dist._compute_bucket_assignment_by_size(rev, [limit])[0]]
        assert ours == theirs, limit
    mixed = [torch.zeros(100), torch.zeros(100, dtype=torch.float64), torch.zeros(100), torch.zeros(100, dtype=torch.float64)]
    assert dist._compute_bucket_assignment_by_size(mixed, [10**6])[0] == [[0, 2], [1, 3]]


def test_scratch_ddp_equals_ddp():
    from helpers.collectives import run_scratch_ddp
    res = run_scratch_ddp(nprocs=2, hidden=(32,), batch=64, steps=2, timed_steps=1, repeats=1)
    assert set(res["max_abs_diff"]) == {"ddp", "per_parameter", "bucketed", "overlapped"}
    assert max(res["max_abs_diff"].values()) <= 1e-6
    # all-reduces per step: one per parameter (4: two Linear layers), one per bucket (bucket_bytes 1 MiB: all in one),
    # DDP's reducer: one bucket after its rebuild (the model is far below its 1 MiB first bucket)
    assert res["steps"] == 2
    assert res["all_reduces"] == {"per_parameter": 4, "bucketed": 1, "overlapped": 1, "ddp": 1}
    with pytest.raises(ValueError, match="divide evenly"):
        run_scratch_ddp(nprocs=2, batch=63)
    with pytest.raises(ValueError, match="'ddp'"):
        run_scratch_ddp(variants=("bucketed",))
    assert torch.get_num_threads() >= 1


def all_to_all_without_backend_support(rank, world_size):
    """all_to_all where the backend refuses it (gloo before pytorch#165435): the isend/recv path (module level: ranks import it)."""
    import torch.distributed as dist

    from helpers.collectives import instruments

    def refuse(*args, **kwargs):
        raise RuntimeError("Backend gloo does not support alltoall")

    dist.all_to_all = refuse
    outputs = [torch.empty(1) for _ in range(world_size)]
    how = instruments.all_to_all(outputs, [torch.tensor([10.0 * rank + j]) for j in range(world_size)])
    return how, [o.item() for o in outputs]


def test_all_to_all_falls_back_to_point_to_point_where_the_backend_lacks_it():
    from helpers.dist import launch
    res = launch(all_to_all_without_backend_support, nprocs=3, verbose=False)
    assert all(how == "isend/recv" for how, _ in res)
    assert [vals for _, vals in res] == [[10.0 * j + r for j in range(3)] for r in range(3)]


def recipe_ring_with_its_batches_recorded(rank, world_size):
    """The recipe's ring all-reduce, each batch_isend_irecv call and each lone send/recv recorded (module level)."""
    import torch.distributed as dist

    from helpers.collectives import MessageLog, ring_all_reduce, waited_before_receiving
    batches, original = [], dist.batch_isend_irecv

    def recorded(ops):
        batches.append([(op.op.__name__, op.peer) for op in ops])
        return original(ops)

    dist.batch_isend_irecv = recorded
    try:
        t = torch.arange(10.0) + 100 * rank
        with MessageLog() as log:
            ring_all_reduce(t)
    finally:
        dist.batch_isend_irecv = original
    return batches, len(log.sent), len(log.received), waited_before_receiving(log), t.tolist()


@pytest.mark.parametrize("n", [2, 3])
def test_each_ring_step_posts_its_send_and_its_receive_together_in_one_batch(n):
    # under nccl a send posted alone may wait for its receiver, whose own receive waits behind its send (2 ranks: one peer)
    from helpers.dist import launch
    res = launch(recipe_ring_with_its_batches_recorded, nprocs=n, verbose=False)
    for rank, (batches, sent, received, waited, t) in enumerate(res):
        assert batches == [[("isend", (rank + 1) % n), ("irecv", (rank - 1) % n)]] * (2 * (n - 1))
        assert sent == received == 2 * (n - 1) and waited is None   # every message in those batches, none waited on first
        assert t == [n * v + 100 * sum(range(n)) for v in range(10)]


def test_the_sweep_fits_the_step_over_every_size_and_keeps_each_size_s_worst_time():
    from helpers.collectives import run_sweep
    sizes = (2**10, 2**12, 2**14)
    # at 1 KiB: 2 repeats × 50 in-place all_reduces and as many rings (each doubling ones): past float32's range
    # unless the timed data stay finite, which sweep_worker asserts (it times zeros)
    sweep = run_sweep(sizes, nprocs=2, repeats=2, big=2**14)
    rows = sweep["sizes"]
    assert [r["bytes"] for r in rows] == list(sizes) and sweep["repeats"] == 2
    alpha, beta = fit_alpha_beta([r["bytes"] / 2 for r in rows], [r["step_s"] for r in rows])  # a fit, not one size's time
    assert (sweep["step_alpha_s"], sweep["step_beta_s_per_byte"]) == (alpha, beta)
    assert all(r[k + "_worst"] >= r[k + "_s"] > 0 for r in rows for k in ("gloo", "ring", "step", "add"))
    assert all(r["ring_model_s"] == pytest.approx(ring_model_time(r["bytes"], 2, alpha, beta, sweep["add_gamma_s_per_byte"]))
               for r in rows)


def test_the_collectives_say_which_way_all_to_all_was_done():
    from helpers.collectives import run_collectives
    held = run_collectives(nprocs=2)
    assert held["all_to_all"][0]["how"] in ("all_to_all", "isend/recv")
    assert [r["after"] for r in held["all_to_all"]] == [[0.0, 10.0], [1.0, 11.0]]


# --- DDP from scratch where it used to differ from DDP: buffers, unused parameters, two backward passes, empty buckets

def ddp_gaps(rank, world_size):
    """In each of 2 ranks: OverlappedDDP and the bucketed all-reduce beside DDP in the cases DDP handles (ranks import it)."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from helpers.collectives import OverlappedDDP, allreduce_gradients_bucketed

    def bn_model():  # parameters and BatchNorm buffers that differ by rank until someone broadcasts them
        torch.manual_seed(rank)
        m = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 3))
        m[1].running_mean.fill_(rank + 1.0)
        return m

    g = torch.Generator().manual_seed(100 + rank)
    xs, ys = [torch.randn(6, 8, generator=g) for _ in range(4)], [torch.randint(0, 3, (6,), generator=g) for _ in range(4)]

    def train(net, model, finish, micro):
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(2):
            opt.zero_grad()
            for j in range(micro):  # micro > 1: several backward passes before finish(), gradients summed
                nn.functional.cross_entropy(net(xs[micro * step + j]), ys[micro * step + j]).backward()
            finish()
            opt.step()
        return [t.detach().double() for t in [*model.parameters(), *model.buffers()]]

    out = {}
    for micro in (1, 2):
        ref_model = bn_model()
        ref = train(DDP(ref_model), ref_model, lambda: None, micro)
        for bucket_bytes in (0, 2**20):
            model = bn_model()
            wrapped = OverlappedDDP(model, bucket_bytes)
            mine = train(wrapped, model, wrapped.finish, micro)
            out[f"micro{micro}_bytes{bucket_bytes}"] = max(float((a - b).abs().max()) for a, b in zip(mine, ref))

    class WithUnused(nn.Module):
        def __init__(self):
            super().__init__()
            self.used, self.unused = nn.Linear(8, 3), nn.Linear(8, 3)

        def forward(self, x):
            return self.used(x)

    for bucket_bytes in (0, 2**20):
        torch.manual_seed(0)
        wrapped = OverlappedDDP(WithUnused(), bucket_bytes)
        nn.functional.cross_entropy(wrapped(xs[0]), ys[0]).backward()
        try:
            wrapped.finish()
            out[f"unused_{bucket_bytes}"] = None
        except RuntimeError as e:
            out[f"unused_{bucket_bytes}"] = str(e)
    dist.barrier()  # the ranks still agree after the error

    fresh = nn.Linear(4, 2)  # no backward yet: no gradient anywhere, nothing to send
    allreduce_gradients_bucketed(fresh, bucket_bytes=0)
    allreduce_gradients_bucketed(fresh)
    model = bn_model()
    nn.functional.cross_entropy(model(xs[0]), ys[0]).backward()
    expected = [p.grad.clone() for p in model.parameters()]
    for e in expected:
        dist.all_reduce(e)
    allreduce_gradients_bucketed(model, bucket_bytes=0)  # one bucket per parameter
    out["bucketed_0"] = max(float((p.grad - e / world_size).abs().max()) for p, e in zip(model.parameters(), expected))
    return out


@pytest.fixture(scope="module")
def gaps():
    from helpers.dist import launch
    return launch(ddp_gaps, 2, timeout=180, verbose=False)


def test_overlapped_ddp_broadcasts_buffers_and_equals_ddp_with_batchnorm(gaps):
    for r in gaps:  # ranks start from different parameters and BatchNorm statistics, as DDP's do before it wraps
        assert r["micro1_bytes1048576"] <= 1e-6 and r["micro1_bytes0"] <= 1e-6, r


def test_two_backward_passes_before_finish_sum_the_gradients_as_ddp_does(gaps):
    for r in gaps:
        assert r["micro2_bytes1048576"] <= 1e-6 and r["micro2_bytes0"] <= 1e-6, r


def test_a_trainable_parameter_without_gradient_is_refused_on_every_rank(gaps):
    for r in gaps:
        for key in ("unused_0", "unused_1048576"):
            assert r[key] and "unused.weight" in r[key] and "unused.bias" in r[key] and "requires_grad_(False)" in r[key]
            assert "used.weight" not in r[key].replace("unused.weight", "")


def test_empty_buckets_never_happen_and_bucket_bytes_0_is_one_bucket_per_parameter(gaps):
    for r in gaps:
        assert r["bucketed_0"] <= 1e-7
    params = list(nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2)).parameters())
    assert make_buckets(params, 0) == [[p] for p in reversed(params)]
    assert make_buckets([], 2**20) == []
    with pytest.raises(ValueError, match="bucket_bytes"):
        make_buckets(params, -1)


# --- timing on a GPU waits for the GPU ----------------------------------------------------------------------------

def test_the_sweep_timer_synchronises_cuda_and_only_cuda(monkeypatch, tmp_path):
    import torch.distributed as dist

    from helpers.collectives import instruments
    waited = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: waited.append(device))
    cuda = torch.device("cuda", 0)
    assert instruments.seconds_per_call(lambda: None, 3, cuda) >= 0 and waited == [cuda, cuda]  # before and after
    waited.clear()
    instruments.seconds_per_call(lambda: None, 3, torch.device("cpu"))
    assert waited == []
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:  # the sweep's timer, as sweep_worker calls it with the rank's device
        best = instruments._best_times({"a": lambda: None, "b": lambda: None}, repeats=2, inner=3, device=cuda)
    finally:
        dist.destroy_process_group()
    assert set(best) == {"a", "b"} and len(waited) == 2 * 2 * 2
