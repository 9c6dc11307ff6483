"""Tuning helpers (helpers.tuning) that need no running Ray: designs, the GP steps, rungs, the space, the schedulers
and searchers, a paused trial's checkpoint."""
import pytest

from helpers import tuning as T


def test_random_tries_more_distinct_values_than_the_grid():
    res = T.grid_vs_random(3, seed=0)
    assert res["grid"]["distinct_important"] == 3 and res["random"]["distinct_important"] == 9


def test_bayes_steps_propose_inside_bounds_and_improve():
    steps = T.bayes_opt_steps(n_init=3, n_iter=3, seed=1)
    assert len(steps) == 3 and all(0 <= s["next"] <= 3 for s in steps)
    assert len(steps[-1]["X"]) == 5
    assert (steps[0]["std"] >= 0).all()


@pytest.mark.parametrize("args, rungs", [((9, 1, 3), [1, 3, 9]), ((16, 1, 4), [1, 4, 16]), ((16, 1, 2), [1, 2, 4, 8, 16])])
def test_asha_rungs(args, rungs):
    assert T.asha_rungs(*args) == rungs


def test_bad_rungs():
    with pytest.raises(ValueError, match="reduction_factor >= 2"):
        T.asha_rungs(9, 1, 1)


@pytest.mark.parametrize("kwargs, match", [
    ({"lr": (-1e-3, 1e-1)}, "0 < low < high"),
    ({"lr": (1e-1, 1e-3)}, "0 < low < high"),
    ({"hidden": []}, "at least one choice"),
    ({"batch_size": [0, 32]}, "positive ints"),
])
def test_bad_search_space_is_refused_before_any_trial(kwargs, match):
    with pytest.raises(ValueError, match=match):
        T.search_space(**kwargs)


def test_unknown_scheduler_or_searcher():
    with pytest.raises(ValueError, match="unknown scheduler"):
        T.run_tuner("x", scheduler="pbt")
    with pytest.raises(ValueError, match="unknown searcher"):
        T.run_tuner("x", searcher="grid")


# --- issue 22: ASHA's decisions read from a run, the searchers' start-up, BOHB's paused trials resume -----------

def test_rung_decisions_counts_what_went_on_below_the_final_cutoff():
    curves = [[0.1, 0.2, 0.3], [0.9], [0.5, 0.6, 0.7], [0.95, 0.96, 0.97]]   # reached rung 1 in this order
    d = T.rung_decisions(curves, [1, 3], reduction_factor=3, max_t=3)
    assert len(d) == 1 and d[0]["reached"] == 4 and d[0]["continued"] == 3
    assert d[0]["continued_below"] == 2 and d[0]["lowest_continued"] == 0.1   # 0.1 and 0.5 < cutoff of all four


def test_asha_work_says_what_was_spent_and_saved_and_the_speed_clause_only_off_the_margin():
    did, why = T.asha_work(0.31, 0.47, 1.00)
    assert "spent 31% of the epochs and 47% of the time" in did and "saved the rest (69% and 53% here)" in did
    assert "work it saved" not in did and why == ""   # what it spent is not what it saved; 1.00 needs no reason
    assert T.asha_work(0.31, 0.47, 1.04)[1] == "" and T.asha_work(0.31, 0.47, 0.96)[1] == ""   # within 5%
    assert "1.20 times as long" in T.asha_work(0.31, 0.47, 1.20)[1] and "0.80 times" in T.asha_work(0.31, 0.47, 0.80)[1]


def test_searchers_start_up_is_what_was_asked():
    assert T.startup_of(T.make_searcher("hyperopt", startup=4)) == 4
    assert T.startup_of(T.make_searcher("optuna", startup=4)) == 4
    assert T.startup_of(T.make_searcher("random")) is None


def test_a_paused_trial_resumes_from_its_checkpoint(tmp_path):
    """HyperBandForBOHB pauses trials: train_digits(checkpoint=True) must go on from the epoch it saved."""
    import shutil
    from unittest import mock

    from ray import tune

    saved, reports = [], []

    def report(metrics, checkpoint=None):
        reports.append(metrics["epoch"])
        if checkpoint is not None:
            dst = tmp_path / f"ckpt{len(saved)}"
            shutil.copytree(checkpoint.path, dst)
            saved.append(tune.Checkpoint.from_directory(str(dst)))

    config = {"lr": 1e-3, "hidden": 16, "batch_size": 256, "checkpoint": True}
    with mock.patch("ray.tune.report", report), mock.patch("ray.tune.get_checkpoint", lambda: None), \
            mock.patch("ray.get_gpu_ids", lambda: []):
        T.train_digits({**config, "max_epochs": 1})
    with mock.patch("ray.tune.report", report), mock.patch("ray.tune.get_checkpoint", lambda: saved[-1]), \
            mock.patch("ray.get_gpu_ids", lambda: []):
        T.train_digits({**config, "max_epochs": 2})
    assert reports == [1, 2] and len(saved) == 2


