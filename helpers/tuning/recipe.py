"""Hyperparameter tuning with Ray Tune: the code notebook 04 teaches (its recipe), in today's API.

All of the Ray API the course uses is here and in ``helpers.launching.ray_cluster``, so the next Ray
release is a two-file change. Ray is imported lazily: importing ``helpers`` never starts it.
"""
from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import torch

from ..core.data import make_loaders
from ..core.i18n import tr
from ..core.models import DigitsCNN
from ..core.train import evaluate, train, train_one_epoch
from ..launching.ray_cluster import _environ, keep_stop_handlers

if TYPE_CHECKING:  # Ray is imported lazily: importing helpers never starts it
    from ray import tune
    from ray.tune.schedulers import TrialScheduler
    from ray.tune.search import Searcher

__all__ = ["METRIC", "MODE", "search_space", "train_digits", "trial_device", "retrain_best", "STARTUP", "make_scheduler",
           "make_searcher", "build_tuner", "fit", "trial_resources"]

METRIC = "val_acc"  # what the trainable reports each epoch (04)
MODE = "max"       # and the tuner maximises it


def search_space(lr: tuple[float, float] = (1e-4, 3e-2), hidden: Sequence[int] = (16, 32, 64, 128),
                 batch_size: Sequence[int] = (64, 128, 256)) -> dict:
    """The course's search space: log-uniform learning rate, hidden size, batch size (04).

    Checked before any trial starts: a bad bound or an empty choice raises a ``ValueError`` here,
    not an obscure error in a worker minutes later.
    """
    from ray import tune

    if not isinstance(lr, (tuple, list)) or len(lr) != 2:
        raise ValueError(tr("tuning.lr_pair", "lr must be the two bounds of a log-uniform range, (low, high) such as "
                            "(1e-4, 3e-2); got {lr}", lr=repr(lr)))
    lo, hi = lr
    if not (isinstance(lo, (int, float)) and isinstance(hi, (int, float)) and 0 < lo < hi < math.inf):
        raise ValueError(tr("tuning.lr_bounds", "learning-rate bounds must satisfy 0 < low < high for a log-uniform "
                            "search, got {lr}", lr=str(lr)))
    for name, choices in (("hidden", hidden), ("batch_size", batch_size)):
        if len(choices) == 0:
            raise ValueError(tr("tuning.no_choice", "{name} needs at least one choice, got an empty list", name=name))
        if any(not isinstance(c, int) or c < 1 for c in choices):
            raise ValueError(tr("tuning.bad_choice", "{name} choices must be positive ints, got {got}", name=name,
                                got=str(list(choices))))
    return {"lr": tune.loguniform(lo, hi), "hidden": tune.choice(list(hidden)),
            "batch_size": tune.choice(list(batch_size))}


def train_digits(config: dict) -> None:
    """Ray Tune trainable: the course CNN on the digits, one ``tune.report`` per epoch (04).

    Reports ``val_acc``, ``val_loss`` and ``epoch``; Tune counts each report as one
    ``training_iteration``, which is what ASHA's ``max_t`` and ``grace_period`` count. With
    ``config["checkpoint"]`` it saves the model and optimizer with every report and resumes from
    the last one: a scheduler that *pauses* trials (``HyperBandForBOHB``, PBT) needs that, or a
    resumed trial starts again from epoch 1. ASHA only stops trials, so its runs skip it.
    """
    import tempfile

    from ray import tune

    torch.set_num_threads(1)
    torch.manual_seed(config.get("seed", 0))
    loaders = make_loaders(int(config["batch_size"]), seed=config.get("seed", 0))
    device = trial_device()  # this trial's own device decision: from the GPUs Ray gave it
    model = DigitsCNN(hidden=int(config["hidden"])).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=float(config["lr"]))
    start = 1
    if config.get("checkpoint") and (ckpt := tune.get_checkpoint()):  # a paused trial, resumed
        with ckpt.as_directory() as d:
            state = torch.load(Path(d) / "state.pt", map_location=device)
        model.load_state_dict(state["model"]), opt.load_state_dict(state["opt"])
        start = state["epoch"] + 1
    for epoch in range(start, int(config.get("max_epochs", 9)) + 1):
        train_one_epoch(model, loaders["train"], opt)
        val = evaluate(model, loaders["val"])
        metrics = {"val_acc": val["acc"], "val_loss": val["loss"], "epoch": epoch}
        if not config.get("checkpoint"):
            tune.report(metrics)
            continue
        with tempfile.TemporaryDirectory() as d:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "epoch": epoch}, Path(d) / "state.pt")
            tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(d))


