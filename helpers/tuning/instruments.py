"""Tuning, seen and measured: grid vs random, a Gaussian process step by step, ASHA's rungs, summaries (04)."""
from __future__ import annotations

import logging
import re
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..core.i18n import tr
from ..launching.ray_cluster import keep_stop_handlers
from .recipe import METRIC

__all__ = ["toy_objective", "grid_vs_random", "toy_1d", "bayes_opt_steps", "asha_rungs",
           "rung_decisions", "startup_of", "bohb_results_needed", "bohb_model_budgets", "bohb_results_per_budget",
           "TrialsFailed", "summarize", "OLD_TO_NEW", "old_api_errors", "asha_work"]


def toy_objective(important: float, unimportant: float) -> float:
    """A score where only ``important`` matters (peak at 0.62); ``unimportant`` adds nothing (04)."""
    return float(np.exp(-((important - 0.62) ** 2) / 0.005) + 0.0 * unimportant)


def grid_vs_random(n_per_axis: int = 3, seed: int = 0) -> dict:
    """A 3×3 grid and 9 random points on the toy objective: distinct values tried and best found (04)."""
    axis = np.linspace(0.1, 0.9, n_per_axis)
    grid = [(a, b) for a in axis for b in axis]
    rng = np.random.default_rng(seed)
    rand = [tuple(p) for p in rng.uniform(0, 1, size=(n_per_axis ** 2, 2))]
    out = {}
    for name, pts in (("grid", grid), ("random", rand)):
        scores = [toy_objective(*p) for p in pts]
        out[name] = {"points": pts, "scores": scores, "best": max(scores),
                     "distinct_important": len({round(p[0], 9) for p in pts})}
    return out


def toy_1d(x: np.ndarray | float) -> np.ndarray | float:
    """A 1-D function with two bumps to maximise (04)."""
    return np.sin(3 * x) + 0.6 * np.exp(-((x - 2.2) ** 2) / 0.1)


