"""Tuning helpers (helpers.tuning) that need no running Ray: designs, the GP steps, rungs, the space,
the signal handlers a run leaves, and what a failed search says."""
import os
import signal
import threading
import time

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


# --- issue 21: the Stop button after tuning, and a failed search said in one line -----------------------

class _FitLeavesItsHandlers:
    """A Tuner whose fit() does what Ray Tune's does to the signal handlers (install, never restore), then fails."""

    def __init__(self, *args, **kwargs):
        pass

    def fit(self):
        signal.signal(signal.SIGINT, lambda *a: None)
        signal.signal(signal.SIGUSR1, lambda *a: None)
        raise RuntimeError("fit failed")


def _stop_interrupts() -> bool:
    try:
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        for _ in range(20):
            time.sleep(0.05)
    except KeyboardInterrupt:
        return True
    return False


def test_a_tuning_run_that_raises_still_gives_the_stop_button_back(monkeypatch, default_sigint):
    from helpers.tuning import recipe as R

    usr1 = signal.getsignal(signal.SIGUSR1)
    monkeypatch.setattr(R, "build_tuner", lambda *a, **k: _FitLeavesItsHandlers())
    try:
        with pytest.raises(RuntimeError, match="fit failed"):
            T.run_tuner("x", num_samples=1, max_t=1)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        assert signal.getsignal(signal.SIGUSR1) == usr1
        assert _stop_interrupts(), "SIGINT no longer raises KeyboardInterrupt after run_tuner"
    finally:
        signal.signal(signal.SIGUSR1, usr1)


def test_old_api_errors_gives_the_stop_button_back(monkeypatch, default_sigint, tmp_path):
    from ray import tune

    class Tuner(_FitLeavesItsHandlers):
        def fit(self):
            try:
                super().fit()
            except RuntimeError:
                return [type("R", (), {"error": ValueError("old form"), "config": {"form": form}})()
                        for form in T.instruments._OLD_FORMS]

    usr1 = signal.getsignal(signal.SIGUSR1)
    monkeypatch.setattr(tune, "Tuner", Tuner)
    try:
        out = T.old_api_errors(tmp_path)
        assert "old form" in out["tune.report(accuracy=...) in a trainable"]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        assert signal.getsignal(signal.SIGUSR1) == usr1
    finally:
        signal.signal(signal.SIGUSR1, usr1)


class _Failed:
    def __init__(self, error):
        self.error, self.config, self.metrics_dataframe, self.path = error, {"lr": -1.0, "max_epochs": 1}, None, "/x/t0"


class _Grid(list):
    num_terminated = 0

    @property
    def num_errors(self):
        return len(self)


def _ray_error(cause: Exception) -> Exception:
    """What a ResultGrid holds for a trial whose trainable raised ``cause``: Ray's RayTaskError, ANSI header first."""
    from ray.exceptions import RayTaskError

    trace = "Traceback (most recent call last):\n" + "\n".join(f'  File "ray/x.py", line {i}, in f' for i in range(60))
    return RayTaskError("ImplicitFunc.train", trace + f"\n{type(cause).__name__}: {cause}", cause).as_instanceof_cause()


def test_every_trial_failing_says_the_trainables_error_first_and_what_to_do():
    err = _ray_error(ValueError("Invalid learning rate: -1.0"))
    assert str(err).startswith("\x1b[36m")           # what Ray's own message starts with
    with pytest.raises(T.TrialsFailed) as info:
        T.summarize(_Grid([_Failed(err), _Failed(err)]), seconds=1.0)
    lines = str(info.value).splitlines()
    assert lines[0] == "ValueError: Invalid learning rate: -1.0"
    assert "2 of 2 trials" in lines[1] and "search space" in lines[1] and "max_epochs" not in lines[1]
    assert len(lines) <= 4 and "\x1b[" not in str(info.value)
    assert info.value.__cause__ is err
    assert info.value._render_traceback_() == [f"TrialsFailed: {info.value}"]


