"""Notebook 04's exercises: the right answers pass, and the plausible wrong ones are refused.

The numeric answers are computed here from their definitions (ASHA's rule on Ray's own scheduler,
synchronous halving counted epoch by epoch), so a test also proves the stored answer is right.
"""
from types import SimpleNamespace

import pytest

from helpers.core.checks import verify


ASHA_ARRIVALS = [0.2, 0.7, 0.3, 0.4, 0.8]   # exercise 3's accuracies, in the order they reach rung 1


def _ray_asha_continues(accuracies, reduction_factor):
    """How many trials Ray's ASHAScheduler lets go on at rung 1, for results arriving in this order."""
    from ray.tune.schedulers import ASHAScheduler

    sched = ASHAScheduler(metric="acc", mode="max", max_t=16, grace_period=1, reduction_factor=reduction_factor)
    went_on = 0
    for i, acc in enumerate(accuracies):
        trial = SimpleNamespace(trial_id=str(i))
        sched.on_trial_add(None, trial)
        went_on += sched.on_trial_result(None, trial, {"training_iteration": 1, "acc": acc}) == "CONTINUE"
    return went_on


def _sync_halving_epochs(trials, grace, rf, max_t):
    """Epochs trained by synchronous successive halving, counted stretch by stretch."""
    rungs, r = [], grace
    while r <= max_t:
        rungs.append(r)
        r *= rf
    total, alive, done = 0, trials, 0
    for r in rungs:
        total += alive * (r - done)
        done, alive = r, alive // rf
    return total


def test_asha_continue_right_answer_is_what_rays_scheduler_does():
    assert verify("04.asha_continue", _ray_asha_continues(ASHA_ARRIVALS, 2))[0]


def _synchronous_median(accuracies):
    """The classic mistake: keep the trials at or above the median of all of them, as if they had waited."""
    import numpy as np

    return sum(a >= np.median(accuracies) for a in accuracies)


def _median_including_itself(accuracies):
    """Another mistake: record a trial's result before comparing it, so it is compared with itself too."""
    import numpy as np

    return sum(i == 0 or a >= np.percentile(accuracies[:i + 1], 50) for i, a in enumerate(accuracies))


