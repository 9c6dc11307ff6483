"""Notebook 09's exercise checks: the zero1_partition check's rule is torch's, and a sizing answer that never ends is
stopped in time and refused."""
from __future__ import annotations

import sys
import time

import torch
from torch.distributed.optim import ZeroRedundancyOptimizer

from helpers.core.checks import verify
from helpers.sharding import lesson


class _Partitioner:
    """Just what ``ZeroRedundancyOptimizer._partition_parameters`` reads, for a world size no process group here has."""

    _get_min_index = ZeroRedundancyOptimizer._get_min_index
    _partition_param_group = ZeroRedundancyOptimizer._partition_param_group

    def __init__(self, numels: list[int], world_size: int) -> None:
        self.world_size, self._partition_parameters_cache = world_size, []
        self.param_groups = [{"params": [torch.empty(k) for k in numels]}]


def _torchs_partition(numels: list[int], world_size: int) -> list[int]:
    groups = ZeroRedundancyOptimizer._partition_parameters(_Partitioner(numels, world_size))
    return [sum(p.numel() for g in rank for p in g["params"]) for rank in groups]


def test_the_zero1_checks_own_rule_is_torchs_on_the_cases_it_draws():
    """The check judges the student's split with its own copy of the rule (it never calls torch's private method);
    here, in the tests only, that copy is held against torch's ``_partition_parameters`` on fresh cases."""
    for _ in range(5):
        for numels, n in lesson._partition_cases():
            assert lesson._partition_rule(list(numels), n) == _torchs_partition(list(numels), n), (numels, n)


_WHOLE_SHARDED = {"amp": {"ddp": (16, 0), "zero1": (8, 8), "zero2": (4, 12), "zero3": (0, 16)},
                  "deepspeed": {"ddp": (16, 0), "zero1": (4, 12), "zero2": (2, 14), "zero3": (0, 16)}}  # section 1


def _fits(params, gpu_gb, strategy, precision, n):
    whole, sharded = _WHOLE_SHARDED[precision][strategy]
    return whole * params + sharded * params / n <= gpu_gb * 1e9


def _fewest_counting_up(params, gpu_gb, strategy, precision):
    """Adds GPUs until the state fits: right where some number fits, an endless loop where none does."""
    n = 1
    while not _fits(params, gpu_gb, strategy, precision, n):
        n += 1
    return n


def _fewest_counting_up_forgiving(params, gpu_gb, strategy, precision):
    """The same loop with every error inside it swallowed (``except Exception``): the time limit still ends it."""
    n = 1
    while True:
        try:
            if _fits(params, gpu_gb, strategy, precision, n):
                return n
        except Exception:  # noqa: BLE001 (the student habit under test)
            pass
        n += 1


def _fewest_counting_up_with_none(params, gpu_gb, strategy, precision):
    """The right answer, by the same loop: None first where the parts kept whole alone overfill the GPU."""
    whole, sharded = _WHOLE_SHARDED[precision][strategy]
    if whole * params > gpu_gb * 1e9 or (sharded and whole * params == gpu_gb * 1e9):
        return None
    return _fewest_counting_up(params, gpu_gb, strategy, precision)


def test_a_sizing_answer_that_never_ends_is_stopped_and_refused(monkeypatch):
    monkeypatch.setattr(lesson, "_TIME_LIMIT_S", 0.5)
    for wrong in (_fewest_counting_up, _fewest_counting_up_forgiving):
        start = time.monotonic()
        ok, msg = verify("09.fewest_gpus", wrong)
        assert not ok and "still running after 0.5 s" in msg and "None" in msg, (wrong.__name__, msg)
        assert time.monotonic() - start < 20, wrong.__name__


def test_the_time_limit_leaves_a_right_answer_with_a_loop_alone():
    trace = sys.gettrace()
    ok, msg = verify("09.fewest_gpus", _fewest_counting_up_with_none)
    assert ok, msg
    assert sys.gettrace() is trace       # the check's clock is gone afterwards


def test_the_zero1_hint_asks_for_the_idea_and_names_no_function_that_holds_the_answer():
    """Printing torch's ``_partition_parameters`` would give the answer away: the hint asks questions instead."""
    from helpers.core.checks import exercises

    hint = exercises()["09.zero1_partition"].hint
    assert "_partition_parameters" not in hint and "getsource" not in hint and "_partition_rule" not in hint
    assert "order" in hint and "?" in hint


def _fewest_capped(cap):
    """Searches N = 1 … cap only and says None beyond: right on every small case, wrong where hundreds of GPUs fit."""
    def fewest(params, gpu_gb, strategy, precision):
        return next((n for n in range(1, cap + 1) if _fits(params, gpu_gb, strategy, precision, n)), None)
    return fewest


def test_a_search_capped_at_8_or_64_gpus_is_refused():
    """The fixed cases need hundreds to thousands of GPUs (ZeRO-3, and a part kept whole just under the GPU)."""
    for cap in (8, 64):
        for _ in range(3):   # fresh cases each time: the refusal must not depend on the draw
            ok, msg = verify("09.fewest_gpus", _fewest_capped(cap))
            assert not ok and "not the fewest GPUs" in msg, (cap, msg)
    assert verify("09.fewest_gpus", _fewest_capped(10**4))[0]     # the same search uncapped enough is right


def test_the_largest_params_hint_does_not_give_the_formula():
    """Its skeleton's stored output shows the hint: it asks a question, it does not spell out bytes ÷ N per parameter."""
    from helpers.core.checks import exercises

    hint = exercises()["09.largest_params"].hint
    assert "÷" not in hint and "/" not in hint and "gpu_gb" not in hint and "bytes" not in hint.lower(), hint
    assert "?" in hint
