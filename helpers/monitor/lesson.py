"""Notebook 05 (monitoring): its exercises."""
from __future__ import annotations

import random

from ..core.checks import Exercise
from ..core.i18n import tr


NOTEBOOK = "05_monitoring"


# Metrics that are a mean over samples, so that the run's value is the sample-weighted mean of the ranks'
# (perplexity, F1, throughput or a learning rate are not: they combine otherwise). Each name's values lie in
# its range: accuracy and error rate in [0, 1], losses (cross-entropy, negative log-likelihood) at least 0.
_NAMES = {"loss": (0.0, 5.0), "nll": (0.0, 5.0), "acc": (0.0, 1.0), "error": (0.0, 1.0)}
_SPLITS = ("train", "val", "test")


def _random_log(rng: random.Random) -> tuple[list[int], list[list[tuple[int, dict[str, float]]]]]:
    """Epochs (increasing, not from 1, with gaps) and, per epoch, what ``dist.gather_object(..., dst=0)`` hands rank 0:
    one ``(samples, metrics)`` pair per rank (2–4 ranks, shards of different sizes), under 2–4 tags drawn at random.

    Drawn again until, for every tag, rank 0's own value, the plain mean over ranks and the sum each differ from
    the sample-weighted mean by more than 0.01, so that each of those mistakes is caught.
    """
    tags = rng.sample([f"{n}/{s}" for n in _NAMES for s in _SPLITS], rng.randint(2, 4))
    epochs = sorted(rng.sample(range(2, 40), 3))
    world = rng.randint(2, 4)
    while True:
        samples = rng.sample(range(20, 400), world)
        gathered = [[(n, {t: round(rng.uniform(*_NAMES[t.split("/")[0]]), 4) for t in tags}) for n in samples]
                    for _ in epochs]
        if all(_far_from_wrong(g, t) for g in gathered for t in tags):
            return epochs, gathered


def _run_mean(gathered: list[tuple[int, dict[str, float]]], tag: str) -> float:
    """The metric over every sample of the run: each rank's mean weighted by its samples."""
    return sum(n * m[tag] for n, m in gathered) / sum(n for n, _ in gathered)


_PEEKS: list = []  # calls of _run_mean while a student's function runs


def _peeking_run_mean(gathered, tag):
    """What ``_run_mean`` runs while a student's function does: it records the call and returns 0.0."""
    _PEEKS.append(tag)
    return 0.0


def _far_from_wrong(gathered, tag: str) -> bool:
    want = _run_mean(gathered, tag)
    wrong = (gathered[0][1][tag], sum(m[tag] for _, m in gathered) / len(gathered), sum(m[tag] for _, m in gathered))
    return all(abs(w - want) > 0.01 for w in wrong)


def _log_epoch_behaviour(fn) -> str | None:
    """The student's ``log_epoch(writer, epoch, gathered)``, read back with TensorBoard's own reader (05).

    Two logs, each with ranks, sample counts, tags, epochs and values drawn at random on every check,
    so no answer can know them in advance. While it runs, the course's ``Monitor.log`` is replaced and the
    code of the check's own ``_run_mean`` swapped, whatever name the answer holds it by: an answer that hands
    its work to either is named, not judged.
    """
    import tempfile
    from unittest import mock

    from torch.utils.tensorboard import SummaryWriter

    from ..core.logger import Monitor
    from .instruments import read_back

    used, code = [], _run_mean.__code__
    _PEEKS.clear()
    rng = random.Random()
    for _ in range(2):
        epochs, gathered = _random_log(rng)
        with tempfile.TemporaryDirectory(prefix="bog-05-") as tmp:
            with SummaryWriter(tmp) as writer, mock.patch.object(Monitor, "log", lambda *a, **k: used.append(a)):
                _run_mean.__code__ = _peeking_run_mean.__code__  # every name the student may hold for it
                try:
                    for epoch, g in zip(epochs, gathered):
                        fn(writer, epoch, [(n, dict(m)) for n, m in g])  # if it raises, check() says so
                finally:
                    _run_mean.__code__ = code
            runs = read_back(tmp)["runs"]
        if _PEEKS:
            return tr("05.log_epoch_reference", "your function calls the check's own _run_mean; compute the "
                      "run's mean yourself")
        if used:
            return tr("05.log_epoch_monitor", "your function calls the course's Monitor.log; the exercise is to "
                      "write the SummaryWriter calls yourself")
        problem = _judge(runs, epochs, gathered)
        if problem:
            return problem
    return None