def trial_device() -> torch.device:
    """The device of a Ray trial or task: ``cuda:0`` if Ray gave it a GPU, else the CPU (04).

    Ray sets ``CUDA_VISIBLE_DEVICES`` to the GPUs it gave a trial, so ``cuda:0`` is the first of
    them. To a trial given no GPU, Ray 2.60 hides nothing: it leaves ``CUDA_VISIBLE_DEVICES`` as it
    was unless ``RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO=1`` (``set_visible_accelerator_ids`` in
    ``ray/_private/utils.py``; https://github.com/ray-project/ray/issues/54868), so
    ``torch.cuda.is_available()`` is still true there. The trial decides from ``ray.get_gpu_ids()``,
    the GPUs Ray gave it.
    """
    import ray

    return torch.device("cuda", 0) if ray.get_gpu_ids() else torch.device("cpu")


def _check_budget(num_samples: int, max_t: int, grace_period: int, reduction_factor: int) -> None:
    """Refuse a budget Ray would misread before any trial starts (Ray reads num_samples=-1 as 'forever')."""
    def positive_int(v: object) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and v >= 1

    if not positive_int(num_samples):
        raise ValueError(f"num_samples must be a positive int (how many configurations to try), got {num_samples!r}; "
                         "Ray would read -1 as 'sample forever'")
    if not positive_int(max_t):
        raise ValueError(f"max_t must be a positive int (the most epochs a trial may train), got {max_t!r}")
    if not positive_int(grace_period) or grace_period > max_t:
        raise ValueError(f"grace_period must be an int from 1 to max_t={max_t}, got {grace_period!r}")
    if not isinstance(reduction_factor, (int, float)) or isinstance(reduction_factor, bool) or reduction_factor < 2:
        raise ValueError(f"reduction_factor must be at least 2 (ASHA keeps the top 1/rf), got {reduction_factor!r}")


def trial_resources() -> dict:
    """One CPU per trial, and half a GPU when every node has a GPU (two trials share one) (04).

    On a cluster where some node has no GPU, trials ask for CPUs only, so that every node can run
    them (a trial that asks for a GPU can only be placed on a node that has one). ``init_ray(nodes=2)``
    gives its worker node no GPU, so there every trial asks for a CPU only, and trains on the CPU
    because :func:`trial_device` finds no GPU given to it.
    """
    import ray

    nodes = [n for n in ray.nodes() if n["Alive"]]
    with_gpu = all(n["Resources"].get("GPU", 0) >= 1 for n in nodes) and nodes
    return {"cpu": 1, "gpu": 0.5} if with_gpu else {"cpu": 1}


def retrain_best(config: dict, epochs: int = 9, seed: int = 0, device: str | torch.device = "cpu") -> dict:
    """Train the winning configuration from scratch on ``device``; evaluate on the held-out test split (04).

    Returns the last validation accuracy, the test accuracy and the sizes of both splits (``n_val``, ``n_test``).
    """
    torch.manual_seed(seed)
    loaders = make_loaders(int(config["batch_size"]), seed=seed)
    model = DigitsCNN(hidden=int(config["hidden"])).to(device)
    hist = train(model, loaders["train"], loaders["val"], epochs=epochs, lr=float(config["lr"]), progress=False)
    return {"val_acc": hist.val_acc[-1], "test_acc": evaluate(model, loaders["test"])["acc"],
            "n_val": len(loaders["val"].dataset), "n_test": len(loaders["test"].dataset)}


def make_scheduler(name: str, max_t: int, grace_period: int = 1, reduction_factor: int = 3) -> "TrialScheduler":
    """A Tune trial scheduler: ``"asha"``, ``"fifo"`` (every trial to ``max_t``) or ``"bohb"`` (04).

    ``metric`` and ``mode`` are left to ``TuneConfig``, which hands them to the scheduler.
    """
    from ray.tune.schedulers import ASHAScheduler, FIFOScheduler, HyperBandForBOHB

    if name == "asha":
        return ASHAScheduler(max_t=max_t, grace_period=grace_period, reduction_factor=reduction_factor)
    if name == "fifo":
        return FIFOScheduler()
    if name == "bohb":  # BOHB's own scheduler: HyperBand that pauses trials and resumes them from a checkpoint
        return HyperBandForBOHB(time_attr="training_iteration", max_t=max_t, reduction_factor=reduction_factor)
    raise ValueError(f"unknown scheduler {name!r}; choose 'asha', 'fifo' or 'bohb'")


