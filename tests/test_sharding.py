"""Notebook 09's calculator and instruments: the formulas, exact bytes per rank, the TP block, the code exercise."""
from __future__ import annotations

import math

import pytest
import torch

from helpers.core.checks import verify
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


def test_measured_bytes_equal_the_calculator_and_training_equals_one_process():
    rows = run_sharding(world_sizes=(2,), layers=2, width=64, batch=16)
    assert {r["strategy"] for r in rows} == {"ddp", "zero1", "fsdp2", "tp"}
    for r in rows:
        assert r["measured_bytes"] == r["predicted_bytes"], r["strategy"]
        assert r["bytes_equal_on_all_ranks"] and r["max_abs_diff_vs_unsharded"] < 1e-5, r["strategy"]
    by = {r["strategy"]: r for r in rows}
    psi = model_parameters(2, 64)
    assert by["fsdp2"]["measured_bytes"]["params"] == 4 * psi // 2
    assert by["fsdp2"]["measured_bytes"]["gathered"] == 3 * 4 * (64 * 64 + 64)   # three layers whole at the peak
    assert by["ddp"]["comm"]["calls"] == {"allreduce_": 1}       # a steady step: no bucket-rebuild broadcasts
    tp = comm_per_step(psi, 2, "tp", tp_activation_bytes=16 * 64 * 4, tp_blocks=1)["total"]
    assert by["tp"]["comm"]["wire_bytes"] == tp                  # one block: its forward all-reduce only
    assert by["ddp"]["ddp_buckets"] == {"buckets": 4 * psi, "grad_storages": 1, "grads_are_buckets": True}
    assert by["ddp"]["ddp_buckets_default"] == {"buckets": 4 * psi, "grad_storages": 4, "grads_are_buckets": False,
                                                "grads": 4 * psi}   # DDP's default: gradients beside the buckets


def test_on_three_ranks_the_largest_rank_holds_what_the_calculator_says():
    """N does not divide the tensors: the largest rank's bytes equal memory_per_rank given the model, not Ψ/N."""
    rows = run_sharding(world_sizes=(3,), strategies=("zero1", "fsdp2"), layers=2, width=64, batch=12)
    for r in rows:
        assert r["measured_bytes"] == r["predicted_bytes"], r["strategy"]
        assert not r["bytes_equal_on_all_ranks"]
    z1 = next(r for r in rows if r["strategy"] == "zero1")
    assert z1["measured_bytes"]["optim"] > math.ceil(8 * model_parameters(2, 64) / 3)


def test_pytorch_mixed_precision_keeps_fp32_state_and_fsdp2_gathers_bf16():
    rows = run_sharding(world_sizes=(2,), strategies=("ddp", "fsdp2"), layers=2, width=64, batch=16, precision="amp")
    psi = model_parameters(2, 64)
    for r in rows:
        assert r["measured_bytes"] == r["predicted_bytes"], r["strategy"]
    by = {r["strategy"]: r for r in rows}
    assert by["ddp"]["measured_bytes"]["params"] == by["ddp"]["measured_bytes"]["grads"] == 4 * psi
    assert by["fsdp2"]["measured_bytes"]["gathered"] == 3 * 2 * (64 * 64 + 64)
    assert by["fsdp2"]["comm"]["payload"]["_allgather_base_"] == 2 * 2 * psi   # gathered twice, in bf16


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
    from helpers.dist import launch
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
    from helpers.dist import launch, workers

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


def _right(numels, n):
    ranks = [0] * n
    for k in sorted(numels, reverse=True):
        ranks[ranks.index(min(ranks))] += k
    return ranks


def test_zero1_partition_exercise_accepts_the_rule():
    assert verify("09.zero1_partition", _right)[0]


