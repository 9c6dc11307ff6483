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


# --- the code exercise: a trainable that reports config["x"] * epoch for epochs 1, 2, 3 -------------------------

def right(config):
    from ray import tune

    for epoch in range(1, 4):
        config["train_epoch"]()
        tune.report({"score": config["x"] * epoch})


def reports_what_training_returned(config):  # the score train_epoch returns: the same numbers, accepted
    from ray import tune

    for _ in range(3):
        tune.report({"score": config["train_epoch"]()})


def trains_all_then_reports(config):  # every score computed before the first report: ASHA could stop nothing
    from ray import tune

    scores = [config["train_epoch"]() for _ in range(3)]
    for score in scores:
        tune.report({"score": score})


def reports_before_training(config):  # each epoch's score reported before that epoch trains
    from ray import tune

    for epoch in range(1, 4):
        tune.report({"score": config["x"] * epoch})
        config["train_epoch"]()


def never_trains(config):  # the right scores, but no epoch of training between them
    from ray import tune

    for epoch in range(1, 4):
        tune.report({"score": config["x"] * epoch})


def ignores_config(config):  # passes a check that only tries x = 2.0
    from ray import tune

    for epoch in range(1, 4):
        tune.report({"score": 2.0 * epoch})


def table(config):  # a hard-coded table of the configs a fixed check would try
    from ray import tune

    for v in {2.0: [2.0, 4.0, 6.0], -0.5: [-0.5, -1.0, -1.5]}.get(config["x"], [0.0, 0.0, 0.0]):
        tune.report({"score": v})


def old_keyword_form(config):
    from ray import tune

    for epoch in range(1, 4):
        tune.report(score=config["x"] * epoch)


def once_at_the_end(config):
    from ray import tune

    tune.report({"score": config["x"] * 3})


def epochs_from_zero(config):
    from ray import tune

    for epoch in range(3):
        tune.report({"score": config["x"] * epoch})


def epoch_as_a_keyword(config):  # the recorder took it; Ray 2.60's tune.report raises TypeError
    from ray import tune

    for epoch in range(1, 4):
        tune.report({"score": config["x"] * epoch}, epoch=epoch)


def metrics_by_name(config):  # report(metrics={...}) binds like Ray's own: accepted
    from ray import tune

    for epoch in range(1, 4):
        config["train_epoch"]()
        tune.report(metrics={"score": config["x"] * epoch})


def never_reports(config):
    return [config["x"] * e for e in (1, 2, 3)]


def wraps_the_course_trainable(config):
    from helpers.tuning import train_digits

    train_digits(config)


def test_the_right_trainable_passes():
    for _ in range(5):  # a new random config every time
        assert verify("04.trainable", right)[0]
        assert verify("04.trainable", reports_what_training_returned)[0]


def test_train_epoch_returns_the_score_the_exercise_says():
    """Exercise 5 says config["train_epoch"]() returns config["x"] * epoch: reporting what it returns is right."""
    seen = []

    def compares(config):
        from ray import tune

        for epoch in range(1, 4):
            seen.append((config["train_epoch"](), config["x"] * epoch))
            tune.report({"score": config["x"] * epoch})

    assert verify("04.trainable", compares)[0]
    assert len(seen) == 9 and all(got == pytest.approx(said) for got, said in seen), seen


@pytest.mark.parametrize("wrong", [trains_all_then_reports, reports_before_training, never_trains], ids=lambda f: f.__name__)
def test_a_report_out_of_step_with_training_is_refused(wrong):
    """The right scores, reported all after training or before each epoch trains: refused, with the order said."""
    ok, msg = verify("04.trainable", wrong)
    assert not ok and "order" in msg, msg


@pytest.mark.parametrize("wrong", [ignores_config, table, old_keyword_form, once_at_the_end, epochs_from_zero,
                                   epoch_as_a_keyword, never_reports, wraps_the_course_trainable,
                                   trains_all_then_reports, reports_before_training, never_trains],
                         ids=lambda f: f.__name__)
def test_wrong_trainables_are_refused(wrong):
    for _ in range(5):
        ok, msg = verify("04.trainable", wrong)
        assert not ok and "Hint" in msg, msg


def _defined_in_a_notebook(source: str, name: str):
    """A function defined the way a notebook cell defines it: in a namespace of its own, with its imports."""
    namespace: dict = {}
    exec(source, namespace)
    return namespace[name]


def test_right_trainables_in_other_correct_forms_pass():
    imported_report = _defined_in_a_notebook(
        "from ray.tune import report\n"
        "def my_trainable(config):\n"
        "    for epoch in (1, 2, 3):\n"
        "        config['train_epoch']()\n"
        "        report({'score': config['x'] * epoch})\n", "my_trainable")
    tensor_score = _defined_in_a_notebook(
        "import torch\nfrom ray import tune\n"
        "def my_trainable(config):\n"
        "    for epoch in (1, 2, 3):\n"
        "        config['train_epoch']()\n"
        "        tune.report({'score': torch.tensor(config['x'], dtype=torch.float64) * epoch})\n", "my_trainable")
    for fn in (imported_report, tensor_score):
        ok, msg = verify("04.trainable", fn)
        assert ok, msg
    import ray.tune
    assert imported_report.__globals__["report"] is ray.tune.report   # the check put the student's name back


def test_ray_train_report_is_refused_with_a_pointer_to_tune_report():
    train_report = _defined_in_a_notebook(
        "import ray.train\n"
        "def my_trainable(config):\n"
        "    for epoch in (1, 2, 3):\n"
        "        ray.train.report({'score': config['x'] * epoch})\n", "my_trainable")
    ok, msg = verify("04.trainable", train_report)
    assert not ok and "ray.tune.report" in msg and "ray.train.report" in msg, msg


def test_extra_arguments_are_refused_as_ray_would_refuse_them():
    """tune.report({...}, epoch=e) records fine, but Ray's report raises TypeError: the check says so."""
    ok, msg = verify("04.trainable", epoch_as_a_keyword)
    assert not ok and "refuse" in msg, msg
    assert verify("04.trainable", metrics_by_name)[0]


def test_ray_air_session_report_is_refused_with_a_pointer_to_tune_report():
    """The older Ray AIR form, under each way of reaching it, gets a message that names it, not 'never called'."""
    forms = {
        "module": "from ray.air import session\n"
                  "def my_trainable(config):\n"
                  "    for epoch in (1, 2, 3):\n"
                  "        session.report({'score': config['x'] * epoch})\n",
        "name": "from ray.air.session import report\n"
                "def my_trainable(config):\n"
                "    for epoch in (1, 2, 3):\n"
                "        report({'score': config['x'] * epoch})\n",
        "dotted": "import ray.air.session\n"
                  "def my_trainable(config):\n"
                  "    for epoch in (1, 2, 3):\n"
                  "        ray.air.session.report({'score': config['x'] * epoch})\n",
    }
    import ray.air.session

    original = ray.air.session.report
    for form, source in forms.items():
        fn = _defined_in_a_notebook(source, "my_trainable")
        ok, msg = verify("04.trainable", fn)
        assert not ok and "ray.air.session.report" in msg and "ray.tune.report" in msg and "never called" not in msg, (form, msg)
    assert ray.air.session.report is original   # the check put Ray's function back
