"""Notebook 10's Tune over Ray Train (Ray Train v2's way: each trial the driver of a TorchTrainer), wired as Ray's
guide has it: one trial per learning rate, each building and fitting a TorchTrainer with TuneReportCallback, as many
trials at once as the cluster has CPUs for. Checked here with Ray's classes replaced by recorders, without
starting Ray: a real run takes about a minute on 2 cores, which the suite's 12 minutes cannot hold; the notebook
runs it for real on 4 CPUs or more, and `python -m helpers.bench resilience` on any machine (its trials and
errors are in the README's results table)."""
import pytest

from helpers.resilience import ray_runs
from helpers.resilience.ray_loop import ray_train_loop

ray_tune = pytest.importorskip("ray.tune")
ray_train_torch = pytest.importorskip("ray.train.torch")


class _Recorder:
    made: list = []

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs
        type(self).made.append(self)

    def fit(self):
        return "fitted"


def test_each_trial_is_a_torchtrainer_of_its_learning_rate_reporting_to_tune(monkeypatch):
    class Trainer(_Recorder):
        made = []

    from ray.train import UserCallback

    class Report(UserCallback):   # TuneReportCallback itself refuses to exist outside a Tune trial
        pass

    monkeypatch.setattr(ray_train_torch, "TorchTrainer", Trainer)
    monkeypatch.setattr("ray.tune.integration.ray_train.TuneReportCallback", Report)
    ray_runs.ray_train_trial({"lr": 3e-3, "epochs": 2, "workers": 2, "storage": "/runs"})
    (t,) = Trainer.made
    assert t.args == (ray_train_loop,) and t.kwargs["train_loop_config"] == {"epochs": 2, "lr": 3e-3}
    assert t.kwargs["scaling_config"].num_workers == 2
    run = t.kwargs["run_config"]
    assert run.name == "lr=0.003" and run.storage_path == "/runs" and [type(c) for c in run.callbacks] == [Report]


@pytest.mark.parametrize("cpus, workers, at_once", [(2, 1, 1), (4, 1, 2), (5, 1, 2), (6, 2, 2), (3, 2, 1)])
def test_the_sweep_runs_as_many_trials_at_once_as_the_cpus_allow(monkeypatch, cpus, workers, at_once):
    class Tuner(_Recorder):
        made = []

    monkeypatch.setattr(ray_tune, "Tuner", Tuner)
    assert ray_runs.tune_ray_train([1e-3, 3e-2], epochs=1, storage="/runs", workers=workers, cpus=cpus) == "fitted"
    (t,) = Tuner.made
    assert t.args == (ray_runs.ray_train_trial,)   # the function itself: Tune's default of one CPU per trial
    space = t.kwargs["param_space"]
    assert space["lr"] == {"grid_search": [1e-3, 3e-2]} and (space["epochs"], space["workers"]) == (1, workers)
    cfg = t.kwargs["tune_config"]
    assert (cfg.metric, cfg.mode, cfg.max_concurrent_trials) == ("val_acc", "max", at_once)
