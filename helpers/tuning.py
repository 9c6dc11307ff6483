"""Hyperparameter tuning: grid vs random, Bayesian optimisation, and Ray Tune (04_hyperparameter_tuning).

All of the Ray API the course uses is in this one module (``init_ray``, ``search_space``,
``run_tuner``), so the next Ray release is a one-file change. Ray is imported lazily: importing
``helpers`` never starts it.
"""
from __future__ import annotations

import logging
import math
import os
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch
from torch import nn

METRIC, MODE = "val_acc", "max"


# --- grid vs random --------------------------------------------------------------------------------

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


def plot_grid_vs_random(res: dict):
    """The two designs over the objective, with the 1-D projection that matters (04)."""
    import matplotlib.pyplot as plt

    from .plots import finish

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    xs = np.linspace(0, 1, 200)
    for ax, name in zip(axes, ("grid", "random")):
        pts = np.array(res[name]["points"])
        ax.plot(xs, [toy_objective(x, 0) * 0.25 + 1.02 for x in xs], "k-", lw=1)
        ax.scatter(pts[:, 0], pts[:, 1], c=res[name]["scores"], cmap="viridis", vmin=0, vmax=1, s=60, zorder=3)
        for x in pts[:, 0]:
            ax.axvline(x, color="gray", lw=0.5, alpha=0.5)
        ax.set(xlim=(0, 1), ylim=(0, 1.3), xlabel="important parameter", ylabel="unimportant parameter",
               title=f"{name}: {res[name]['distinct_important']} distinct values, best {res[name]['best']:.2f}")
    fig.tight_layout()
    return finish(fig)


# --- Bayesian optimisation, shown ---------------------------------------------------------------------

def toy_1d(x: np.ndarray | float) -> np.ndarray | float:
    """A 1-D function with two bumps to maximise (04)."""
    return np.sin(3 * x) + 0.6 * np.exp(-((x - 2.2) ** 2) / 0.1)


def bayes_opt_steps(f: Callable = toy_1d, bounds: tuple[float, float] = (0.0, 3.0), n_init: int = 3,
                    n_iter: int = 4, seed: int = 0) -> list[dict]:
    """Bayesian optimisation with scikit-learn's Gaussian process and expected improvement (04).

    Each step records what the GP believes (mean and standard deviation on a grid), the
    expected improvement, and the next point it proposes: the EI maximum.
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
        gp = GaussianProcessRegressor(kernel=Matern(length_scale=0.5, nu=2.5), alpha=1e-6, normalize_y=True,
                                      random_state=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # length-scale bound warnings on few points
            gp.fit(np.array(X)[:, None], np.array(Y))
        mu, sd = gp.predict(grid[:, None], return_std=True)
        best = max(Y)
        z = (mu - best) / np.maximum(sd, 1e-12)
        ei = (mu - best) * norm.cdf(z) + sd * norm.pdf(z)
        nxt = float(grid[int(np.argmax(ei))])
        steps.append({"X": list(X), "Y": list(Y), "grid": grid, "mean": mu, "std": sd, "ei": ei, "next": nxt})
        X.append(nxt)
        Y.append(float(f(nxt)))
    return steps


def plot_bayes_steps(steps: list[dict], f: Callable = toy_1d):
    """Small multiples: the GP's belief, the expected improvement, and the next proposal (04)."""
    import matplotlib.pyplot as plt

    from .plots import finish

    fig, axes = plt.subplots(2, len(steps), figsize=(3.2 * len(steps), 4.6), sharex=True,
                             gridspec_kw={"height_ratios": [3, 1]})
    for i, s in enumerate(steps):
        ax, ax2 = axes[0, i], axes[1, i]
        ax.plot(s["grid"], f(s["grid"]), "k:", lw=1, label="true function")
        ax.plot(s["grid"], s["mean"], "C0", label="GP mean")
        ax.fill_between(s["grid"], s["mean"] - 2 * s["std"], s["mean"] + 2 * s["std"], color="C0", alpha=0.2,
                        label="± 2 std")
        ax.scatter(s["X"], s["Y"], color="k", zorder=3, s=15, label="tried")
        ax.axvline(s["next"], color="C3", ls="--", label="next")
        ax.set_title(f"step {i + 1}: {len(s['X'])} points", fontsize=9)
        ax2.plot(s["grid"], s["ei"], "C3")
        ax2.set_xlabel("x")
        if i == 0:
            ax.legend(fontsize=6, loc="lower left")
            ax2.set_ylabel("expected\nimprovement", fontsize=8)
    fig.tight_layout()
    return finish(fig)


# --- Ray: start, search space, trainable ---------------------------------------------------------------