def _even_split(numels, n):  # Ψ/N: what ZeroRedundancyOptimizer does not do
    return [sum(numels) // n + (i < sum(numels) % n) for i in range(n)]


def _in_order(numels, n):    # greedy, but without sorting first
    ranks = [0] * n
    for k in numels:
        ranks[ranks.index(min(ranks))] += k
    return ranks


def _ties_to_the_last(numels, n):  # sorted and greedy, but a tie goes to the highest rank
    ranks = [0] * n
    for k in sorted(numels, reverse=True):
        low = min(ranks)
        ranks[max(i for i, v in enumerate(ranks) if v == low)] += k
    return ranks


def _round_robin(numels, n):  # sorted, then dealt like cards: counts tensors, not elements
    ranks = [0] * n
    for i, k in enumerate(sorted(numels, reverse=True)):
        ranks[i % n] += k
    return ranks


_TABLE = {(tuple([262144] * 8 + [512] * 8), 3): [786432, 786432, 528384], ((10, 7, 7, 3, 1), 2): [14, 14],
          ((5, 5, 5, 5), 4): [5, 5, 5, 5], ((100, 1, 1, 1, 1, 1), 3): [100, 3, 2], ((8, 6, 4, 4, 2), 3): [8, 8, 8],
          ((3, 9, 1, 9), 2): [12, 10], ((4, 2), 5): [4, 2, 0, 0, 0], ((7,), 1): [7]}


def _table(numels, n):  # the fixed cases answered from a table, Ψ/N for anything else
    return _TABLE.get((tuple(numels), n)) or _even_split(numels, n)


def _calls_the_course(numels, n):
    from helpers.sharding.shares import _zero1_ranks
    return _zero1_ranks(numels, n)


def _through_the_calculator(numels, n):
    from helpers.sharding import largest_share
    from helpers.sharding import shares
    return shares._zero1_ranks(numels, n) if largest_share([(k,) for k in numels], n, "whole") else []


def _wraps_the_checks_rule(numels, n):  # the check's own copy of torch's rule, called from inside
    from helpers.sharding.lesson import _partition_rule
    return _partition_rule(numels, n)


@pytest.mark.parametrize("wrong", [_even_split, _in_order, _ties_to_the_last, _round_robin, _table, _calls_the_course,
                                   _through_the_calculator, _wraps_the_checks_rule])
def test_zero1_partition_exercise_refuses_plausible_wrong_answers(wrong):
    assert all(_right(list(k), n) == v for (k, n), v in _TABLE.items())   # the table is right where it answers
    ok, msg = verify("09.zero1_partition", wrong)
    assert not ok, wrong.__name__


# --- exercises 1 and 2: sizing a cluster from section 1's tables ---------------------------------------------------

_WHOLE_SHARDED = {("ddp", "amp"): (16, 0), ("zero1", "amp"): (8, 8), ("zero2", "amp"): (4, 12), ("zero3", "amp"): (0, 16),
                  ("ddp", "deepspeed"): (16, 0), ("zero1", "deepspeed"): (4, 12), ("zero2", "deepspeed"): (2, 14),
                  ("zero3", "deepspeed"): (0, 16)}   # bytes per parameter left whole, bytes divided by N (section 1)


def _fewest(params, gpu_gb, strategy, precision, whole_sharded=_WHOLE_SHARDED, unit=1e9):
    whole, sharded = whole_sharded[(strategy, precision)]
    room = gpu_gb * unit - whole * params
    if room < 0 or (room == 0 and sharded):
        return None
    return max(1, math.ceil(sharded * params / room)) if sharded else 1


def _largest(gpu_gb, world_size, strategy, precision, whole_sharded=_WHOLE_SHARDED, unit=1e9):
    whole, sharded = whole_sharded[(strategy, precision)]
    return int(gpu_gb * unit / (whole + sharded / world_size))


def test_the_sizing_exercises_accept_the_arithmetic():
    assert verify("09.fewest_gpus", _fewest)[0]
    assert verify("09.largest_params", _largest)[0]


_EVERYTHING_DIVIDED = {k: (0, 16) for k in _WHOLE_SHARDED}                                 # 16Ψ/N whatever the strategy
_FP16_EVERYWHERE = {(s, p): _WHOLE_SHARDED[(s, "deepspeed")] for s, p in _WHOLE_SHARDED}   # DeepSpeed's for autocast


def _fewest_all_divided(params, gpu_gb, strategy, precision):
    return _fewest(params, gpu_gb, strategy, precision, _EVERYTHING_DIVIDED)


def _fewest_wrong_accounting(params, gpu_gb, strategy, precision):
    return _fewest(params, gpu_gb, strategy, precision, _FP16_EVERYWHERE)


def _fewest_in_gib(params, gpu_gb, strategy, precision):
    return _fewest(params, gpu_gb, strategy, precision, unit=2**30)


def _fewest_never_none(params, gpu_gb, strategy, precision):   # "add GPUs until it fits", capped
    return _fewest(params, gpu_gb, strategy, precision) or 10**6


def _fewest_through_the_calculator(params, gpu_gb, strategy, precision):
    from helpers.sharding import memory_per_rank
    for n in range(1, 4097):
        m = memory_per_rank(params, n, strategy, precision)
        if m["total"] - m["gathered"] <= gpu_gb * 1e9:
            return n
    return None


def _fewest_through_a_module_attribute(params, gpu_gb, strategy, precision):
    import helpers.sharding.recipe as r
    r.memory_per_rank(params, 1, strategy, precision)     # reached by another name: still the calculator
    return _fewest(params, gpu_gb, strategy, precision)


_FEWEST_TABLE = {(13 * 10**9, 80, "zero3", "amp"): 3, (13 * 10**9, 80, "zero1", "amp"): None,
                 (13 * 10**9, 80, "zero1", "deepspeed"): 6, (7 * 10**9, 80, "ddp", "amp"): None}


def _fewest_table(params, gpu_gb, strategy, precision):   # right on the cases a student would try, 8 otherwise
    return _FEWEST_TABLE.get((params, gpu_gb, strategy, precision), 8)


def _largest_all_divided(gpu_gb, world_size, strategy, precision):
    return _largest(gpu_gb, world_size, strategy, precision, _EVERYTHING_DIVIDED)


def _largest_wrong_accounting(gpu_gb, world_size, strategy, precision):
    return _largest(gpu_gb, world_size, strategy, precision, _FP16_EVERYWHERE)


def _largest_in_gib(gpu_gb, world_size, strategy, precision):
    return _largest(gpu_gb, world_size, strategy, precision, unit=2**30)


def _largest_through_the_calculator(gpu_gb, world_size, strategy, precision):
    from helpers.sharding import memory_per_rank
    per = memory_per_rank(10**9, world_size, strategy, precision)["total"] / 10**9
    return int(gpu_gb * 1e9 / per)


def _fewest_through_the_unwrapped_calculator(params, gpu_gb, strategy, precision):
    from helpers.sharding import memory_per_rank
    memory_per_rank.__wrapped__(params, 1, strategy, precision)   # past the argument check: still the calculator
    return _fewest(params, gpu_gb, strategy, precision)


def _fewest_through_the_checks_rule(params, gpu_gb, strategy, precision):
    from helpers.sharding.lesson import _fewest_rule
    return _fewest_rule(params, gpu_gb, strategy, precision)


def _largest_through_the_checks_rule(gpu_gb, world_size, strategy, precision):
    from helpers.sharding.lesson import _largest_rule
    return _largest_rule(gpu_gb, world_size, strategy, precision)


def _largest_through_the_unwrapped_calculator(gpu_gb, world_size, strategy, precision):
    from helpers.sharding import memory_per_rank
    per = memory_per_rank.__wrapped__(10**9, world_size, strategy, precision)["total"] / 10**9
    return int(gpu_gb * 1e9 / per)


def _largest_table(gpu_gb, world_size, strategy, precision):
    return {(80, 8, "zero3", "amp"): 40 * 10**9}.get((gpu_gb, world_size, strategy, precision), 10**9)


@pytest.mark.parametrize("exercise, wrong", [
    ("09.fewest_gpus", _fewest_all_divided), ("09.fewest_gpus", _fewest_wrong_accounting),
    ("09.fewest_gpus", _fewest_in_gib), ("09.fewest_gpus", _fewest_never_none),
    ("09.fewest_gpus", _fewest_through_the_calculator), ("09.fewest_gpus", _fewest_through_a_module_attribute),
    ("09.fewest_gpus", _fewest_table),
    ("09.largest_params", _largest_all_divided), ("09.largest_params", _largest_wrong_accounting),
    ("09.largest_params", _largest_in_gib), ("09.largest_params", _largest_through_the_calculator),
    ("09.largest_params", _largest_table),
    ("09.fewest_gpus", _fewest_through_the_unwrapped_calculator), ("09.fewest_gpus", _fewest_through_the_checks_rule),
    ("09.largest_params", _largest_through_the_checks_rule),
    ("09.largest_params", _largest_through_the_unwrapped_calculator),
])
def test_the_sizing_exercises_refuse_plausible_wrong_answers(exercise, wrong):
    assert _fewest(13 * 10**9, 80, "zero1", "deepspeed") == _FEWEST_TABLE[(13 * 10**9, 80, "zero1", "deepspeed")]
    ok, msg = verify(exercise, wrong)
    assert not ok, (exercise, wrong.__name__)


def test_the_calculator_is_refused_by_name_in_the_message():
    ok, msg = verify("09.fewest_gpus", _fewest_through_the_calculator)
    assert not ok and "memory_per_rank" in msg
    from helpers.sharding import memory_per_rank
    assert memory_per_rank(1000)["total"] == 16000          # and it works again after the check


def test_the_check_refuses_the_unwrapped_calculator_and_its_own_rules_by_name():
    for wrong in (_fewest_through_the_unwrapped_calculator, _fewest_through_the_checks_rule):
        ok, msg = verify("09.fewest_gpus", wrong)
        assert not ok and "memory_per_rank" in msg, (wrong.__name__, msg)


def test_calling_comm_per_step_is_not_called_calling_the_calculator():
    """comm_per_step shares memory_per_rank's argument-checking wrapper; calling it is not calling the calculator."""
    def fewest_with_traffic(params, gpu_gb, strategy, precision):
        comm_per_step(params, 2, strategy, precision)
        return _fewest(params, gpu_gb, strategy, precision)

    ok, msg = verify("09.fewest_gpus", fewest_with_traffic)
    assert ok, msg


def test_the_step_prediction_names_its_parts_by_what_was_measured():
    """The strategy's own cost is its step less the plain model's step (one process), not the plain step's rest."""
    from helpers.sharding import plain_rest
    from helpers.sharding.strategies import _predicted_parts
    c = {"fb_local_s": 0.010, "fb_full_s": 0.020, "adam_s": 0.005, "plain_local_s": 0.018, "plain_full_s": 0.030}
    assert plain_rest("ddp", c) == pytest.approx(0.003) and plain_rest("tp", c) == pytest.approx(0.005)
    link = {"all_reduce": (0.0, 0.0)}
    parts = _predicted_parts("zero1", 2, c, {"calls": {}, "payload": {}}, link, own=0.002)
    assert set(parts) == {"own", "plain rest", "compute", "adam", "comm"}
    assert parts["own"] == 0.002 and parts["plain rest"] == pytest.approx(0.003) and parts["adam"] == pytest.approx(0.0025)
    worse = dict(c, plain_local_s=0.001)                       # a plain step faster than its parts: counted as 0
    assert _predicted_parts("ddp", 2, worse, {"calls": {}, "payload": {}}, link, own=0.0)["plain rest"] == 0.0


def test_one_process_step_is_the_sum_of_its_measured_parts():
    """On one process the parts add up to the measured step by construction (own = step − plain step), plus the
    α of any collective a one-rank group still calls."""
    rows = run_sharding(world_sizes=(1,), strategies=("ddp", "tp"), layers=2, width=32, batch=8, repeats=2)
    for r in rows:
        c, parts = r["compute"], r["predicted_parts"]
        assert r["own_raw_s"] == pytest.approx(r["step_s"] - c["plain_full_s"])
        if r["own_raw_s"] >= 0 and r["plain_rest_raw_s"] >= 0:
            assert r["predicted_step_s"] == pytest.approx(r["step_s"] + parts["comm"], rel=1e-9)


def test_a_negative_own_cost_beyond_its_spread_is_said_to_exceed_the_spread_and_no_other():
    from helpers.sharding import beyond_spread

    said = beyond_spread({"ddp": (-1.79e-3, 0.5e-3), "zero1": (-0.4e-3, 1e-3), "fsdp2": (21e-3, 1e-3)})
    assert said.startswith("ddp -1.79 ms (spread ±0.50 ms): below 0 by more than the spread")
    assert "understates the noise between separately timed runs" in said and "zero1" not in said and "fsdp2" not in said
    assert beyond_spread({"ddp": (-0.4e-3, 1e-3), "fsdp2": (21e-3, 1e-3)}) == ""   # within the spread, or a real cost


def test_an_own_cost_within_its_spread_is_said_plainly_to_be_noise_and_overlap_is_not_said_to_only_widen_a_gap():
    from helpers.sharding import OVERLAP_SAID, noise_said

    assert noise_said(1.29e-3, 40.16e-3) == "+1.29 ms, within the timing noise (±40.16 ms): not told apart from 0 here"
    assert noise_said(16.55e-3, 1e-3) == "+16.55 ms"
    assert "other things equal" in OVERLAP_SAID and "too much" in OVERLAP_SAID and "only" not in OVERLAP_SAID


def test_deepspeed_zero3_splits_each_tensor_apart():
    shapes = [(5,), (7,)]                                # 12 elements; N = 4 divides neither tensor
    z3 = memory_per_rank(shapes, 4, "zero3", "deepspeed")
    assert z3["params"] == 2 * (2 + 2)                   # ceil(5/4) + ceil(7/4): each tensor padded and split
    assert z3["optim"] == 12 * (2 + 2)
    assert memory_per_rank(shapes, 4, "zero2", "deepspeed")["optim"] == 12 * 3   # ZeRO-1/2: one flat buffer, ceil(12/4)


def _timed_row(strategy: str, n: int) -> dict:
    from helpers.sharding.strategies import _predicted_parts
    compute = {"fb_full_s": 0.03111, "fb_local_s": 0.01797, "adam_s": 0.01274, "plain_full_s": 0.04461,
               "plain_local_s": 0.031}
    comm = {"calls": {}, "payload": {}}
    return {"strategy": strategy, "world_size": n, "compute": compute,
            "predicted_parts": _predicted_parts(strategy, n, compute, comm, {}, 0.0)}


@pytest.mark.parametrize("strategy", ["ddp", "zero1", "fsdp2", "tp"])
@pytest.mark.parametrize("n", [2, 4])
def test_each_modelled_part_prints_the_timing_it_divides(strategy, n):
    import re

    from helpers.sharding import parts_how
    w = _timed_row(strategy, n)
    how = parts_how(w)
    for k in ("compute", "adam"):
        part = f"{w['predicted_parts'][k] * 1e3:.2f}"
        m = re.search(r"([\d.]+) ms, ÷ (\d+)$", how[k])
        if m:                                            # modelled: the printed timing ÷ the printed N is the part
            assert int(m[2]) == n and f"{float(m[1]) / n:.2f}" == part, (k, how[k], part)
        else:                                            # timed on these ranks: the part is the timing itself
            assert how[k].startswith(f"timed on these {n} ranks"), how[k]
            assert w["predicted_parts"][k] == (w["compute"]["fb_local_s"] if k == "compute" else w["compute"]["adam_s"])


def test_misses_within_the_spread_are_neither_under_nor_over():
    from helpers.sharding import misses_said
    rows = [{"strategy": "ddp", "world_size": 2, "step_s": 0.1, "predicted_step_s": 0.106, "step_spread_s": 0.002},
            {"strategy": "zero1", "world_size": 2, "step_s": 0.1, "predicted_step_s": 0.0999, "step_spread_s": 0.002},
            {"strategy": "fsdp2", "world_size": 2, "step_s": 0.1, "predicted_step_s": 0.07, "step_spread_s": 0.004}]
    said = misses_said(rows)
    assert "zero1 N=2 -0.1%" in said and "ddp N=2 +6.0%" in said
    assert "1 of 3 under" in said and "1 over" in said and "1 within it" in said


def test_worst_miss_is_picked_beyond_the_spread_and_noise_said_only_of_rows_within():
    from helpers.sharding import under_said, within_said, worst_miss
    rows = [{"strategy": "ddp", "world_size": 2, "step_s": 0.1, "predicted_step_s": 0.094, "step_spread_s": 0.002},
            {"strategy": "fsdp2", "world_size": 2, "step_s": 0.1, "predicted_step_s": 0.077, "step_spread_s": 0.026},
            {"strategy": "tp", "world_size": 2, "step_s": 0.1, "predicted_step_s": 0.085, "step_spread_s": 0.003}]
    e, w = worst_miss(rows)
    assert w["strategy"] == "tp" and abs(e + 0.15) < 1e-9          # not fsdp2, whose larger miss is inside its spread
    said = within_said(rows)
    assert "fsdp2 N=2" in said and "ddp" not in said and "tp" not in said and "timing noise" in said
    assert "every miss beyond its spread in this run is under (2 of 3)" in under_said(rows, 2)
    assert "2 cores" in under_said(rows, 2) and "own cost" in under_said(rows, 2)
    over = rows + [{"strategy": "zero1", "world_size": 2, "step_s": 0.1, "predicted_step_s": 0.11, "step_spread_s": 0.002}]
    assert under_said(over, 2) == ""
    inside = [dict(r, step_spread_s=0.5) for r in rows]
    assert worst_miss(inside)[1]["strategy"] == "fsdp2" and under_said(inside, 2) == ""
    assert within_said(rows[:1]) == ""