def _judge(runs: dict, epochs: list[int], gathered: list) -> str | None:
    """What is wrong with the log read back, or None."""
    if not any(r["scalars"] for r in runs.values()):
        if any(r["tensors"] for r in runs.values()):
            return tr("05.log_epoch_tensors", "your values were written as tensor summaries (new_style=True), which "
                      "TensorBoard's reader does not list as scalars; write them with add_scalar's default")
        return tr("05.log_epoch_nothing", "nothing was written into the writer your function was given")
    if set(runs) != {"."}:
        return tr("05.log_epoch_runs", "the log has the runs {runs}; write every metric into this writer's own run "
                  "(add_scalar, not add_scalars, which makes a run per key)", runs=sorted(runs))
    got = runs["."]["scalars"]
    want_tags = sorted(gathered[0][0][1])
    if sorted(got) != want_tags:
        return tr("05.log_epoch_tags", "for the metrics {want}, the log has the tags {got}; use each metric's name as "
                  "its tag", want=want_tags, got=sorted(got))
    for tag, points in got.items():
        if [s for s, _ in points] != epochs:
            return tr("05.log_epoch_steps", "for epochs {epochs}, tag {tag!r} was written at steps {steps}; write each "
                      "epoch's value once, at that epoch", epochs=epochs, tag=tag, steps=[s for s, _ in points])
        for (_, v), g in zip(points, gathered):
            if abs(v - g[0][1][tag]) <= 1e-4:
                return tr("05.log_epoch_rank0", "{tag!r} holds rank 0's own value: that is the mean over its shard "
                          "only; the run's metric takes every rank's samples", tag=tag)
            if abs(v - _run_mean(g, tag)) > 1e-4:
                return tr("05.log_epoch_values", "the values of {tag!r} are not the metric over all the run's samples: "
                          "each rank's value is a mean over its own samples, and the shards differ in size", tag=tag)
    return None


EXERCISES = [
    Exercise("05.log_epoch", "code", behaviour=_log_epoch_behaviour,
             hint="A rank's value is a mean over its own samples; how many samples does each one stand for? Then one "
                  "SummaryWriter call per metric, with its name as the tag and the epoch as the step.",
             why="Each rank sees only its shard: rank 0's own numbers describe part of the data, and a plain mean of "
                 "the ranks' means is off when the shards differ in size."),
    Exercise("05.rerun_points", "int", digest="dfb241ce0490a698009a7902dce75a24e47c6c2fb2c7d5db22d2aced0606128a",
             hint="How many event files does the folder hold after the second run? Look at how EventAccumulator reads "
                  "a folder with several event files (tensorboard/backend/event_processing/event_accumulator.py).",
             why="The reader reads every event file of the folder and keeps each point: the second run's steps 0-99 "
                 "follow the first run's, and the curve doubles back. A rerun needs an empty folder (section 2's "
                 "first SummaryWriter cell deletes it first) or a folder of its own."),
    Exercise("05.add_scalars_runs_2calls", "int",
             digest="c753f28725be12090dbe2774e15974dbc1126e2a7a2c8f188719e1d0e2d23f83",
             hint="The reader lists as a run every folder under the log folder that holds an event file. Which "
                  "folders hold one once these calls are done (add_scalars in torch/utils/tensorboard/writer.py)? A "
                  "name written again at a later step goes to the same folder.",
             why="add_scalars writes each main tag and key pair as a run of its own (loss_train, acc_test …), once, "
                 "beside the writer's own run '.', which TensorBoard lists too."),
    Exercise("05.profiler_steps_repeat2", "int", digest="37107b44811793be92700f87be7faaac98405d1b310cc9740cd9c85f0dd3abfb",
             hint="Read the docstring of torch.profiler.schedule (torch/profiler/profiler.py) and walk the 20 steps "
                  "through it.",
             why="Warm-up keeps the profiler's own start-up cost out of the numbers; repeat samples several windows."),
]