def ray_temp_dir() -> Path:
    """A short temp folder of the course's for Ray's sockets and logs (not Ray's /tmp/ray default)."""
    return Path(tempfile.gettempdir()) / "beyond-one-gpu-ray"


def init_ray(num_cpus: int | None = None, quiet: bool = True) -> dict:
    """Start Ray sized to this machine (every CPU, every GPU), quietly; reuse it if already running (04)."""
    import ray

    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # the classic table reporter, with chosen columns
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if not ray.is_initialized():
        ray.init(num_cpus=num_cpus or os.cpu_count(), include_dashboard=False, log_to_driver=not quiet,
                 logging_level=logging.ERROR if quiet else logging.INFO, _temp_dir=str(ray_temp_dir()),
                 configure_logging=True)
    if quiet:
        for name in ("ray", "ray.tune", "ray.train", "ray.data"):
            logging.getLogger(name).setLevel(logging.ERROR)
    res = ray.cluster_resources()
    return {"cpus": int(res.get("CPU", 0)), "gpus": int(res.get("GPU", 0))}


def shutdown_ray() -> None:
    """Stop Ray if it runs (04)."""
    import ray

    if ray.is_initialized():
        ray.shutdown()


def search_space(lr: tuple[float, float] = (1e-4, 3e-2), hidden: Sequence[int] = (16, 32, 64, 128),
                 batch_size: Sequence[int] = (64, 128, 256)) -> dict:
    """The course's search space: log-uniform learning rate, hidden size, batch size (04).

    Checked before any trial starts: a bad bound or an empty choice raises a ``ValueError`` here,
    not an obscure error in a worker minutes later.
    """
    from ray import tune

    lo, hi = lr
    if not (isinstance(lo, (int, float)) and isinstance(hi, (int, float)) and 0 < lo < hi):
        raise ValueError(f"learning-rate bounds must satisfy 0 < low < high for a log-uniform search, got {lr}")
    for name, choices in (("hidden", hidden), ("batch_size", batch_size)):
        if len(choices) == 0:
            raise ValueError(f"{name} needs at least one choice, got an empty list")
        if any(not isinstance(c, int) or c < 1 for c in choices):
            raise ValueError(f"{name} choices must be positive ints, got {list(choices)}")
    return {"lr": tune.loguniform(lo, hi), "hidden": tune.choice(list(hidden)),
            "batch_size": tune.choice(list(batch_size))}


def train_digits(config: dict) -> None:
    """Ray Tune trainable: the course CNN on the digits, one ``tune.report`` per epoch (04).

    Reports ``val_acc``, ``val_loss`` and ``epoch``; Tune counts each report as one
    ``training_iteration``, which is what ASHA's ``max_t`` and ``grace_period`` count.
    """
    from ray import tune

    from .data import make_loaders
    from .device import get_device
    from .models import DigitsCNN
    from .train import evaluate, train_one_epoch

    torch.set_num_threads(1)
    torch.manual_seed(config.get("seed", 0))
    loaders = make_loaders(int(config["batch_size"]), seed=config.get("seed", 0))
    # this trial's own device decision: Ray sets CUDA_VISIBLE_DEVICES to the GPU it gave the trial
    # (cuda:0 is then that GPU), and hides every GPU from a trial that was given none
    device = get_device()
    model = DigitsCNN(hidden=int(config["hidden"])).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=float(config["lr"]))
    for epoch in range(1, int(config.get("max_epochs", 9)) + 1):
        train_one_epoch(model, loaders["train"], opt)
        val = evaluate(model, loaders["val"])
        tune.report({"val_acc": val["acc"], "val_loss": val["loss"], "epoch": epoch})


def asha_rungs(max_t: int, grace_period: int = 1, reduction_factor: int = 3) -> list[int]:
    """The epochs at which Ray's ASHA compares trials: grace_period · rf^k for k = 0, 1, … (04).

    The same formula as Ray's ``ASHAScheduler`` (one bracket): ``int(log(max_t / grace_period) /
    log(rf)) + 1`` rungs. ``max_t`` is where every trial stops, and a rung only if it is one of these.
    """
    if grace_period < 1 or reduction_factor < 2 or max_t < grace_period:
        raise ValueError("need grace_period >= 1, reduction_factor >= 2 and max_t >= grace_period")
    n = int(np.log(max_t / grace_period) / np.log(reduction_factor) + 1)
    return [grace_period * reduction_factor ** k for k in range(n)]