def test_some_trials_failing_is_said_in_one_line(capsys):
    import pandas as pd

    ok = type("R", (), {"error": None, "config": {"lr": 0.01, "hidden": 16, "batch_size": 64},
                        "metrics_dataframe": pd.DataFrame({T.METRIC: [0.5, 0.6]})})()
    grid = _Grid([ok, _Failed(_ray_error(KeyError("batch_size")))])
    grid.num_terminated = 1
    out = T.summarize(grid, seconds=1.0)
    assert out["errors"] == 1 and out["trials"] == 1
    printed = capsys.readouterr().out
    assert printed.strip() == "1 of 2 trials failed, the first with KeyError: 'batch_size'; the summary covers the trials that reported."


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


@pytest.mark.parametrize("gpus, ask", [((1,), {"cpu": 1, "gpu": 0.5}), ((2, 1), {"cpu": 1, "gpu": 0.5}),
                                        ((1, 0), {"cpu": 1}), ((0,), {"cpu": 1})],
                         ids=["one node with a GPU", "every node with one", "a worker without", "no GPU"])
def test_trials_ask_for_a_gpu_only_when_every_live_node_has_one(monkeypatch, gpus, ask):
    """04 section 3: the two-node demo's GPU-less worker makes every trial CPU-only; one node with a GPU shares it."""
    import ray

    nodes = [{"Alive": True, "Resources": {"CPU": 1.0, **({"GPU": float(g)} if g else {})}} for g in gpus]
    nodes.append({"Alive": False, "Resources": {"CPU": 1.0}})  # a dead node without a GPU does not count
    monkeypatch.setattr(ray, "nodes", lambda: nodes)
    assert T.trial_resources() == ask


@pytest.mark.parametrize("nodes", [1, 2])
def test_only_the_two_node_cluster_gives_its_worker_no_gpu(monkeypatch, tmp_path, nodes):
    """init_ray(nodes=1) leaves the GPUs to ray.init's detection; nodes=2 starts its worker with --num-gpus=0."""
    import ray

    from helpers.dist import ray_cluster as RC

    calls = []
    monkeypatch.setattr(RC, "_WATCHDOG", None)
    monkeypatch.setattr(RC, "_SESSION", [""])  # the session folder it records goes with the test
    monkeypatch.setattr(RC, "watch_parent", lambda **k: None)
    monkeypatch.setattr(RC, "ray_temp_dir", lambda: tmp_path)
    monkeypatch.setattr(RC, "_ray_cli", lambda *a, **k: calls.append(("cli",) + a))
    monkeypatch.setattr(ray, "init", lambda *a, **k: calls.append(("init", k)))
    RC._start_ray(2, nodes, 40, False)
    inits = [c[1] for c in calls if c[0] == "init"]
    starts = [c[1:] for c in calls if c[0] == "cli"]
    assert len(inits) == 1 and "num_gpus" not in inits[0]
    if nodes == 1:
        assert starts == []
    else:
        head, worker = starts
        assert "--head" in head and not any(a.startswith("--num-gpus") for a in head)
        assert "--num-gpus=0" in worker
        # processes that cost seconds to start and do nothing here: the autoscaler monitor of a fixed cluster, and
        # log monitors when the driver reads no logs (log_to_driver=False above); the worker's never (one per machine)
        assert "--no-monitor" in head and "--include-log-monitor=false" in head and "--include-log-monitor=false" in worker


def test_a_trial_given_no_gpu_trains_on_the_cpu_even_where_cuda_is_available():
    """Ray 2.60 leaves CUDA_VISIBLE_DEVICES alone for a trial given no GPU: train_digits must ask Ray, not CUDA."""
    from unittest import mock

    import torch

    from helpers.tuning import recipe

    seen, decided, reports = [], [], []
    real_epoch, real_device = recipe.train_one_epoch, recipe.trial_device

    def spy(model, *args, **kwargs):
        seen.append(next(model.parameters()).device.type)
        return real_epoch(model, *args, **kwargs)

    def decide_on_a_gpu_machine():  # the decision is made where CUDA is available (training is not: no GPU here)
        with mock.patch("torch.cuda.is_available", lambda: True), mock.patch("torch.cuda.device_count", lambda: 1):
            decided.append(real_device())
        return decided[-1]

    config = {"lr": 1e-3, "hidden": 16, "batch_size": 256, "max_epochs": 1}
    with mock.patch("ray.get_gpu_ids", lambda: []), mock.patch.object(recipe, "trial_device", decide_on_a_gpu_machine), \
            mock.patch.object(recipe, "train_one_epoch", spy), mock.patch("ray.tune.report", reports.append):
        T.train_digits(config)
    assert decided == [torch.device("cpu")] and seen == ["cpu"] and len(reports) == 1
    with mock.patch("ray.get_gpu_ids", lambda: [0]):
        assert T.trial_device() == torch.device("cuda", 0)   # a trial given a GPU: the first one Ray made visible