def test_asha_continue_the_classic_mistakes_give_other_answers():
    right = _ray_asha_continues(ASHA_ARRIVALS, 2)
    mistakes = {_synchronous_median(ASHA_ARRIVALS), _median_including_itself(ASHA_ARRIVALS), -(-5 // 2), 5 // 2}
    assert right not in mistakes
    assert all(not verify("04.asha_continue", int(m))[0] for m in mistakes)


@pytest.mark.parametrize("wrong", [3, 5, 2, 1], ids=["synchronous top half (rounded up)", "all",
                                                     "synchronous top half (rounded down)", "first only"])
def test_asha_continue_refuses_wrong_answers(wrong):
    ok, msg = verify("04.asha_continue", wrong)
    assert not ok and "Hint" in msg


def test_sync_epochs_right_answer_is_the_counted_one():
    assert verify("04.sync_epochs", _sync_halving_epochs(16, 1, 2, 8))[0]


@pytest.mark.parametrize("wrong", [16 * 8, 16 * 1 + 8 * 2 + 4 * 4 + 2 * 8, 16 + 8 + 4 + 2],
                         ids=["every trial to max_t", "rung epochs instead of the stretches", "one epoch per rung"])
def test_sync_epochs_refuses_wrong_answers(wrong):
    assert not verify("04.sync_epochs", wrong)[0]


def _epochs_where_ray_asha_stops_by_comparison(max_t, grace_period, rf):
    """Epochs at which Ray's ASHAScheduler stops a weak trial but lets a strong one go on (a fresh scheduler each)."""
    from ray.tune.schedulers import ASHAScheduler

    out = []
    for epoch in range(1, max_t + 1):
        sched = ASHAScheduler(metric="acc", mode="max", max_t=max_t, grace_period=grace_period, reduction_factor=rf)
        strong, weak = SimpleNamespace(trial_id="strong"), SimpleNamespace(trial_id="weak")
        for t in (strong, weak):
            sched.on_trial_add(None, t)
        for e in range(1, epoch):   # both equal before this epoch: neither is stopped there
            for t in (strong, weak):
                sched.on_trial_result(None, t, {"training_iteration": e, "acc": 0.9})
        first = sched.on_trial_result(None, strong, {"training_iteration": epoch, "acc": 0.9})
        second = sched.on_trial_result(None, weak, {"training_iteration": epoch, "acc": 0.1})
        if first == "CONTINUE" and second == "STOP":
            out.append(epoch)
    return out


def test_rungs_right_answer_is_where_rays_scheduler_stops_by_comparison():
    answer = _epochs_where_ray_asha_stops_by_comparison(16, 1, 2)
    assert answer == [1, 2, 4, 8]
    assert verify("04.rungs_rf2", answer)[0]


def test_rungs_refuse_what_asha_rungs_returns():
    from helpers.tuning import asha_rungs

    assert asha_rungs(max_t=16, grace_period=1, reduction_factor=2) == [1, 2, 4, 8, 16]   # max_t is among them
    assert not verify("04.rungs_rf2", asha_rungs(max_t=16, grace_period=1, reduction_factor=2))[0]


@pytest.mark.parametrize("wrong", [[1, 2, 4, 8, 16], [1, 3, 9], [2, 4, 8, 16], [2, 4, 8], [16, 8, 4, 2, 1]],
                         ids=["with max_t", "rf 3", "no grace period", "no grace period, no max_t", "reversed, max_t"])
def test_rungs_refuse_wrong_answers(wrong):
    assert not verify("04.rungs_rf2", wrong)[0]


def test_grid_distinct_is_the_cube_root_of_the_budget():
    import itertools

    import numpy as np

    axis = np.linspace(0.1, 0.9, 4)
    grid = list(itertools.product(axis, repeat=3))   # a full grid over 3 parameters, same values per axis
    assert len(grid) == 64
    assert verify("04.grid_distinct", len({p[0] for p in grid}))[0]


@pytest.mark.parametrize("wrong", [64, 8, 16, 21, 3], ids=["every trial distinct (random search)", "square root (a 2-D grid)",
                                                          "64 / 4", "64 / 3", "the number of parameters"])
def test_grid_distinct_refuses_wrong_answers(wrong):
    assert not verify("04.grid_distinct", wrong)[0]


NOTEBOOK_04 = "notebooks/04_hyperparameter_tuning.ipynb"


def _cells_04():
    import json
    from pathlib import Path

    return json.loads((Path(__file__).resolve().parents[1] / NOTEBOOK_04).read_text())["cells"]


def test_no_stored_output_of_04_holds_the_rungs_answer():
    """A list of epochs printed anywhere in 04 (cell 15's rungs, say) must not pass exercise 1."""
    import re

    for cell in _cells_04():
        for out in cell.get("outputs", []):
            text = "".join(out.get("text", "")) + "".join(out.get("data", {}).get("text/plain", ""))
            for found in re.findall(r"\[(\d+(?:, *\d+)*)\]", text):
                assert not verify("04.rungs_rf2", [int(x) for x in found.split(",")])[0], found


def test_the_suggested_rerun_of_section_3_does_not_print_the_rungs_answer():
    """Exercise 5 suggests rerunning section 3 with another RF: its printed rungs must not answer exercise 1."""
    import re

    from helpers.tuning import asha_rungs

    text = "".join("".join(c["source"]) for c in _cells_04())
    rf = int(re.search(r"rerun section 3 with `RF = (\d+)`", text).group(1))
    max_t = int(re.search(r"MAX_T, RF, TRIALS = (\d+),", text).group(1))
    rungs = asha_rungs(max_t=max_t, grace_period=1, reduction_factor=rf)
    for printed in (rungs, [r for r in rungs if r < max_t]):
        assert not verify("04.rungs_rf2", printed)[0], (rf, printed)


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_grid_distinct_hint_gives_no_formula(lang):
    """The hint points at the idea; the cube (k · k · k points) would reduce it to a cube root."""
    import json
    from pathlib import Path

    from helpers.tuning.lesson import EXERCISES

    ex = next(e for e in EXERCISES if e.id == "04.grid_distinct")
    ko = json.loads((Path(__file__).resolve().parents[1] / "i18n/ko/messages.json").read_text())
    hint = ex.hint if lang == "en" else ko["exercises"][ex.id]["hint"]
    assert not any(s in hint for s in ("·", "^", "³", "cube", "root", "k k k", "세제곱"))


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_rungs_hint_does_not_name_the_last_rung(lang):
    """Exercise 1's twist is that max_t stops no trial for its score: the hint must not point at max_t."""
    import json
    from pathlib import Path

    from helpers.tuning.lesson import EXERCISES

    ex = next(e for e in EXERCISES if e.id == "04.rungs_rf2")
    ko = json.loads((Path(__file__).resolve().parents[1] / "i18n/ko/messages.json").read_text())
    hint = ex.hint if lang == "en" else ko["exercises"][ex.id]["hint"]
    assert not any(s in hint for s in ("max_t", "16", "stop_last_trials", "last rung", "whatever its score", "마지막"))
