"""Tuning helpers (helpers.tuning) that need no running Ray: designs, the GP steps, rungs, the space."""
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
