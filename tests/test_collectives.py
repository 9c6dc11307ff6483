"""Notebook 08's recipe and instruments: the ring by hand, the cost model, DDP rebuilt, the code exercise's check."""
from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from helpers.collectives import (alpha_beta_time, bus_bandwidth, fit_alpha_beta, make_buckets, owned_chunk,
                                 ring_model_time, run_reduce_scatter_check, run_ring_check, two_point_alpha_beta)
from helpers.core.checks import verify


def returns_owned_chunk_only(t):
    """A half-done exercise: the right chunk index, but nothing summed (module level: the ranks import it)."""
    import torch.distributed as dist
    return (dist.get_rank() + 1) % dist.get_world_size()


def test_rings_equal_all_reduce_with_unequal_chunks():
    d = run_ring_check(nprocs=3, numel=1001)
    assert d["naive_vs_all_reduce"] < 1e-5 * d["scale"]
    assert d["ring_vs_all_reduce"] < 1e-5 * d["scale"]
    assert d["reduce_scatter_vs_dist"] < 1e-5 * d["scale"]
    assert d["owned_chunk"] == owned_chunk(0, 3) == 1


def test_the_reduce_scatter_check_refuses_a_half_done_ring_and_passes_the_recipe():
    from helpers.collectives.recipe import ring_reduce_scatter
    ok = run_reduce_scatter_check(ring_reduce_scatter, nprocs=2, numel=101)
    assert ok["ok"] and ok["max_abs_diff"] < 1e-5
    wrong = run_reduce_scatter_check(returns_owned_chunk_only, nprocs=2, numel=101)
    assert not wrong["ok"] and wrong["per_rank"][0]["same_chunk"]  # the right chunk, but never summed


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


def test_scratch_ddp_equals_ddp():
    from helpers.collectives import run_scratch_ddp
    res = run_scratch_ddp(nprocs=2, hidden=(32,), batch=64, steps=2, timed_steps=1, repeats=1)
    assert set(res["max_abs_diff"]) == {"ddp", "per_parameter", "bucketed", "overlapped"}
    assert max(res["max_abs_diff"].values()) <= 1e-6
    with pytest.raises(ValueError, match="divide evenly"):
        run_scratch_ddp(nprocs=2, batch=63)
    with pytest.raises(ValueError, match="'ddp'"):
        run_scratch_ddp(variants=("bucketed",))
    assert torch.get_num_threads() >= 1


def all_to_all_without_backend_support(rank, world_size):
    """all_to_all where the backend refuses it (gloo in torch 2.11): the isend/recv path (module level: ranks import it)."""
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