def test_bohb_builds_its_model_at_the_result_count_startup_of_says():
    """HpBandSter's BOHB needs min_points_in_model + d + 1 results on one budget, not min_points_in_model."""
    import warnings

    from ray.tune.search.bohb import TuneBOHB
    from ray.tune.search.bohb.bohb_search import _BOHBJobWrapper

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = TuneBOHB(space=T.search_space(), metric="val_acc", mode="max", seed=0)
        need = T.startup_of(s)
        assert need == s.bohber.min_points_in_model + 3 + 1 == 8   # 3 hyperparameters
        for n in range(1, need + 1):
            assert T.bohb_model_budgets(s) == [], f"model built after {n - 1} results, before {need}"
            s.bohber.new_result(_BOHBJobWrapper(-0.5 - 0.01 * n, 1.0, s.suggest(str(n))))
    assert T.bohb_model_budgets(s) == [1.0] and T.bohb_results_per_budget(s) == {1.0: need}


def test_make_searcher_says_the_bohb_start_up_that_startup_of_computes():
    from helpers.tuning import make_searcher

    doc = " ".join(make_searcher.__doc__.split())
    assert "min_points_in_model + d + 1" in doc and "2d + 2" in doc and "dimensions + 1 configurations" not in doc


def test_a_milestone_result_the_scheduler_stops_never_reaches_bohb():
    """04 says BOHB records at most one result per trial and budget, none for a report answered with STOP:
    Tune hands a STOP-answered result to the searcher's on_trial_complete, and TuneBOHB records nothing there."""
    import inspect
    import json
    import re
    import warnings
    from pathlib import Path

    from ray.tune.execution.tune_controller import TuneController
    from ray.tune.search.bohb import TuneBOHB

    src = inspect.getsource(TuneController._process_trial_result)
    stop = src.index("if decision == TrialScheduler.STOP:")
    branch = src[stop:src.index("self._search_alg.on_trial_result", stop)]
    assert re.search(r"\n\s*else:\n", branch), "the searcher's on_trial_result is no longer only in the not-STOP branch"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = TuneBOHB(space=T.search_space(), metric="val_acc", mode="max", seed=0)
        result = {"val_acc": 0.5, "hyperband_info": {"budget": 1.0}}
        s.suggest("stopped"), s.suggest("paused")
        s.on_trial_complete("stopped", result)   # what the controller calls for a STOP-answered report
        assert T.bohb_results_per_budget(s) == {}
        s.on_trial_result("paused", result)      # a report answered with CONTINUE or PAUSE
        assert T.bohb_results_per_budget(s) == {1.0: 1}
    cells = json.loads((Path(__file__).resolve().parents[1] / "notebooks/04_hyperparameter_tuning.ipynb").read_text())["cells"]
    text = "".join("".join(c["source"]) for c in cells)
    assert "need {need} trials" not in text and "at most one per trial and budget" in text
    assert "need at least {need} trials" in text and "milestones, one per budget" not in text


def test_the_searcher_table_reads_each_start_up_from_the_searcher_object():
    from types import SimpleNamespace

    from helpers.tuning import searcher_table

    algos = {"random": object(), "hyperopt": SimpleNamespace(algo=SimpleNamespace(keywords={"n_startup_jobs": 3})),
             "optuna": SimpleNamespace(_sampler=SimpleNamespace(_n_startup_trials=4))}
    best = {"best_config": {"lr": 0.0105, "hidden": 64, "batch_size": 64}, "best_accuracy": 0.9781, "epochs": 24,
            "trials": 6}
    lines = searcher_table({name: best for name in algos}, algos).splitlines()
    assert lines[0].split()[:3] == ["searcher", "random", "start-up"] and len(lines) == 4
    assert lines[1].split()[:7] == ["random", "6", "trials,", "all", "of", "them", "0.978"]
    assert len({len(line.split(" 0.978")[0]) for line in lines[1:]}) == 1   # the start-up column right-aligned
    assert "3 configs proposed" in lines[2] and "4 trials finished" in lines[3]
    assert lines[3].endswith("lr 1.05e-02, hidden 64, batch 64")
