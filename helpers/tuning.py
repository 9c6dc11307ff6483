"""Hyperparameter tuning: grid vs random, Bayesian optimisation, and Ray Tune (04_hyperparameter_tuning).

All of the Ray API the course uses is in this one module (``init_ray``, ``search_space``,
``run_tuner``), so the next Ray release is a one-file change. Ray is imported lazily: importing
``helpers`` never starts it.
"""
from __future__ import annotations

import logging
import math
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch
from torch import nn
from .checks import Exercise

METRIC, MODE = "val_acc", "max"

# The clusters init_ray starts are protected by a token (Ray's token authentication): every node and
# this driver share one secret, which Ray reads from the environment when it is first imported.
_RAY_IMPORTED_FIRST = "ray" in sys.modules
os.environ.setdefault("RAY_AUTH_MODE", "token")
os.environ.setdefault("RAY_AUTH_TOKEN", secrets.token_hex(32))


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

_TEMP_DIR: Path | None = None
_WATCHDOG = None  # the process that cleans up Ray if this kernel dies first
_SESSION = [""]  # the running Ray session's own folder: every process of the session names it


def ray_temp_dir() -> Path:
    """This user's private folder for Ray's sockets, logs and session files (04).

    Short (Ray's socket paths must stay under ~100 characters) and private (mode 700, owned by this
    user): a fixed shared name such as /tmp/beyond-one-gpu-ray can already exist on a shared
    machine, made by someone else and writable by all. If the usual folder is not ours and
    private, a fresh one is made.
    """
    global _TEMP_DIR
    if _TEMP_DIR is not None and _TEMP_DIR.is_dir():
        return _TEMP_DIR
    path = Path(tempfile.gettempdir()) / f"bog-ray-{os.getuid()}"
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        st = path.lstat()
        if path.is_symlink() or st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise PermissionError(f"{path} is not private to this user")
    except OSError:
        path = Path(tempfile.mkdtemp(prefix="bog-ray-"))  # mkdtemp makes it mode 700
    _TEMP_DIR = path
    return path


def _ray_cli(*args: str, timeout: float = 90) -> None:
    """Run ``ray ARGS`` (the CLI of this environment's Ray); raise with its output if it fails."""
    cmd = [sys.executable, "-m", "ray.scripts.scripts", *args]
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if r.returncode:
        raise RuntimeError(f"`ray {' '.join(args)}` failed:\n{(r.stdout + r.stderr)[-2000:]}")


def init_ray(num_cpus: int | None = None, nodes: int = 1, quiet: bool = True) -> dict:
    """Start Ray on this machine, quietly; with ``nodes=2``, a real two-node cluster (04).

    ``nodes=1``: ``ray.init`` with every CPU (or ``num_cpus``) and every GPU. ``nodes=2``: a head
    node and a worker node started with ``ray start --head`` and ``ray start --address=…`` on
    127.0.0.1, the CPUs split between them (GPUs go to the head node), and this notebook connects
    as the driver. Calling it again reuses what runs; asking for another size while Ray runs
    raises, saying to call :func:`shutdown_ray` first. Ray's processes are cleaned up by
    :func:`shutdown_ray`, and by a watchdog if the kernel dies first.

    Example::

        init_ray(nodes=2)          # two nodes on this machine
        run_tuner("asha", num_samples=8, max_t=3)
        shutdown_ray()
    """
    import ray

    if num_cpus is not None and (not isinstance(num_cpus, int) or isinstance(num_cpus, bool) or num_cpus < 1):
        raise ValueError(f"num_cpus must be a positive int or None (every CPU), got {num_cpus!r}")
    if not isinstance(nodes, int) or isinstance(nodes, bool) or nodes < 1:
        raise ValueError(f"nodes must be a positive int, got {nodes!r}")
    cpus = num_cpus or os.cpu_count() or 1
    if nodes > cpus:
        raise ValueError(f"{nodes} nodes need at least one CPU each and {cpus} are available; use nodes<={cpus}")
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # the classic table reporter, with chosen columns
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if ray.is_initialized():
        res = ray.cluster_resources()
        alive = sum(n["Alive"] for n in ray.nodes())
        if (num_cpus is not None and int(res.get("CPU", 0)) != num_cpus) or alive != nodes:
            raise RuntimeError(f"Ray is already running here with {int(res.get('CPU', 0))} CPU(s) on {alive} node(s); "
                               f"call shutdown_ray() first to start it again with num_cpus={num_cpus}, nodes={nodes}")
    else:
        if nodes > 1 and _RAY_IMPORTED_FIRST and os.environ.get("RAY_AUTH_MODE") != "token":
            raise RuntimeError("ray was imported before helpers.tuning, so this kernel cannot join a cluster "
                               "protected by a token; restart the kernel and import helpers.tuning first")
        try:
            _start_ray(cpus, nodes, logging.ERROR if quiet else logging.INFO, not quiet)
        except BaseException:  # a failed or interrupted start leaves nothing behind
            shutdown_ray()
            raise
    if quiet:
        for name in ("ray", "ray.tune", "ray.train", "ray.data"):
            logging.getLogger(name).setLevel(logging.ERROR)
    res = ray.cluster_resources()
    return {"cpus": int(res.get("CPU", 0)), "gpus": int(res.get("GPU", 0)),
            "nodes": sum(n["Alive"] for n in ray.nodes())}


