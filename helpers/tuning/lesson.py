"""Notebook 04 (hyperparameter tuning): its exercises and its benchmark."""
from __future__ import annotations

import tempfile

from ..core.checks import Exercise
from ..core.device import hardware_label
from ..core.i18n import tr
from ..launching.ray_cluster import init_ray, shutdown_ray
from .experiments import run_tuner


NOTEBOOK = "04_hyperparameter_tuning"
LIMIT_S = 180  # the tuning notebook's run-time limit; every other notebook's is 90 s


def _reports(fn, config: dict, events: list | None = None) -> tuple[list, list, list]:
    """What the student's trainable reports for ``config``: its ``ray.tune.report`` calls, its ``ray.train.report``
    ones and its ``ray.air.session.report`` ones (the older Ray AIR form, still importable).

    All are replaced by recorders, as module attributes and under any name the student's module bound them to
    (``from ray.tune import report`` at the top of a notebook binds ``report`` before the check runs).
    Each ``ray.tune.report`` call is also appended to ``events`` as ``("report", metrics)``, after whatever the
    config's own functions appended there (``("train", score)`` for each epoch trained).
    """
    from unittest import mock

    import ray.air.session
    import ray.train
    import ray.train._internal.session
    import ray.tune

    import inspect

    calls: list = []
    train_calls: list = []
    air_calls: list = []
    takes = inspect.signature(ray.tune.report)  # what Ray's own report accepts: one dict, checkpoint= by name
    air_report = ray.air.session.report  # the same function as ray.train._internal.session.report

    def record(metrics=None, *args, **kwargs):
        try:
            takes.bind(*([] if metrics is None else [metrics]), *args, **kwargs)
            refused = None
        except TypeError as e:  # Ray's report would raise this TypeError in the trial
            refused = str(e)
        calls.append((metrics, args, kwargs, refused))
        if events is not None:
            events.append(("report", metrics))

    def record_train(*args, **kwargs):
        train_calls.append((args, kwargs))

    def record_air(*args, **kwargs):
        air_calls.append((args, kwargs))

    recorder = {id(ray.tune.report): record, id(ray.train.report): record_train, id(air_report): record_air}
    aliases = {name: recorder[id(v)] for name, v in getattr(fn, "__globals__", {}).items()
               if callable(v) and id(v) in recorder}
    with mock.patch("ray.tune.report", record), mock.patch("ray.train.report", record_train), \
            mock.patch("ray.air.session.report", record_air), mock.patch("ray.train._internal.session.report", record_air), \
            mock.patch.dict(fn.__globals__ if aliases else {}, aliases):
        fn(dict(config))  # if it raises, check() says so (checks._verify_code)
    return calls, train_calls, air_calls


def _number(v):
    """A score as a plain number: a one-element tensor or NumPy scalar is read with ``.item()``; anything else as is."""
    if hasattr(v, "item") and not isinstance(v, (int, float)):
        try:
            return v.item()
        except (ValueError, RuntimeError, TypeError):
            return v
    return v


def _trainable_behaviour(fn) -> str | None:
    """The student's trainable, run with three configs (one drawn at random) and ``ray.tune.report`` recording (04).

    Fast, and Ray need not run: what matters is what the function reports, and how. The rule:
    for each config, exactly one report per epoch 1, 2, 3, each one dict whose ``score`` is
    ``config["x"] * epoch``, each made after that epoch's ``config["train_epoch"]()`` (the check's stand-in for
    one epoch of training, which returns that score) and before the next one's: a trainable that trains every
    epoch first and reports afterwards would give ASHA nothing to stop. Several values of ``x`` (a negative one, and a random one) tell a
    trainable that reads its config from one that reports fixed numbers.
    """
    import math
    import random

    for x in (2.0, -0.5, round(random.uniform(2.5, 9.9), 3)):  # the third one is new every time
        events: list = []

        def train_epoch(x=x, events=events):  # stands for one epoch of training: returns that epoch's score
            score = x * (1 + sum(kind == "train" for kind, _ in events))
            events.append(("train", score))
            return score

        calls, train_calls, air_calls = _reports(fn, {"x": x, "train_epoch": train_epoch}, events)
        if train_calls:   # no {fields} below: tr() returns these as written, {'score': ...} included
            return tr("lesson.trainable.train_report", "it called ray.train.report, Ray Train's; inside a Tune "
                      "trainable Ray refuses it: call ray.tune.report({'score': ...}) instead")
        if air_calls:
            return tr("lesson.trainable.air_report", "it called ray.air.session.report, the older Ray AIR form; "
                      "today's API is ray.tune.report({'score': ...})")
        if not calls:
            return tr("lesson.trainable.no_report", "the trainable never called ray.tune.report, so the Tuner would "
                      "see no result")
        if any(kw and m is None for m, _, kw, _ in calls):
            return tr("lesson.trainable.old_form", "tune.report(score=...) is the old form; today it takes one dict: "
                      "tune.report({'score': ...})")
        if any(not isinstance(m, dict) for m, _, _, _ in calls):
            return tr("lesson.trainable.not_dict", "pass tune.report a dict of metrics")
        refused = next((r for *_, r in calls if r), None)
        if refused:
            return tr("lesson.trainable.refused", "Ray's tune.report would refuse that call ({refused}): it takes one "
                      "dict of metrics, and only checkpoint= by name; put every value into the dict", refused=refused)
        scores = [_number(m.get("score")) for m, _, _, _ in calls]
        right = len(scores) == 3 and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                         and math.isclose(v, x * e, rel_tol=1e-9, abs_tol=1e-12)
                                         for v, e in zip(scores, (1, 2, 3)))
        if not right:
            return tr("lesson.trainable.scores", "with config {{'x': {x}}} it reported scores {scores}; expected one "
                      "report per epoch for epochs 1 to 3, each computed from the config it was given", x=x,
                      scores=scores)
        order = [kind for kind, _ in events]
        if order != ["train", "report"] * 3:
            return tr("lesson.trainable.order", "it trained and reported in the order {order}; each epoch's report "
                      "must come right after that epoch's config['train_epoch']() and before the next epoch trains, or "
                      "ASHA sees a score only after the training it was meant to cut short", order=order)
    return None