def bayes_opt_steps(f: Callable = toy_1d, bounds: tuple[float, float] = (0.0, 3.0), n_init: int = 3,
                    n_iter: int = 5, seed: int = 0, min_length_scale: float = 0.1) -> list[dict]:
    """Bayesian optimisation with scikit-learn's Gaussian process and expected improvement (04).

    Each step records what the GP believes (mean and standard deviation on a grid), the
    length scale fitted to the points (by maximum likelihood, kept at least ``min_length_scale``),
    the expected improvement, and the next point it proposes: the EI maximum.
    """
    from scipy.stats import norm
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import Matern

    rng = np.random.default_rng(seed)
    grid = np.linspace(*bounds, 400)
    X = list(rng.uniform(*bounds, n_init))
    Y = [float(f(x)) for x in X]
    steps = []
    for _ in range(n_iter):
        kernel = Matern(length_scale=0.5, length_scale_bounds=(min_length_scale, 10.0), nu=2.5)
        gp = GaussianProcessRegressor(kernel=kernel, alpha=1e-6, normalize_y=True, random_state=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # length-scale bound warnings on few points
            gp.fit(np.array(X)[:, None], np.array(Y))
        mu, sd = gp.predict(grid[:, None], return_std=True)
        best = max(Y)
        z = (mu - best) / np.maximum(sd, 1e-12)
        ei = (mu - best) * norm.cdf(z) + sd * norm.pdf(z)
        nxt = float(grid[int(np.argmax(ei))])
        steps.append({"X": list(X), "Y": list(Y), "grid": grid, "mean": mu, "std": sd, "ei": ei, "next": nxt,
                      "length_scale": float(gp.kernel_.length_scale)})
        X.append(nxt)
        Y.append(float(f(nxt)))
    return steps


def asha_rungs(max_t: int, grace_period: int = 1, reduction_factor: int = 3) -> list[int]:
    """The epochs at which Ray's ASHA compares trials: grace_period · rf^k for k = 0, 1, … (04).

    The same formula as Ray's ``ASHAScheduler`` (one bracket): ``int(log(max_t / grace_period) /
    log(rf)) + 1`` rungs. ``max_t`` is where every trial stops, and a rung only if it is one of these.
    """
    if grace_period < 1 or reduction_factor < 2 or max_t < grace_period:
        raise ValueError("need grace_period >= 1, reduction_factor >= 2 and max_t >= grace_period")
    n = int(np.log(max_t / grace_period) / np.log(reduction_factor) + 1)
    return [grace_period * reduction_factor ** k for k in range(n)]


def rung_decisions(curves: list[list[float]], rungs: list[int], reduction_factor: float, max_t: int) -> list[dict]:
    """What ASHA did at each rung below ``max_t``, read from the learning curves of a run (04).

    For each rung: how many trials reached it, how many went on, the cutoff that *all* of their
    results at that rung give (the top 1/rf: Ray's percentile), and how many of the trials that went
    on were below it: ASHA judged each one against the results recorded when it arrived.
    """
    out = []
    for r in (r for r in rungs if r < max_t):
        reached = [c for c in curves if len(c) >= r]
        went_on = [c for c in reached if len(c) > r]
        cutoff = float(np.nanpercentile([c[r - 1] for c in reached], (1 - 1 / reduction_factor) * 100))
        out.append({"rung": r, "reached": len(reached), "continued": len(went_on), "cutoff_all": cutoff,
                    "continued_below": sum(c[r - 1] < cutoff for c in went_on),
                    "lowest_continued": min((c[r - 1] for c in went_on), default=float("nan"))})
    return out


def asha_work(epoch_share: float, time_share: float, speed: float, margin: float = 0.05) -> tuple[str, str]:
    """ASHA's epochs and trainable time as shares of the full run's: what it did and saved (04); the clause on
    ``speed`` (its time over the full run's on the same epochs) only when that is off 1 by more than ``margin``."""
    did = tr("tuning.asha_did", "so ASHA spent {epochs} of the epochs and {time} of the time inside the trainables: "
             "that is the work it did; it saved the rest ({epochs_rest} and {time_rest} here), measured",
             epochs=f"{epoch_share:.0%}", time=f"{time_share:.0%}", epochs_rest=f"{1 - epoch_share:.0%}",
             time_rest=f"{1 - time_share:.0%}")
    why = tr("tuning.asha_why", "(why the same epochs took {speed} times as long, more than {margin} off 1, is not "
             "separated by this run)", speed=f"{speed:.2f}", margin=f"{margin:.0%}")   # said after a space (04)
    return did, " " + why if abs(speed - 1) > margin else ""


def startup_of(searcher: Any) -> int | None:
    """How many results a Ray searcher needs before its model proposes, read from the object (04).

    HyperOpt: ``n_startup_jobs`` of its TPE (``HyperOptSearch(n_initial_points=...)``), configurations
    proposed; Optuna: the sampler's ``n_startup_trials``, finished trials; BOHB, once a run has set
    its model up: results *on one budget*, :func:`bohb_results_needed`. None for others.
    """
    algo = getattr(searcher, "algo", None)
    if algo is not None and "n_startup_jobs" in getattr(algo, "keywords", {}):
        return int(algo.keywords["n_startup_jobs"])
    sampler = getattr(searcher, "_sampler", None)
    if sampler is not None and hasattr(sampler, "_n_startup_trials"):
        return int(sampler._n_startup_trials)
    bohber = getattr(searcher, "bohber", None)  # BOHB's model, made when the run starts
    if bohber is not None and hasattr(bohber, "min_points_in_model"):
        return bohb_results_needed(bohber)
    return None


def bohb_results_needed(bohber: Any) -> int:
    """Results on one budget before HpBandSter's BOHB builds its model: ``min_points_in_model + d + 1`` (04).

    ``new_result`` in ``hpbandster/optimizers/config_generators/bohb.py`` sorts a budget's results,
    takes the best ``n_good = max(min_points_in_model, 15 % of them)`` for the good density and
    the rest (up to ``n_bad``) for the bad one, and builds nothing while either has ``d`` rows or
    fewer (``d`` = the number of hyperparameters). With ``min_points_in_model >= d + 1`` (its
    default is ``d + 1``) and fewer than 27 results, the bad density gets ``N - min_points_in_model``
    rows: the model needs ``N >= min_points_in_model + d + 1``.
    """
    d = len(bohber.configspace.get_hyperparameters())
    return int(bohber.min_points_in_model) + d + 1


def bohb_model_budgets(searcher: Any) -> list | None:
    """The budgets (epochs) on which a ``TuneBOHB`` searcher has built its density model; None if not readable (04).

    Empty after a run means every configuration BOHB proposed was a random draw.
    """
    models = getattr(getattr(searcher, "bohber", None), "kde_models", None)
    return None if models is None else sorted(float(b) for b in models)


def bohb_results_per_budget(searcher: Any) -> dict[float, int]:
    """How many results a ``TuneBOHB`` searcher recorded on each budget (epochs) in a run (04)."""
    configs = getattr(getattr(searcher, "bohber", None), "configs", None) or {}
    return {float(b): len(v) for b, v in sorted(configs.items())}


class TrialsFailed(RuntimeError):
    """Every trial of a Tune run raised: the trainable's own error first, then what to do (04).

    Raised from Ray's report of the first failed trial (its ``__cause__``), whose long header and
    worker traceback stay out of the message. In Jupyter only the message is shown.
    """

    def _render_traceback_(self) -> list[str]:
        """What IPython shows for this error: the message alone (Ray's full report is ``__cause__``)."""
        return [f"{type(self).__name__}: {self}"]


def _trial_cause(error: BaseException) -> str:
    """``Type: message`` of what the trainable raised, from Ray's report of a failed trial (one line, no colours)."""
    cause = getattr(error, "cause", None)  # RayTaskError: the trainable's own exception, as raised in the worker
    if isinstance(cause, BaseException):
        text = f"{type(cause).__name__}: {cause}"
    else:  # another kind of failure: Ray's report ends with the exception's own line
        lines = [ln for ln in str(error).strip().splitlines() if ln.strip()]
        text = lines[-1] if lines else type(error).__name__
    text = re.sub(r"\x1b\[[0-9;]*m", "", text).strip()
    return text.splitlines()[0] if text else type(error).__name__


def summarize(grid: Any, seconds: float) -> dict:
    """Learning curves, epochs spent and the best trial of a ``ResultGrid`` (04).

    Trials that reported nothing (stopped by Jupyter's Stop before their first epoch ended, or
    never started) are counted, not summarised; ``interrupted`` says whether the experiment
    ended before every trial finished.
    """
    curves, configs, failed, silent = [], [], [], 0
    for r in grid:
        if r.error:
            failed.append(r)
            continue
        df = r.metrics_dataframe
        if df is None or METRIC not in df:
            silent += 1
            continue
        curves.append([float(v) for v in df[METRIC]])
        configs.append(_plain(r.config))
    interrupted = grid.num_terminated + grid.num_errors < len(grid)
    errors = len(failed)
    if failed and not curves:
        first = failed[0]
        config = {k: v for k, v in (first.config or {}).items() if k not in ("max_epochs", "seed", "checkpoint")}
        raise TrialsFailed(tr(
            "tuning.trials_failed",
            "{cause}\nThe trainable raised this in {failed} of {total} trials (the first with config {config}). "
            "Check the search space (space=): every key the trainable reads needs values it accepts, e.g. lr > 0 "
            "and positive ints for hidden and batch_size; search_space() builds one and checks it first.\n"
            "Ray's full report of the trial is this error's __cause__ (and error.txt in {path}).",
            cause=_trial_cause(first.error), failed=errors, total=len(grid), config=repr(config)[:200],
            path=getattr(first, "path", None) or "the trial's folder")) from first.error
    if failed:
        print(tr("tuning.some_failed", "{failed} of {total} trials failed, the first with {cause}; the summary "
                 "covers the trials that reported.", failed=errors, total=len(grid),
                 cause=_trial_cause(failed[0].error)))
    if not curves:
        raise RuntimeError(f"no trial reported a result ({len(grid)} started)"
                           + ("; the experiment was stopped before any epoch ended" if interrupted else ""))
    best = max(range(len(curves)), key=lambda i: max(curves[i]))
    return {"curves": curves, "configs": configs, "epochs": sum(len(c) for c in curves),
            "best_accuracy": max(curves[best]), "best_config": configs[best], "errors": errors,
            "seconds": seconds, "trials": len(curves), "trials_without_result": silent, "interrupted": interrupted}


OLD_TO_NEW = [
    ("tune.run(train, config=..., num_samples=...)", "tune.Tuner(train, param_space=..., tune_config=TuneConfig(num_samples=...)).fit()"),
    ("from ray.tune.suggest.hyperopt import HyperOptSearch", "from ray.tune.search.hyperopt import HyperOptSearch"),
    ("tune.report(accuracy=acc)", "tune.report({\"accuracy\": acc})"),
    ("ray.train.report(...) inside a Tune trainable", "ray.tune.report(...)"),
    ("CLIReporter(...) passed to tune.run(progress_reporter=...)",
     "RunConfig(progress_reporter=CLIReporter(...)): always in Jupyter; in a script with RAY_AIR_NEW_OUTPUT=0"),
    ("resources_per_trial={\"cpu\": 1, \"gpu\": 0.5}", "tune.with_resources(train, {\"cpu\": 1, \"gpu\": 0.5})"),
    ("analysis.get_best_trial(metric, mode)", "result_grid.get_best_result(metric, mode)"),
    ("local_dir=\"~/ray_results\"", "RunConfig(storage_path=\"/absolute/path\")"),
]


def _old_forms(config: dict) -> None:
    """A trainable written for old Ray: keyword metrics to tune.report, or Ray Train's report inside Tune."""
    if config["form"] == "tune.report(accuracy=...)":
        from ray import tune

        tune.report(accuracy=0.5)
    else:
        import ray.train

        ray.train.report({"accuracy": 0.5})


_OLD_FORMS = ("tune.report(accuracy=...)", "ray.train.report(...)")


def old_api_errors(storage: str | Path = "ray_results") -> dict:
    """What old forms do today, for real: the import, and two trainables run by one Tuner (04)."""
    from ray import tune

    out = {}
    try:
        __import__("ray.tune.suggest.hyperopt")
    except Exception as e:
        out["from ray.tune.suggest.hyperopt import HyperOptSearch"] = f"{type(e).__name__}: {str(e).splitlines()[0]}"
    quiet = [logging.getLogger(n) for n in ("ray.tune", "ray.tune.tune", "ray.tune.execution.tune_controller")]
    levels = [q.level for q in quiet]
    for q in quiet:  # the failing trials are the point here: keep Tune from printing their tracebacks too
        q.setLevel(logging.CRITICAL)
    try:
        with keep_stop_handlers():  # fit() leaves Tune's own SIGINT handler installed: Stop would be lost
            grid = tune.Tuner(_old_forms, param_space={"form": tune.grid_search(list(_OLD_FORMS))},
                              run_config=tune.RunConfig(name="old_forms", verbose=0, progress_reporter=tune.CLIReporter(),
                                                        storage_path=str(Path(storage).resolve()))).fit()
    finally:
        for q, lv in zip(quiet, levels):
            q.setLevel(lv)
    by_form = {(r.config or {}).get("form"): r.error for r in grid}
    said = (tr("tuning.old_report_kwargs", "tune.report(accuracy=...) in a trainable"),   # where each was called
            tr("tuning.old_train_report", "ray.train.report(...) in a Tune trainable"))
    for form, label in zip(_OLD_FORMS, said):
        err = by_form.get(form)
        last = str(err).strip().splitlines()[-1] if err else "no error"
        out[label] = f"{type(err).__name__ if err else ''}: {last}"
    return out


def _plain(config: dict) -> dict:
    """The tuned hyperparameters as plain Python numbers (searchers may hand back numpy types)."""
    return {"lr": float(config["lr"]), "hidden": int(config["hidden"]), "batch_size": int(config["batch_size"])}
