"""Notebook 10's Ray Train runs: the course's DDP training as a ``TorchTrainer``, with or without a failure (10)."""
from __future__ import annotations

import os
import time

from typing import TYPE_CHECKING

import torch

from ..core.i18n import tr
from .ray_loop import ray_train_loop

if TYPE_CHECKING:
    from ray.tune import ResultGrid

__all__ = ["run_ray_train", "ray_train_trial", "tune_ray_train"]


def run_ray_train(epochs: int, storage: str, name: str, workers: int = 2, max_failures: int = 0,
                  announce_dir: str | None = None, poll_s: float = 0.2) -> dict:
    """``TorchTrainer(ray_train_loop, ...).fit()`` on the running Ray cluster; its result and final parameters (10).

    ``max_failures``: how many times Ray Train restarts the worker group after a worker dies, each time from the
    last checkpoint its controller registered (``FailureConfig``). GPUs when every worker can have one, else one
    CPU each. ``poll_s``: how often the controller polls the workers (``RAY_TRAIN_HEALTH_CHECK_INTERVAL_S``, 2 s by
    default, which Ray Train passes from the driver to its controller): a report waits in the worker (a queue of
    one, ``worker.py``) until that poll, so a worker killed before it loses the checkpoint it reported.
    """
    from ray.train import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    use_gpu = torch.cuda.device_count() >= workers
    trainer = TorchTrainer(
        ray_train_loop, train_loop_config={"epochs": epochs, "announce_dir": announce_dir},
        scaling_config=ScalingConfig(num_workers=workers, use_gpu=use_gpu,
                                     resources_per_worker=None if use_gpu else {"CPU": 1}),
        run_config=RunConfig(name=name, storage_path=storage, failure_config=FailureConfig(max_failures=max_failures),
                             checkpoint_config=CheckpointConfig(num_to_keep=1)))
    old = os.environ.get("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S")
    os.environ["RAY_TRAIN_HEALTH_CHECK_INTERVAL_S"] = str(poll_s)
    try:
        t0 = time.monotonic()
        result = trainer.fit()
        seconds = time.monotonic() - t0
    finally:
        if old is None:
            os.environ.pop("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", None)
        else:
            os.environ["RAY_TRAIN_HEALTH_CHECK_INTERVAL_S"] = old
    with result.checkpoint.as_directory() as d:
        state = torch.load(os.path.join(d, "state.pt"), map_location="cpu", weights_only=True)
    return {"seconds": seconds, "metrics": result.metrics, "params": list(state["model"].values()),
            "next_epoch": state["next_epoch"], "checkpoint": result.checkpoint.path}


def ray_train_trial(config: dict) -> None:
    """One Tune trial: a whole Ray Train run with this trial's learning rate, its reports passed on to Tune (10).

    Ray Train v2's way of tuning a distributed trainer (``Tuner(trainer)`` is deprecated): Tune runs this
    function once per trial, as the driver of a ``TorchTrainer``; ``TuneReportCallback`` hands each report of the
    trainer's rank 0 to the trial.
    """
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer
    from ray.tune.integration.ray_train import TuneReportCallback

    trainer = TorchTrainer(
        ray_train_loop, train_loop_config={"epochs": config["epochs"], "lr": config["lr"]},
        scaling_config=ScalingConfig(num_workers=config["workers"], resources_per_worker={"CPU": 1}),
        run_config=RunConfig(name=f"lr={config['lr']:g}", storage_path=config["storage"],
                             callbacks=[TuneReportCallback()]))
    trainer.fit()


def tune_ray_train(lrs: list[float], epochs: int, storage: str, workers: int = 1, cpus: int = 2) -> "ResultGrid":
    """``Tuner`` over Ray Train: one trial per learning rate, each trial a ``TorchTrainer`` of ``workers`` (10).

    A trial is a driver that takes Tune's default of one CPU, and its trainer's workers one CPU each, so a cluster
    of ``cpus`` CPUs runs ``cpus // (1 + workers)`` trials at once (``max_concurrent_trials``, as Ray Train's tuning
    guide advises). Returns the ``ResultGrid``; its metric is the last epoch's validation accuracy.
    """
    from ray import tune

    at_once = cpus // (1 + workers)
    if at_once < 1:
        raise ValueError(tr("10.tune_too_few_cpus", "a trial of {workers} worker(s) needs {needs} CPUs (its driver and "
                            "its workers); the cluster has {cpus}: use fewer workers or a larger cluster",
                            workers=workers, needs=1 + workers, cpus=cpus))
    tuner = tune.Tuner(
        ray_train_trial,
        param_space={"lr": tune.grid_search(list(lrs)), "epochs": epochs, "workers": workers, "storage": storage},
        tune_config=tune.TuneConfig(metric="val_acc", mode="max", max_concurrent_trials=at_once),
        run_config=tune.RunConfig(name="tune", storage_path=storage, verbose=0))
    return tuner.fit()
