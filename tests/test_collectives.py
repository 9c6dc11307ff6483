"""Notebook 08's recipe and instruments: the ring's batched steps, the cost model and its fits, all_to_all's fallback,
the sweep and its timer."""
from __future__ import annotations

import math

import pytest
import torch

from helpers.collectives import alpha_beta_time, bus_bandwidth, fit_alpha_beta, ring_model_time, two_point_alpha_beta


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
    from helpers.launching import launch
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
    from helpers.launching import launch
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
    assert all(r[k + "_worst"] >= r[k + "_s"] > 0 for r in rows for k in ("library", "ring", "step", "add"))
    assert all(r["ring_model_s"] == pytest.approx(ring_model_time(r["bytes"], 2, alpha, beta, sweep["add_gamma_s_per_byte"]))
               for r in rows)


def test_the_collectives_say_which_way_all_to_all_was_done():
    from helpers.collectives import run_collectives
    held = run_collectives(nprocs=2)
    assert held["all_to_all"][0]["how"] in ("all_to_all", "isend/recv")
    assert [r["after"] for r in held["all_to_all"]] == [[0.0, 10.0], [1.0, 11.0]]


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
