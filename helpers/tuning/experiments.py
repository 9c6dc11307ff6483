"""One Ray Tune experiment, run and summarised: the recipe's tuner built, fitted and read back (04).

Split from ``helpers.tuning.recipe`` (the code notebook 04 shows, which imports no instrument):
:func:`run_tuner` builds the scheduler, the searcher and the ``Tuner`` with the recipe's functions,
times the run and hands the ``ResultGrid`` to ``helpers.tuning.instruments.summarize``.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.answers import columns
from ..core.i18n import tr
from .instruments import startup_of, summarize
from .recipe import STARTUP, _check_budget, build_tuner, fit, make_scheduler, make_searcher, search_space

if TYPE_CHECKING:  # Ray is imported lazily: importing helpers never starts it
    from ray.tune.schedulers import TrialScheduler
    from ray.tune.search import Searcher

__all__ = ["run_tuner", "searcher_table"]


def run_tuner(name: str, num_samples: int = 8, max_t: int = 9, scheduler: "str | TrialScheduler" = "asha",
              searcher: "str | Searcher" = "random", grace_period: int = 1, reduction_factor: int = 3, seed: int = 0,
              space: dict | None = None, storage: str | Path = "ray_results", verbose: int = 1,
              startup: int = STARTUP) -> dict:
    """One Ray Tune experiment on the digits; returns a plain summary and the ``ResultGrid`` (04).

    ``scheduler`` and ``searcher`` are Tune objects, or names that :func:`make_scheduler` and
    :func:`make_searcher` build. The summary (:func:`helpers.tuning.instruments.summarize`) holds every
    trial's learning curve, the epochs spent, the best configuration and its accuracy (the best
    value at any epoch, what ``get_best_result(scope="all")`` ranks by), and ``grid``, Tune's own
    ``ResultGrid``. A run stopped with Jupyter's Stop is summarised from the trials that reported.
    If every trial fails (a search space the trainable cannot use, say), it raises
    ``TrialsFailed``, whose first line is the trainable's own error; Ray's report is chained to it.

    Example::

        init_ray()
        asha = run_tuner("asha", num_samples=24, max_t=9, reduction_factor=3)
        asha["best_config"], asha["epochs"]
    """
    _check_budget(num_samples, max_t, grace_period, reduction_factor)
    space = dict(space or search_space())
    pauses = scheduler == "bohb" or type(scheduler).__name__ == "HyperBandForBOHB"
    space.update(max_epochs=max_t, seed=seed, checkpoint=pauses)
    if isinstance(scheduler, str):
        scheduler = make_scheduler(scheduler, max_t, grace_period, reduction_factor)
    if isinstance(searcher, str):
        searcher = make_searcher(searcher, seed, startup)
    tuner = build_tuner(name, space, scheduler, searcher, num_samples, storage, verbose)
    t0 = time.perf_counter()
    grid = fit(tuner)
    out = summarize(grid, time.perf_counter() - t0)
    if out["interrupted"]:
        print(tr("tuning.stopped_early", "Stopped before the end: {done} of {total} trials reported results ({none} "
                 "reported none); the summary covers those.", done=out["trials"], total=len(grid),
                 none=out["trials_without_result"]))
    return {**out, "grid": grid}


def _startup(name: str, n: int | None) -> str:
    """A searcher's random start-up in its own unit (``n``: random search's trial count), in the course's language
    (04)."""
    return (tr("tuning.startup_hyperopt", "{n} configs proposed", n=n) if name == "hyperopt" else
            tr("tuning.startup_optuna", "{n} trials finished", n=n) if name == "optuna" else
            tr("tuning.startup_bohb", "{n} results on a budget", n=n) if name == "bohb" else
            tr("tuning.startup_all", "{n} trials, all of them", n=n))


def searcher_table(results: dict[str, dict], searchers: dict) -> str:
    """Each searcher's run (:func:`run_tuner`'s summary, by name) beside its random start-up, read from the searcher
    object (:func:`~helpers.tuning.instruments.startup_of`): best validation accuracy, epochs, best configuration (04)."""
    lines = [f"{'searcher':>9} {'random start-up':>22} {'best val acc':>12} {'epochs':>7}  best configuration"]
    for name, r in results.items():
        c, start = r["best_config"], _startup(name, startup_of(searchers[name]) if name != "random" else r["trials"])
        start = " " * max(0, 22 - columns(start)) + start   # right-aligned by columns: a Korean letter takes two
        lines.append(f"{name:>9} {start} {r['best_accuracy']:>12.3f} {r['epochs']:>7}  "
                     f"lr {c['lr']:.2e}, hidden {c['hidden']}, batch {c['batch_size']}")
    return "\n".join(lines)
