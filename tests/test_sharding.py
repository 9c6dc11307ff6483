"""Notebook 09's calculator and instruments: the formulas, exact bytes per rank, mixed precision, the ranks' devices,
the TP block."""
from __future__ import annotations

import math

import pytest
import torch

from helpers.sharding import (comm_per_step, comm_time, memory_per_rank, model_parameters, root_unit_extra, run_sharding,
                              run_tp_block, tp_plan, make_model)


def test_sixteen_bytes_per_parameter_and_what_each_strategy_divides():
    psi = 1000
    assert memory_per_rank(psi)["total"] == 16 * psi
    assert memory_per_rank(psi, precision="amp")["total"] == memory_per_rank(psi, precision="deepspeed")["total"] == 16 * psi
    assert memory_per_rank(psi, 4, "zero1") == {"params": 4000, "grads": 4000, "optim": 2000, "gathered": 0, "total": 10000}
    assert memory_per_rank(psi, 4, "zero2") == {"params": 4000, "grads": 1000, "optim": 2000, "gathered": 0, "total": 7000}
    assert memory_per_rank(psi, 4, "zero3") == memory_per_rank(psi, 4, "fsdp2") == \
        {"params": 1000, "grads": 1000, "optim": 2000, "gathered": 0, "total": 4000}
    assert memory_per_rank(7_000_000_000, 1, "ddp", "deepspeed")["total"] == 112 * 10**9


def test_the_two_mixed_precision_accountings_differ_where_the_weights_stay_whole():
    """PyTorch's AMP / FSDP2 keep fp32 parameters and gradients; the ZeRO paper's (DeepSpeed's) keeps fp16 ones."""
    big = 7_000_000_000
    amp, ds = memory_per_rank(big, 8, "zero1", "amp"), memory_per_rank(big, 8, "zero1", "deepspeed")
    assert (amp["params"], amp["grads"], amp["optim"]) == (4 * big, 4 * big, 8 * big // 8)       # 63 GB
    assert (ds["params"], ds["grads"], ds["optim"]) == (2 * big, 2 * big, 12 * big // 8)         # 38.5 GB
    assert amp["total"] == 63 * 10**9 and ds["total"] == 38.5 * 10**9
    with pytest.raises(ValueError, match="'amp'.*'deepspeed'"):
        memory_per_rank(big, 8, "zero1", "mixed")          # which mixed precision? the calculator asks
    # the gathered layer: DeepSpeed's estimator counts 4 B per parameter of the largest layer; FSDP2 three layers
    layer = 10_000
    assert memory_per_rank(big, 8, "zero3", "deepspeed", layer=layer)["gathered"] == 4 * layer
    assert memory_per_rank(big, 8, "zero3", "amp", layer=layer)["gathered"] == 3 * 2 * layer
    assert memory_per_rank(big, 8, "zero3", "fp32", layer=layer)["gathered"] == 3 * 4 * layer
    assert memory_per_rank(big, 1, "zero3", "fp32", layer=layer)["gathered"] == 4 * layer      # one rank: one copy
    assert memory_per_rank(big, 8, "zero1", "amp", layer=layer)["gathered"] == 0


def test_deepspeeds_gathered_layer_is_the_most_parameters_one_module_holds_itself():
    """DeepSpeed's model_to_params: max over modules of m.parameters(recurse=False), not a block, not the model."""
    emb = torch.nn.Embedding(10, 8)                                     # 80 parameters of its own
    block = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 8))   # 144 in all, 72 per Linear
    model = torch.nn.Sequential(emb, block)
    assert memory_per_rank(224, 8, "zero3", "deepspeed", layer=model)["gathered"] == 4 * 80
    assert memory_per_rank(224, 8, "zero3", "deepspeed", layer=block)["gathered"] == 4 * 72
    assert memory_per_rank(224, 8, "zero3", "deepspeed", layer=80)["gathered"] == 4 * 80   # a count: as given


