"""Notebook 09's calculator and instruments: the formulas, exact bytes per rank, the TP block, the code exercise."""
from __future__ import annotations

import pytest

from helpers.core.checks import verify
from helpers.sharding import (comm_per_step, comm_time, memory_per_rank, model_parameters, run_sharding, run_tp_block,
                              tp_plan, make_model)


def test_sixteen_bytes_per_parameter_and_what_each_strategy_divides():
    psi = 1000
    assert memory_per_rank(psi)["total"] == 16 * psi == memory_per_rank(psi, precision="mixed")["total"]
    assert memory_per_rank(psi, 4, "zero1") == {"params": 4000, "grads": 4000, "optim": 2000, "total": 10000}
    assert memory_per_rank(psi, 4, "zero2") == {"params": 4000, "grads": 1000, "optim": 2000, "total": 7000}
    assert memory_per_rank(psi, 4, "zero3") == memory_per_rank(psi, 4, "fsdp2") == \
        {"params": 1000, "grads": 1000, "optim": 2000, "total": 4000}
    assert memory_per_rank(7_000_000_000, 1, "ddp", "mixed")["total"] == 112 * 10**9
    assert memory_per_rank(10, 3, "zero3")["params"] == 14          # ceil(40 / 3): the largest rank's share


def test_traffic_is_two_psi_for_ddp_and_three_for_fsdp():
    psi, n = 1_000_000, 4
    f = (n - 1) / n
    assert comm_per_step(psi, n, "ddp")["total"] == pytest.approx(2 * f * 4 * psi)
    assert comm_per_step(psi, n, "fsdp2")["total"] == pytest.approx(3 * f * 4 * psi)
    assert comm_time(1e9, 10, (1e-5, 1e-9)) == pytest.approx(10 * 1e-5 + 1.0)


def test_bad_input_names_the_fix():
    with pytest.raises(ValueError, match="choose one of"):
        memory_per_rank(10, 2, "zero4")
    with pytest.raises(ValueError, match="precision 'fp32' or 'mixed'"):
        memory_per_rank(10, 2, "ddp", "fp8")
    with pytest.raises(ValueError, match="positive int"):
        memory_per_rank(10, 0)
    with pytest.raises(ValueError, match="unknown interconnect"):
        comm_time(1, 1, "carrier pigeon")
    with pytest.raises(ValueError, match="pairs Linear layers"):
        tp_plan(make_model(layers=3))
    with pytest.raises(ValueError, match="divide evenly"):
        run_sharding(world_sizes=(3,), batch=256)


def test_measured_bytes_equal_the_calculator_and_training_equals_one_process():
    rows = run_sharding(world_sizes=(2,), layers=2, width=64, batch=16)
    assert {r["strategy"] for r in rows} == {"ddp", "zero1", "fsdp2", "tp"}
    for r in rows:
        assert {k: r["measured_bytes"][k] for k in ("params", "grads", "optim")} == r["predicted_bytes"], r["strategy"]
        assert r["bytes_equal_on_all_ranks"] and r["max_abs_diff_vs_unsharded"] < 1e-5, r["strategy"]
    fsdp = next(r for r in rows if r["strategy"] == "fsdp2")
    assert fsdp["measured_bytes"]["params"] == 4 * model_parameters(2, 64) // 2


def test_tensor_parallel_block_equals_the_unsplit_block_with_one_all_reduce_each_way():
    r0 = run_tp_block(nprocs=2, width=16, hidden=32, batch=4)[0]
    assert max(r0["output_diff"], r0["input_grad_diff"], r0["weight_grad_diff"]) < 1e-5
    assert r0["weight_bytes"] * 2 == r0["full_weight_bytes"] and r0["weights_unchanged"]
    assert r0["forward"]["calls"] == {"all_reduce": 1} and r0["backward"]["calls"] == {"all_reduce": 1}


def test_zero1_partition_exercise_accepts_the_rule_and_refuses_near_misses():
    def right(numels, n):
        ranks = [0] * n
        for k in sorted(numels, reverse=True):
            ranks[ranks.index(min(ranks))] += k
        return ranks

    def even_split(numels, n):  # Ψ/N: what ZeroRedundancyOptimizer does not do
        return [sum(numels) // n + (i < sum(numels) % n) for i in range(n)]

    def in_order(numels, n):    # greedy, but without sorting first
        ranks = [0] * n
        for k in numels:
            ranks[ranks.index(min(ranks))] += k
        return ranks

    assert verify("09.zero1_partition", right)[0]
    assert not verify("09.zero1_partition", even_split)[0]
    assert not verify("09.zero1_partition", in_order)[0]