def run_tuner(name: str, num_samples: int = 8, max_t: int = 9, scheduler: str = "asha", searcher: str = "random",
              grace_period: int = 1, reduction_factor: int = 3, seed: int = 0, space: dict | None = None,
              storage: str | Path = "ray_results", verbose: int = 1) -> dict:
    """One Ray Tune experiment on the digits; returns a plain summary (04).

    ``scheduler``: "asha", "fifo" (every trial to ``max_t``) or "bohb" (``HyperBandForBOHB``);
    ``searcher``: "random" (seeded, so two runs sample the same configurations), "hyperopt",
    "optuna" or "bohb" (``TuneBOHB``). The summary holds every trial's learning curve, the
    epochs spent, the best configuration and its accuracy.
    """
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler, FIFOScheduler, HyperBandForBOHB
    from ray.tune.search.basic_variant import BasicVariantGenerator

    space = dict(space or search_space())
    space.update(max_epochs=max_t, seed=seed)
    if scheduler == "asha":
        sched = ASHAScheduler(max_t=max_t, grace_period=grace_period, reduction_factor=reduction_factor)
    elif scheduler == "fifo":
        sched = FIFOScheduler()
    elif scheduler == "bohb":
        sched = HyperBandForBOHB(time_attr="training_iteration", max_t=max_t, reduction_factor=reduction_factor)
    else:
        raise ValueError(f"unknown scheduler {scheduler!r}; choose 'asha', 'fifo' or 'bohb'")
    if searcher == "random":
        alg = BasicVariantGenerator(random_state=seed)
    elif searcher == "hyperopt":
        from ray.tune.search.hyperopt import HyperOptSearch
        alg = HyperOptSearch(random_state_seed=seed)
    elif searcher == "optuna":
        import optuna
        from ray.tune.search.optuna import OptunaSearch
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        alg = OptunaSearch(sampler=optuna.samplers.TPESampler(seed=seed))
    elif searcher == "bohb":
        from ray.tune.search.bohb import TuneBOHB
        alg = TuneBOHB(seed=seed)
    else:
        raise ValueError(f"unknown searcher {searcher!r}; choose 'random', 'hyperopt', 'optuna' or 'bohb'")
    reporter = tune.CLIReporter(metric_columns={"val_acc": "val acc", "training_iteration": "epochs"},
                                parameter_columns={"lr": "lr", "hidden": "hidden", "batch_size": "batch"},
                                max_report_frequency=60, print_intermediate_tables=False, sort_by_metric=True,
                                max_progress_rows=num_samples)
    tuner = tune.Tuner(
        tune.with_resources(train_digits, _trial_resources()),
        param_space=space,
        tune_config=tune.TuneConfig(metric=METRIC, mode=MODE, scheduler=sched, search_alg=alg,
                                    num_samples=num_samples, reuse_actors=True),
        run_config=tune.RunConfig(name=name, storage_path=str(Path(storage).resolve()), verbose=verbose,
                                  progress_reporter=reporter),
    )
    t0 = time.perf_counter()
    with warnings.catch_warnings():  # BOHB's ConfigSpace/pandas/statsmodels stack warns about defaults
        warnings.simplefilter("ignore", FutureWarning)
        warnings.filterwarnings("ignore", category=RuntimeWarning, module="statsmodels")
        grid = tuner.fit()
    seconds = time.perf_counter() - t0
    return summarize(grid, seconds)


def _trial_resources() -> dict:
    """One CPU per trial, and a fraction of a GPU when there are GPUs (two trials share one)."""
    import ray

    gpus = ray.cluster_resources().get("GPU", 0)
    return {"cpu": 1, "gpu": 0.5} if gpus else {"cpu": 1}


def summarize(grid: Any, seconds: float) -> dict:
    """Learning curves, epochs spent and the best trial of a ``ResultGrid`` (04)."""
    curves, configs, errors = [], [], 0
    for r in grid:
        if r.error:
            errors += 1
            continue
        df = r.metrics_dataframe
        curves.append([float(v) for v in df[METRIC]])
        configs.append(_plain(r.config))
    if not curves:
        raise RuntimeError(f"every trial failed ({errors}); look at the first error: {next(iter(grid)).error}")
    best = grid.get_best_result(metric=METRIC, mode=MODE, scope="all")
    return {"curves": curves, "configs": configs, "epochs": sum(len(c) for c in curves),
            "best_accuracy": max(max(c) for c in curves), "best_config": _plain(best.config),
            "errors": errors, "seconds": seconds, "trials": len(curves)}


def _plain(config: dict) -> dict:
    """The tuned hyperparameters as plain Python numbers (searchers may hand back numpy types)."""
    return {"lr": float(config["lr"]), "hidden": int(config["hidden"]), "batch_size": int(config["batch_size"])}


