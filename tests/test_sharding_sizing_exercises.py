"""Notebook 09's sizing exercises (the fewest ranks, the largest model): the arithmetic passes; other accountings,
units, tables and calls into the calculator or the check's own rules are refused."""
from __future__ import annotations

import math

import pytest

from helpers.core.checks import verify
from helpers.sharding import comm_per_step


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