def test_tensor_parallel_traffic_counts_no_all_reduce_for_the_datas_gradient():
    """Two all-reduces per block, less one when the first block's input is the data (09 cell 17 measures 7 for 4)."""
    act = 1000
    assert comm_per_step(10, 2, "tp", tp_activation_bytes=act, tp_blocks=4)["total"] == 7 * act
    assert comm_per_step(10, 2, "tp", tp_activation_bytes=act, tp_blocks=4, tp_input_grad=True)["total"] == 8 * act
    assert comm_per_step(10, 4, "tp", tp_activation_bytes=act, tp_blocks=1)["total"] == 1 * 2 * 0.75 * act
    assert comm_per_step(10, 2, "tp", tp_activation_bytes=act)["total"] == 0


def test_zero2_traffic_is_the_design_memory_per_rank_counts():
    """ZeRO-2 keeps whole parameters in their stored dtype (memory_per_rank): its traffic moves them as stored, 2Ψ."""
    psi, f = 1000, 3 / 4
    for precision in ("fp32", "amp"):                                # whole fp32 parameters and fp32 gradients
        mem, comm = memory_per_rank(psi, 4, "zero2", precision), comm_per_step(psi, 4, "zero2", precision)
        assert mem["params"] == 4 * psi and mem["grads"] == 4 * psi // 4
        assert comm == {"reduce_scatter": f * 4 * psi, "all_gather": f * 4 * psi, "total": 2 * f * 4 * psi}
    ds = comm_per_step(psi, 4, "zero2", "deepspeed")                  # the paper's fp16 parameters and gradients
    assert ds["total"] == 2 * f * 2 * psi and memory_per_rank(psi, 4, "zero2", "deepspeed")["params"] == 2 * psi


def test_the_largest_ranks_share_when_n_does_not_divide_the_tensors():
    model = make_model()                                 # 8 × (512×512 weight + 512 bias)
    psi = model_parameters()
    z1 = memory_per_rank(model, 3, "zero1")["optim"]
    assert z1 == 8 * 3 * 512 * 512                       # rank 0: three whole weights (the rule, by hand)
    assert z1 > math.ceil(8 * psi / 3)                   # more than the average a count alone gives
    fs = memory_per_rank(model, 3, "fsdp2")["params"]
    assert fs == 4 * 8 * (171 * 512 + 171)               # torch.chunk: rank 0 gets ceil(512 / 3) = 171 rows
    assert memory_per_rank(model, 4, "fsdp2")["params"] == memory_per_rank(psi, 4, "fsdp2")["params"]  # N divides
    assert memory_per_rank(model, 3, "zero1", "deepspeed")["optim"] == 12 * math.ceil(psi / 3)  # one flat buffer


def test_bad_input_names_the_fix():
    with pytest.raises(ValueError, match="choose one of"):
        memory_per_rank(10, 2, "zero4")
    with pytest.raises(ValueError, match="'fp32', 'amp'"):
        memory_per_rank(10, 2, "ddp", "fp8")
    with pytest.raises(ValueError, match="positive int"):
        memory_per_rank(10, 0)
    with pytest.raises(ValueError, match="unknown interconnect"):
        comm_time(1, 1, "carrier pigeon")
    with pytest.raises(ValueError, match="pairs Linear layers"):
        tp_plan(make_model(layers=3))
    with pytest.raises(ValueError, match="divide evenly"):
        run_sharding(world_sizes=(3,), batch=256)


def test_on_three_ranks_the_largest_rank_holds_what_the_calculator_says():
    """N does not divide the tensors: the largest rank's bytes equal memory_per_rank given the model, not Ψ/N."""
    rows = run_sharding(world_sizes=(3,), strategies=("zero1", "fsdp2"), layers=2, width=64, batch=12)
    for r in rows:
        assert r["measured_bytes"] == r["predicted_bytes"], r["strategy"]
        assert not r["bytes_equal_on_all_ranks"]
    z1 = next(r for r in rows if r["strategy"] == "zero1")
    assert z1["measured_bytes"]["optim"] > math.ceil(8 * model_parameters(2, 64) / 3)