def _start_ray(cpus: int, nodes: int, log_level: int, log_to_driver: bool) -> None:
    """``ray.init`` on this machine, or ``ray start`` a head and worker nodes on 127.0.0.1 and connect."""
    import ray

    global _WATCHDOG
    from .procs import watch_parent

    # a folder of this session's own, inside this user's private one: every process of the session
    # names it (in its command line, its environment, or the log files it keeps open), which is how
    # shutdown_ray and the watchdog find them all, and nothing else
    temp = Path(tempfile.mkdtemp(prefix="", dir=ray_temp_dir()))
    _SESSION[0] = str(temp)
    os.environ["BEYOND_ONE_GPU_SESSION"] = _SESSION[0]
    try:
        _WATCHDOG = watch_parent(marker=_SESSION[0])  # if this kernel dies, its Ray processes go too
        if nodes == 1:
            ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=log_to_driver, logging_level=log_level,
                     _temp_dir=str(temp), configure_logging=True)
            return
        port = _free_port()
        share = [cpus // nodes + (i < cpus % nodes) for i in range(nodes)]
        common = ["--node-ip-address=127.0.0.1", "--disable-usage-stats", f"--temp-dir={temp}"]
        _ray_cli("start", "--head", f"--port={port}", f"--num-cpus={share[0]}", "--include-dashboard=false", *common)
        for c in share[1:]:
            _ray_cli("start", f"--address=127.0.0.1:{port}", f"--num-cpus={c}", "--num-gpus=0", *common)
        ray.init(address=f"127.0.0.1:{port}", log_to_driver=log_to_driver, logging_level=log_level,
                 configure_logging=True)
    finally:
        os.environ.pop("BEYOND_ONE_GPU_SESSION", None)  # Ray's processes have it; later ones of this kernel must not


def cluster_nodes() -> list[dict]:
    """The nodes of the running Ray cluster, from ``ray.nodes()``: address, CPUs, GPUs, alive (04)."""
    import ray

    return [{"node": n["NodeManagerAddress"] + ":" + str(n["NodeManagerPort"]), "alive": n["Alive"],
             "cpus": int(n["Resources"].get("CPU", 0)), "gpus": int(n["Resources"].get("GPU", 0)),
             "head": "node:__internal_head__" in n["Resources"]} for n in ray.nodes()]


def shutdown_ray(grace: float = 3.0) -> list[int]:
    """Stop Ray and every process of its session; return the pids that had to be ended by hand (04).

    ``ray.shutdown()`` disconnects this notebook (and stops a local Ray). The nodes of a cluster
    that :func:`init_ray` started, and any of Ray's agents that ignore SIGTERM, are then ended:
    every process carrying this session's marker, SIGTERM first, SIGKILL after ``grace`` seconds.
    Nothing else is touched (``ray stop`` would end every Ray on the machine). Safe to call when
    Ray is not running.
    """
    import ray

    global _WATCHDOG
    from .procs import end_processes, session_processes

    if ray.is_initialized():
        ray.shutdown()
    ended: list[int] = []
    if _SESSION[0]:
        watchdog = _WATCHDOG.pid if _WATCHDOG is not None else None
        ended = end_processes((p for p in session_processes(_SESSION[0]) if p.pid != watchdog), grace=grace)
        shutil.rmtree(_SESSION[0], ignore_errors=True)  # the session folder init_ray made: its logs and sockets
        _SESSION[0] = ""
    if _WATCHDOG is not None:
        _WATCHDOG.kill()
        _WATCHDOG.wait()
        _WATCHDOG = None
    return ended


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def search_space(lr: tuple[float, float] = (1e-4, 3e-2), hidden: Sequence[int] = (16, 32, 64, 128),
                 batch_size: Sequence[int] = (64, 128, 256)) -> dict:
    """The course's search space: log-uniform learning rate, hidden size, batch size (04).

    Checked before any trial starts: a bad bound or an empty choice raises a ``ValueError`` here,
    not an obscure error in a worker minutes later.
    """
    from ray import tune

    if not isinstance(lr, (tuple, list)) or len(lr) != 2:
        raise ValueError(f"lr must be the two bounds of a log-uniform range, (low, high) such as (1e-4, 3e-2); "
                         f"got {lr!r}")
    lo, hi = lr
    if not (isinstance(lo, (int, float)) and isinstance(hi, (int, float)) and 0 < lo < hi < math.inf):
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
    _check_budget(num_samples, max_t, grace_period, reduction_factor)
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
    out = summarize(grid, seconds)
    if out["interrupted"]:
        print(f"Stopped before the end: {out['trials']} of {len(grid)} trials reported results "
              f"({out['trials_without_result']} reported none); the summary covers those.")
    return out


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


def _trial_resources() -> dict:
    """One CPU per trial, and half a GPU when every node has a GPU (two trials share one) (04).

    On a cluster where some node has no GPU, trials ask for CPUs only, so that every node can run
    them (a trial that asks for a GPU can only be placed on a node that has one).
    """
    import ray

    nodes = [n for n in ray.nodes() if n["Alive"]]
    with_gpu = all(n["Resources"].get("GPU", 0) >= 1 for n in nodes) and nodes
    return {"cpu": 1, "gpu": 0.5} if with_gpu else {"cpu": 1}


def summarize(grid: Any, seconds: float) -> dict:
    """Learning curves, epochs spent and the best trial of a ``ResultGrid`` (04).

    Trials that reported nothing (stopped by Jupyter's Stop before their first epoch ended, or
    never started) are counted, not summarised; ``interrupted`` says whether the experiment
    ended before every trial finished.
    """
    curves, configs, errors, silent = [], [], 0, 0
    for r in grid:
        if r.error:
            errors += 1
            continue
        df = r.metrics_dataframe
        if df is None or METRIC not in df:
            silent += 1
            continue
        curves.append([float(v) for v in df[METRIC]])
        configs.append(_plain(r.config))
    interrupted = grid.num_terminated + grid.num_errors < len(grid)
    if not curves:
        first = next((r.error for r in grid if r.error), None)
        if first is not None:
            raise RuntimeError(f"every trial failed ({errors}); the first error: {first}")
        raise RuntimeError(f"no trial reported a result ({len(grid)} started)"
                           + ("; the experiment was stopped before any epoch ended" if interrupted else ""))
    best = max(range(len(curves)), key=lambda i: max(curves[i]))
    return {"curves": curves, "configs": configs, "epochs": sum(len(c) for c in curves),
            "best_accuracy": max(curves[best]), "best_config": configs[best], "errors": errors,
            "seconds": seconds, "trials": len(curves), "trials_without_result": silent, "interrupted": interrupted}


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


EXERCISES = [
    Exercise("04.rungs_rf2", "ints", digest="d9e20f6b1fe76fb2913bdbc1828655ca7c280fd03b1536e4da09da32f1f0f359",
             hint="Start at grace_period and multiply by the reduction factor while you stay within max_t "
                  "(asha_rungs computes it as Ray does).",
             why="A smaller reduction factor means more rungs: more chances to stop a weak trial."),
    Exercise("04.grid_distinct", "int", digest="a44b8cb3a3c86f77a469e6b85e9b824911d0fcf92715f5890fffd7f55bcbec76",
             hint="A grid repeats each value of one parameter for every value of the other.",
             why="Random search tries as many distinct values as it has trials."),
    Exercise("04.full_epochs", "int", digest="613e73f48e5b20534b3424cb7fac439fcb35faafaf0c842b2c7b826434f23d3f",
             hint="Without early stopping every trial trains for max_t epochs.",
             why="This is the budget ASHA's savings are measured against."),
]
