"""Notebook 08's code exercise (helpers/collectives/ring_exercise.py): the check passes rings and refuses shortcuts,
collectives, other exchanges and blocking sends; an untouched skeleton is not answered yet."""
from __future__ import annotations

import torch

from helpers.collectives import owned_chunk, run_reduce_scatter_check, run_ring_check
from helpers.core.checks import verify

import torch.distributed as dist  # noqa: E402,I001  (the skeleton below uses it as the notebook's file does)

from ring_answers import (RIGHT, WRONG, plain_all_reduce, ring_blocking_send_on_even_ranks_first, ring_cut_by_chunk,
                          ring_shift_hard_coded_for_4_ranks, ring_that_leaves_rank_r_piece_r)


# ring_with_blocking_send and ring_with_isend_waited_at_once deadlock under gloo (its send waits for the receiver),
# where the stall watch refuses them (test_refusals.py); the rule that refuses them without a deadlock is tested below


def judge_every_answer(rank, world_size, fns):
    """In each rank: the check's own worker on every candidate in turn (one launch for all; the ranks import it)."""
    from helpers.collectives import CHECK_SIZES, reduce_scatter_check_worker
    return {fn.__name__: reduce_scatter_check_worker(rank, world_size, fn, CHECK_SIZES, seed=7) for fn in fns}


def test_the_ring_check_passes_rings_and_refuses_shortcuts_the_recipe_and_other_exchanges():
    from helpers.launching import launch
    ranks = launch(judge_every_answer, 4, args=((*RIGHT, *WRONG),), timeout=120, verbose=False)
    for fn in RIGHT:
        assert all(problem is None for r in ranks for _, problem in r[fn.__name__]), (fn.__name__, ranks)
    for fn, said in WRONG.items():
        problems = [problem for r in ranks for _, problem in r[fn.__name__] if problem]
        assert problems and said in problems[0], (fn.__name__, problems)


def test_the_notebooks_check_refuses_all_reduce_and_passes_a_ring():
    ok, msg = verify("08.reduce_scatter", plain_all_reduce)  # 4 ranks, two sizes, fresh inputs
    assert not ok and msg.startswith("❌") and "dist.all_reduce, a collective" in msg, msg
    ok, msg = verify("08.reduce_scatter", ring_that_leaves_rank_r_piece_r)   # on 4 ranks, then 3 (CHECK_RANKS)
    assert ok and msg.startswith("✅"), msg


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
    ok, msg = verify("08.reduce_scatter", ring_shift_hard_coded_for_4_ranks)   # 4 ranks pass, then 3 refuse it
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