def root_held_peak(rank, world_size, root_layers):
    """FSDP2's gathered peak for root-owned Linears around three wrapped ones, 64 wide (module level: spawned)."""
    from torch import nn
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    from helpers.sharding.instruments import GatheredPeak
    torch.manual_seed(0)
    blocks = [nn.Linear(64, 64) for _ in range(3)]
    model = nn.Sequential(*(nn.Linear(64, 64) for _ in range(root_layers // 2)), *blocks,
                          *(nn.Linear(64, 64) for _ in range(root_layers - root_layers // 2)))
    mesh = init_device_mesh("cpu", (world_size,))
    for b in blocks:
        fully_shard(b, mesh=mesh)
    fully_shard(model, mesh=mesh)                  # the root unit owns the Linears not wrapped above
    x = torch.randn(8, 64)
    model(x).sum().backward()                      # first step: FSDP2's lazy init
    with GatheredPeak(model) as g:
        model(x).sum().backward()
    return g.peak


@pytest.mark.parametrize("root_layers", [1, 2])
def test_a_root_unit_with_parameters_adds_what_root_unit_extra_says(root_layers):
    """Cell 26's what-if: the root's all-gather output lives on until the first block's copy-out ends, so a root
    larger than a block adds 2 B × (2 root − layer) in bf16 (4 root − 2 layer bytes), not 2 B × root."""
    from helpers.launching import launch
    layer, root = 64 * 64 + 64, root_layers * (64 * 64 + 64)
    more = root_unit_extra(root, layer, "fp32")
    peaks = launch(root_held_peak, nprocs=2, args=(root_layers,), verbose=False)
    assert peaks == [memory_per_rank(10**6, 2, "zero3", "fp32", layer=layer)["gathered"] + max(more.values())] * 2
    d = 4096                                       # LLaMA-7B's block and embedding + output, as cell 26 passes them
    block, emb_out = 4 * d * d + 3 * d * 11008, 2 * 32_000 * d
    assert root_unit_extra(emb_out, block, "amp") == {"first": 4 * emb_out - 2 * block, "later": 2 * emb_out}
    assert round(max(root_unit_extra(emb_out, block, "amp").values()) / 1e9, 2) == 0.64   # not the 0.52 once printed


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run tests/gpu/run.sh there)")
def test_nccl_ranks_are_bound_to_their_own_gpu():
    """The launcher passes device_id to init_process_group: nccl binds rank r to cuda:r instead of guessing."""
    from helpers.launching import launch, workers

    n = min(2, torch.cuda.device_count())
    who = launch(workers.whoami, n, backend="nccl", verbose=False, timeout=120)
    assert [w["bound_device"] for w in who] == [f"cuda:{r}" for r in range(n)]


def test_each_world_size_is_compared_with_one_process_on_its_ranks_kind_of_device(monkeypatch):
    """nccl ranks (GPUs) against a reference trained on a GPU, gloo ranks against one on the CPU: never mixed."""
    import helpers.sharding.strategies as S

    asked = []
    monkeypatch.setattr(S, "choose_backend", lambda n: "nccl" if n == 1 else "gloo")
    monkeypatch.setattr(S, "reference_parameters", lambda *a, device, **k: asked.append(device) or [torch.zeros(1)])
    fake = {"measured_bytes": dict.fromkeys(("params", "grads", "optim", "gathered"), 0), "params": [torch.zeros(1)],
            "comm": {}}
    monkeypatch.setattr(S, "launch", lambda fn, n, **k: [{"strategies": {"ddp": fake}}] * n)
    rows = S.run_sharding(world_sizes=(1, 2, 4), strategies=("ddp",), layers=2, width=8, batch=8)
    assert asked == ["cuda", "cpu"] and [r["backend"] for r in rows] == ["nccl", "gloo", "gloo"]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run tests/gpu/run.sh there)")
def test_one_gpu_rank_trains_what_one_process_trains_on_the_gpu():
    """Against a CPU reference a GPU rank differed by 2.8e-4 (an H100); against a GPU one it must match."""
    rows = run_sharding(world_sizes=(1,), strategies=("ddp", "fsdp2"), layers=2, width=64, batch=16)
    assert all(r["backend"] == "nccl" and r["max_abs_diff_vs_unsharded"] < 1e-5 for r in rows), rows


def test_tensor_parallel_block_equals_the_unsplit_block_with_one_all_reduce_each_way():
    r0 = run_tp_block(nprocs=2, width=16, hidden=32, batch=4)[0]
    assert max(r0["output_diff"], r0["input_grad_diff"], r0["weight_grad_diff"]) < 1e-5
    assert r0["weight_bytes"] * 2 == r0["full_weight_bytes"] and r0["weights_unchanged"]
    assert r0["forward"]["calls"] == {"all_reduce": 1} and r0["backward"]["calls"] == {"all_reduce": 1}


def test_deepspeed_zero3_splits_each_tensor_apart():
    shapes = [(5,), (7,)]                                # 12 elements; N = 4 divides neither tensor
    z3 = memory_per_rank(shapes, 4, "zero3", "deepspeed")
    assert z3["params"] == 2 * (2 + 2)                   # ceil(5/4) + ceil(7/4): each tensor padded and split
    assert z3["optim"] == 12 * (2 + 2)
    assert memory_per_rank(shapes, 4, "zero2", "deepspeed")["optim"] == 12 * 4   # ZeRO-1/2: one flat buffer, 12 → 16 (2N)


def test_every_strategy_is_set_up_alike_from_one_table():
    """``SHARD[name](model, mesh, lr=...)`` for each strategy run_sharding trains: one call, no branch on names;
    the table's names are exactly the ones run_sharding accepts (its refusal lists them)."""
    import inspect

    from helpers.sharding.recipe import SHARD, STRATEGIES

    for name, setup in SHARD.items():
        params = list(inspect.signature(setup).parameters)
        assert params[:3] == ["model", "mesh", "lr"], (name, params)
    assert set(SHARD) <= set(STRATEGIES) and set(STRATEGIES) - set(SHARD) == {"zero2", "zero3"}


def test_each_collective_op_has_one_family_and_each_family_one_wire_factor():
    from helpers.sharding.instruments import FAMILY, WIRE_FACTOR

    assert set(FAMILY.values()) == set(WIRE_FACTOR)
    assert WIRE_FACTOR == {"all_reduce": 2, "all_gather": 1, "reduce_scatter": 1, "broadcast": 1}


def test_the_notebook_tables_print_each_row_aligned_with_its_numbers():
    from helpers.sharding import amp_lines, bytes_table, calculator_table

    calc = calculator_table(2_101_248, 4, 512 * 512 + 512).splitlines()
    assert calc[0] == "Ψ = 2,101,248 parameters; bytes per rank on 4 ranks" and len(calc) == 13
    assert calc[1].split() == ["fp32", "ddp:", "8,404,992", "+", "8,404,992", "+", "16,809,984", "+", "gathered", "0",
                               "=", "33,619,968"]
    part = {"params": 10, "grads": 10, "optim": 20, "gathered": 0}
    row = {"strategy": "ddp", "world_size": 2, "measured_bytes": part, "predicted_bytes": dict(part, optim=21),
           "max_abs_diff_vs_unsharded": 3e-5, "precision": "amp"}
    table = bytes_table([row]).splitlines()
    assert table[1].split() == ["ddp", "2", "10", "10", "20", "0", "40", "41", "3.0e-05"]
    assert table[0].index("calculator") + len("calculator") == table[1].index(" 41") + 3   # columns line up
    assert amp_lines([row]).endswith("B: NOT the calculator") and amp_lines([dict(row, predicted_bytes=part)]).endswith(
        "B: exactly the calculator")