EXERCISES = [
    Exercise("04.trainable", "code", behaviour=_trainable_behaviour,
             hint="One report per epoch, from inside the loop, right after that epoch's config['train_epoch'](); "
                  "today's API takes one dict of metrics, and the config's values arrive as config['x'].",
             why="A trainable is a plain function: Tune calls it with a config and reads what it reports, epoch by "
                 "epoch, which is what lets ASHA stop it early."),
    Exercise("04.rungs_rf2", "ints", digest="b582db5ce9d58ae8bc5f73069b6a9da16338afd834d6baca22a95a16d2ffc2bd",
             hint="Start from the rungs, then check each one against section 3's rules for when a trial is stopped.",
             why="A smaller reduction factor means more rungs: more chances to stop a weak trial. max_t ends "
                 "every trial (Ray's default stop_last_trials=True), so it stops none of them for being weak."),
    Exercise("04.grid_distinct", "int", digest="a44b8cb3a3c86f77a469e6b85e9b824911d0fcf92715f5890fffd7f55bcbec76",
             hint="Write how many points such a grid has in terms of the values on each axis; the budget fixes "
                  "that number.",
             why="A grid's distinct values per parameter shrink as parameters are added (the d-th root of the "
                 "budget); random search keeps one distinct value per trial."),
    Exercise("04.asha_continue", "int", digest="5d82bb97de00c00bde772b12d33e5af8f7d7e53b752b3132cd26b0c5a7c87d7a",
             hint="Take the trials one at a time: each is compared only with the results recorded before it "
                  "arrived, and the first has nothing to be compared with.",
             why="Asynchronous: no trial waits for the field, so an early weak trial can go on and a later one be "
                 "stopped with a better score than it."),
    Exercise("04.sync_epochs", "int", digest="688cd07f09f5a698df9a37201c3ef12e27fae67417d960a6192359af444fa22e",
             hint="A trial that goes on from one rung to the next trains only the epochs between them; count "
                  "how many trials train each stretch.",
             why="Every trial pays for the first rung; only the few that survive pay for the long stretches, and "
                 "synchronous halving makes every trial at a rung wait for the slowest before any goes on."),
]


def bench_tuning(trials: int = 24, max_t: int = 16, rf: int = 4) -> dict:
    """ASHA vs every trial to the end on the same configurations, and each searcher given the same number of trials (04)."""
    init_ray()
    try:
        with tempfile.TemporaryDirectory() as store:
            asha = run_tuner("asha", trials, max_t, reduction_factor=rf, storage=store, verbose=0)
            full = run_tuner("full", trials, max_t, scheduler="fifo", storage=store, verbose=0)
            searchers = {name: run_tuner(name, trials, max_t, reduction_factor=rf, searcher=name,
                                         scheduler="bohb" if name == "bohb" else "asha", storage=store, verbose=0)
                         for name in ("hyperopt", "optuna", "bohb")}
    finally:
        shutdown_ray()

    def short(r: dict) -> dict:
        return {"epochs": r["epochs"], "best_accuracy": round(r["best_accuracy"], 4), "best_config": r["best_config"],
                "seconds": round(r["seconds"], 1)}

    return {"device": hardware_label("cpu"), "trials": trials, "max_t": max_t, "reduction_factor": rf,
            "asha": short(asha), "full": short(full), "asha_epoch_share": round(asha["epochs"] / full["epochs"], 3),
            "searchers": {k: short(v) for k, v in searchers.items()}}


BENCH = {"tuning": bench_tuning}


def readme_figures(results: dict) -> str:
    """The key figures of notebook 04 for the README's table, from ``bench_tuning``'s JSON."""
    t = results["tuning"]
    s = t["searchers"]
    return (f"{t['trials']} trials, max_t {t['max_t']}, rf {t['reduction_factor']}: ASHA {t['asha']['epochs']} epochs = "
            f"{t['asha_epoch_share']:.0%} of full runs ({t['full']['epochs']}), best accuracy "
            f"{t['asha']['best_accuracy']:.3f} vs {t['full']['best_accuracy']:.3f}; HyperOpt "
            f"{s['hyperopt']['best_accuracy']:.3f}, Optuna {s['optuna']['best_accuracy']:.3f}, BOHB "
            f"{s['bohb']['best_accuracy']:.3f}")