STARTUP = 3  # random configurations a model-based searcher draws before its model proposes (04)


def make_searcher(name: str, seed: int = 0, startup: int = STARTUP) -> "Searcher":
    """A Tune search algorithm: ``"random"`` (seeded), ``"hyperopt"``, ``"optuna"`` (TPE) or ``"bohb"`` (04).

    HyperOpt draws ``startup`` random configurations first, counted as it proposes them; Optuna draws at
    random until ``startup`` trials have finished (COMPLETE or PRUNED: ``TPESampler._sample_relative``), so
    with trials running side by side it can draw more than ``startup`` at random (their defaults, 20 and
    10, would use up a small budget on random draws). Optuna's TPE models all parameters together
    (``multivariate=True``: asked for, so that the installed Optuna's default does not decide it).
    BOHB keeps HpBandSter's default, ``min_points_in_model = d + 1`` (``d``: the number of
    hyperparameters, the least it accepts): its model for a budget starts once it has
    ``min_points_in_model + d + 1`` (here 2d + 2) results on it.
    """
    if name == "random":
        from ray.tune.search.basic_variant import BasicVariantGenerator
        return BasicVariantGenerator(random_state=seed)
    if name == "hyperopt":
        from ray.tune.search.hyperopt import HyperOptSearch
        return HyperOptSearch(n_initial_points=startup, random_state_seed=seed)
    if name == "optuna":
        import optuna
        from ray.tune.search.optuna import OptunaSearch
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        with warnings.catch_warnings():  # Optuna before 5 calls multivariate experimental (and defaults to False)
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            sampler = optuna.samplers.TPESampler(n_startup_trials=startup, seed=seed, multivariate=True)
        return OptunaSearch(sampler=sampler)
    if name == "bohb":
        from ray.tune.search.bohb import TuneBOHB
        return TuneBOHB(seed=seed)
    raise ValueError(f"unknown searcher {name!r}; choose 'random', 'hyperopt', 'optuna' or 'bohb'")


def build_tuner(name: str, space: dict, scheduler: "TrialScheduler", searcher: "Searcher", num_samples: int, storage: str | Path = "ray_results",
                verbose: int = 1) -> "tune.Tuner":
    """The Tuner call itself: trainable with its resources, search space, TuneConfig, RunConfig (04)."""
    from ray import tune

    reporter = tune.CLIReporter(metric_columns={"val_acc": "val acc", "training_iteration": "epochs"},
                                parameter_columns={"lr": "lr", "hidden": "hidden", "batch_size": "batch"},
                                max_report_frequency=60, print_intermediate_tables=False, sort_by_metric=True,
                                max_progress_rows=num_samples)
    import ray
    from ray.tune.search.basic_variant import BasicVariantGenerator

    resources = trial_resources()
    cluster = ray.cluster_resources()
    slots = int(min(cluster.get(k.upper(), 0) / v for k, v in resources.items()))  # trials that fit at once
    # A model-based searcher gets one trial started at a time unless told how many may run together
    # (Tune's default for custom searchers); with this limit, every free slot gets a trial at once.
    concurrent = None if isinstance(searcher, BasicVariantGenerator) else max(slots, 1)
    return tune.Tuner(
        tune.with_resources(train_digits, resources),
        param_space=space,
        tune_config=tune.TuneConfig(metric=METRIC, mode=MODE, scheduler=scheduler, search_alg=searcher,
                                    num_samples=num_samples, reuse_actors=True, max_concurrent_trials=concurrent),
        run_config=tune.RunConfig(name=name, storage_path=str(Path(storage).resolve()), verbose=verbose,
                                  progress_reporter=reporter, checkpoint_config=tune.CheckpointConfig(num_to_keep=1)),
    )


def fit(tuner: "tune.Tuner") -> "tune.ResultGrid":
    """``tuner.fit()``, after which Jupyter's Stop still works and a failed trial is said in one line (04)."""
    # Tune's SIGINT handler goes with the run (else the next Stop is lost), and so does its full traceback
    # of every failed trial (TUNE_PRINT_ALL_TRIAL_ERRORS): summarize says what failed, in one line
    with warnings.catch_warnings(), keep_stop_handlers(), _environ({"TUNE_PRINT_ALL_TRIAL_ERRORS": "0"}):
        warnings.simplefilter("ignore", FutureWarning)  # BOHB's ConfigSpace/pandas/statsmodels stack warns
        warnings.filterwarnings("ignore", category=RuntimeWarning, module="statsmodels")
        return tuner.fit()