def test_make_searcher_says_the_bohb_start_up_that_startup_of_computes():
    from helpers.tuning import make_searcher

    doc = " ".join(make_searcher.__doc__.split())
    assert "min_points_in_model + d + 1" in doc and "2d + 2" in doc and "dimensions + 1 configurations" not in doc


@pytest.fixture
def no_cluster_start(monkeypatch):
    """init_ray as far as its checks: Ray looks stopped, and starting it fails the test."""
    import ray

    from helpers.dist import ray_cluster as RC

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(RC, "_start_ray", lambda *a, **k: pytest.fail("init_ray started Ray despite the refusal"))
    return RC


@pytest.mark.parametrize("version", ["2.40.0", "2.51.2"])
def test_a_cluster_is_refused_on_a_ray_without_token_authentication(monkeypatch, no_cluster_start, version):
    import ray

    monkeypatch.setattr(ray, "__version__", version)
    with pytest.raises(RuntimeError, match=rf"Ray {version} has no token authentication.*2\.52\.0"):
        no_cluster_start.init_ray(num_cpus=2, nodes=2)


def test_a_cluster_is_refused_when_auth_mode_is_not_token(monkeypatch, no_cluster_start):
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    with pytest.raises(RuntimeError, match="RAY_AUTH_MODE is 'disabled'"):
        no_cluster_start.init_ray(num_cpus=2, nodes=2)


def test_a_cluster_is_refused_when_ray_read_its_config_without_the_token(monkeypatch, no_cluster_start):
    """Ray imported before helpers.tuning: the environment says token, Ray's own config does not."""
    from ray import _raylet

    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    monkeypatch.setattr(_raylet, "get_authentication_mode", lambda: _raylet.AuthenticationMode.DISABLED)
    with pytest.raises(RuntimeError, match="imported before helpers.tuning"):
        no_cluster_start.init_ray(num_cpus=2, nodes=2)


def test_token_auth_check_passes_where_ray_uses_the_token_and_one_node_is_not_checked(monkeypatch, no_cluster_start):
    import ray
    from ray import _raylet

    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    monkeypatch.setattr(_raylet, "get_authentication_mode", lambda: _raylet.AuthenticationMode.TOKEN)
    monkeypatch.setattr(ray, "__version__", "2.52.0")
    assert no_cluster_start._token_auth_refusal() is None
    monkeypatch.setattr(ray, "__version__", "2.40.0")   # one node: ray.init on this machine, not checked
    started = []
    monkeypatch.setattr(no_cluster_start, "_start_ray", lambda *a, **k: started.append(a))
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 2})
    monkeypatch.setattr(ray, "nodes", lambda: [{"Alive": True}])
    for name in ("RAY_AIR_NEW_OUTPUT", "RAY_DEDUP_LOGS", "RAY_USAGE_STATS_ENABLED"):   # init_ray sets them: put back after
        monkeypatch.setenv(name, os.environ.get(name, "0"))
    assert no_cluster_start.init_ray(num_cpus=2, nodes=1, quiet=False)["nodes"] == 1 and started


@pytest.mark.parametrize("first, refused", [("ray", True), ("helpers.dist.ray_cluster", False)])
def test_ray_imported_before_the_helpers_does_not_use_the_token(first, refused):
    """Ray reads RAY_AUTH_MODE when it is imported: imported first, it ignores the mode the helpers set."""
    import subprocess
    import sys
    from pathlib import Path

    code = (f"import {first}\nfrom helpers.dist import ray_cluster as rc\nimport ray\n"
            "print(repr(rc._token_auth_refusal()))")
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env,
                         cwd=Path(__file__).resolve().parents[1]).stdout
    assert ("imported before helpers.tuning" in out) if refused else out.strip() == "None", out
