"""Ray on this machine (helpers.launching.ray_cluster, helpers.tuning), without starting it: which trials and nodes get a
GPU, and a cluster refused unless Ray uses token authentication."""
import os

import pytest

from helpers import tuning as T


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

    from helpers.launching import ray_cluster as RC

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


@pytest.fixture
def no_cluster_start(monkeypatch):
    """init_ray as far as its checks: Ray looks stopped, and starting it fails the test."""
    import ray

    from helpers.launching import ray_cluster as RC

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(RC, "_start_ray", lambda *a, **k: pytest.fail("init_ray started Ray despite the refusal"))
    monkeypatch.setattr(RC, "reread_ray_config", lambda: None)   # this process's Ray keeps its config (see below)
    for name, value in (("RAY_AUTH_MODE", "token"), ("RAY_AUTH_TOKEN", "the-tests-own")):  # put back after
        monkeypatch.setenv(name, value)
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
    """Ray imported before init_ray, and not made to read its settings again: the environment says token,
    Ray's own config does not."""
    from ray import _raylet

    monkeypatch.setattr(_raylet, "get_authentication_mode", lambda: _raylet.AuthenticationMode.DISABLED)
    with pytest.raises(RuntimeError, match="imported before init_ray"):
        no_cluster_start.init_ray(num_cpus=2, nodes=2)


def test_token_auth_check_passes_where_ray_uses_the_token_and_one_node_is_not_checked(monkeypatch, no_cluster_start):
    import ray
    from ray import _raylet

    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    monkeypatch.setattr(_raylet, "get_authentication_mode", lambda: _raylet.AuthenticationMode.TOKEN)
    monkeypatch.setattr(ray, "__version__", "2.52.0")
    assert no_cluster_start.token_auth_refusal() is None
    monkeypatch.setattr(ray, "__version__", "2.40.0")   # one node: ray.init on this machine, not checked
    started = []
    monkeypatch.setattr(no_cluster_start, "_start_ray", lambda *a, **k: started.append(a))
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 2})
    monkeypatch.setattr(ray, "nodes", lambda: [{"Alive": True}])
    for name in ("RAY_AIR_NEW_OUTPUT", "RAY_DEDUP_LOGS", "RAY_USAGE_STATS_ENABLED"):   # init_ray sets them: put back after
        monkeypatch.setenv(name, os.environ.get(name, "0"))
    monkeypatch.setenv("RAY_AUTH_TOKEN", "the-readers-own")
    assert no_cluster_start.init_ray(num_cpus=2, nodes=1, quiet=False)["nodes"] == 1 and started
    assert os.environ["RAY_AUTH_TOKEN"] == "the-readers-own"                # a token the reader set is kept


_KERNEL = """
import os, sys, ray, helpers
before = dict(os.environ)
import helpers.tuning
from helpers.launching import ray_cluster as rc
print(dict(os.environ) == before, "RAY_AUTH_MODE" in os.environ)
rc.reread_ray_config = rc.reread_ray_config if sys.argv[1] == "reread" else lambda: None
rc._start_ray = lambda *a: print("started")
ray.cluster_resources, ray.nodes = lambda: {"CPU": 2}, lambda: [{"Alive": True}] * 2
try:
    rc.init_ray(num_cpus=2, nodes=2)
except RuntimeError as e:
    print(e)
print(os.environ["RAY_AUTH_MODE"], len(os.environ["RAY_AUTH_TOKEN"]))
"""


@pytest.mark.parametrize("reread", ["reread", "not"])
def test_ray_imported_before_init_ray_reads_the_token_mode_again_or_the_cluster_is_refused(reread):
    """Importing the Ray plumbing (and helpers.tuning) leaves os.environ as it was; init_ray sets RAY_AUTH_MODE
    and a secret. Ray reads the mode when it is imported: a Ray imported first is told to read its settings
    again, and where that cannot be done, the cluster is refused."""
    import subprocess
    import sys
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    out = subprocess.run([sys.executable, "-c", _KERNEL, reread], capture_output=True, text=True, timeout=120,
                         env=env, cwd=Path(__file__).resolve().parents[1]).stdout.splitlines()
    assert out[0] == "True False" and out[-1] == "token 64", out          # set by init_ray, not by the imports
    assert (out[1:-1] == ["started"]) if reread == "reread" else "imported before init_ray" in out[1], out