def retrain_best(config: dict, epochs: int = 9, seed: int = 0, device: str | torch.device = "cpu") -> dict:
    """Train the winning configuration from scratch on ``device``; evaluate on the held-out test split (04)."""
    from .data import make_loaders
    from .models import DigitsCNN
    from .train import evaluate, train

    torch.manual_seed(seed)
    loaders = make_loaders(int(config["batch_size"]), seed=seed)
    model = DigitsCNN(hidden=int(config["hidden"])).to(device)
    hist = train(model, loaders["train"], loaders["val"], epochs=epochs, lr=float(config["lr"]), progress=False)
    return {"val_acc": hist.val_acc[-1], "test_acc": evaluate(model, loaders["test"])["acc"]}


def plot_asha(asha: dict, full: dict, rungs: list[int]):
    """Every trial's learning curve under ASHA (stopped ones end early) next to full runs (04)."""
    import matplotlib.pyplot as plt

    from .plots import finish

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
    for ax, res, title in ((axes[0], asha, "ASHA"), (axes[1], full, "every trial to the end")):
        for c in res["curves"]:
            ax.plot(range(1, len(c) + 1), c, "o-", ms=3, lw=1, alpha=0.8)
        for r in rungs:
            if r < max(len(c) for c in full["curves"]):  # a rung at max_t compares nothing: every trial stops there
                ax.axvline(r, color="gray", ls=":", lw=1)
        ax.set(title=f"{title}: {res['epochs']} epochs, best {res['best_accuracy']:.3f}", xlabel="epoch")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("validation accuracy")
    fig.tight_layout()
    return finish(fig)


def rung_table(max_t: int, reduction_factor: int, grace_period: int = 1) -> str:
    """Rungs and how many of n trials may pass each (04)."""
    rungs = asha_rungs(max_t, grace_period, reduction_factor)
    return ", ".join(f"epoch {r}" for r in rungs) + f" (keep the top 1/{reduction_factor} at each)"


OLD_TO_NEW = [
    ("tune.run(train, config=..., num_samples=...)", "tune.Tuner(train, param_space=..., tune_config=TuneConfig(num_samples=...)).fit()"),
    ("from ray.tune.suggest.hyperopt import HyperOptSearch", "from ray.tune.search.hyperopt import HyperOptSearch"),
    ("tune.report(accuracy=acc)", "tune.report({\"accuracy\": acc})"),
    ("ray.train.report(...) inside a Tune trainable", "ray.tune.report(...)"),
    ("CLIReporter(...) passed to tune.run(progress_reporter=...)", "RunConfig(progress_reporter=CLIReporter(...))"),
    ("resources_per_trial={\"cpu\": 1, \"gpu\": 0.5}", "tune.with_resources(train, {\"cpu\": 1, \"gpu\": 0.5})"),
    ("analysis.get_best_trial(metric, mode)", "result_grid.get_best_result(metric, mode)"),
    ("local_dir=\"~/ray_results\"", "RunConfig(storage_path=\"/absolute/path\")"),
]


def _old_tune_report(config: dict) -> None:
    """A trainable written for old Ray: keyword metrics to tune.report."""
    from ray import tune

    tune.report(accuracy=0.5)


def _train_report_in_tune(config: dict) -> None:
    """A trainable that calls Ray Train's report inside Tune."""
    import ray.train

    ray.train.report({"accuracy": 0.5})


def old_api_errors(storage: str | Path = "ray_results") -> dict:
    """What old forms do today, for real: the import, and two trainables run by a Tuner (04)."""
    from ray import tune

    out = {}
    try:
        __import__("ray.tune.suggest.hyperopt")
    except Exception as e:
        out["from ray.tune.suggest.hyperopt import HyperOptSearch"] = f"{type(e).__name__}: {str(e).splitlines()[0]}"
    quiet = [logging.getLogger(n) for n in ("ray.tune", "ray.tune.tune", "ray.tune.execution.tune_controller")]
    levels = [q.level for q in quiet]
    for label, fn in (("tune.report(accuracy=...) in a trainable", _old_tune_report),
                      ("ray.train.report(...) in a Tune trainable", _train_report_in_tune)):
        for q in quiet:  # the failing trials are the point here: keep Tune from printing their tracebacks too
            q.setLevel(logging.CRITICAL)
        try:
            grid = tune.Tuner(fn, run_config=tune.RunConfig(name=fn.__name__.strip("_"), verbose=0,
                                                            storage_path=str(Path(storage).resolve()))).fit()
        finally:
            for q, lv in zip(quiet, levels):
                q.setLevel(lv)
        err = grid[0].error
        last = str(err).strip().splitlines()[-1] if err else "no error"
        out[label] = f"{type(err).__name__ if err else ''}: {last}"
    return out
