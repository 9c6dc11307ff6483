"""Notebook 05 (monitoring): its exercises."""
from __future__ import annotations

import random

from ..core.checks import Exercise
from ..core.i18n import tr


NOTEBOOK = "05_monitoring"


_NAMES = ("loss", "acc", "lr", "grad_norm", "throughput", "perplexity", "f1")
_SPLITS = ("train", "val", "test")


def _random_log(rng: random.Random) -> tuple[list[int], list[dict[str, float]]]:
    """Epochs (increasing, not from 1, with gaps) and per-epoch metrics under 2–4 tags drawn at random."""
    tags = rng.sample([f"{n}/{s}" for n in _NAMES for s in _SPLITS], rng.randint(2, 4))
    epochs = sorted(rng.sample(range(2, 40), 3))
    return epochs, [{t: round(rng.uniform(-5, 5), 4) for t in tags} for _ in epochs]


def _log_epoch_behaviour(fn) -> str | None:
    """The student's ``log_epoch(writer, epoch, metrics)``, read back with TensorBoard's own reader (05).

    Two logs, each with tags, epochs and values drawn at random on every check, so no answer can
    know them in advance.
    """
    import tempfile

    from torch.utils.tensorboard import SummaryWriter

    from .instruments import read_back

    rng = random.Random()
    for _ in range(2):
        epochs, metrics = _random_log(rng)
        with tempfile.TemporaryDirectory(prefix="bog-05-") as tmp:
            with SummaryWriter(tmp) as writer:
                for epoch, m in zip(epochs, metrics):
                    fn(writer, epoch, dict(m))  # if it raises, check() says so (checks._verify_code)
            runs = read_back(tmp)["runs"]
        problem = _judge(runs, epochs, metrics)
        if problem:
            return problem
    return None


def _judge(runs: dict, epochs: list[int], metrics: list[dict[str, float]]) -> str | None:
    """What is wrong with the log read back, or None."""
    if not any(r["scalars"] for r in runs.values()):
        return tr("05.log_epoch_nothing", "nothing was written into the writer your function was given")
    if set(runs) != {"."}:
        return tr("05.log_epoch_runs", "the log has the runs {runs}; write every metric into this writer's own run "
                  "(add_scalar, not add_scalars, which makes a run per key)", runs=sorted(runs))
    got = runs["."]["scalars"]
    if sorted(got) != sorted(metrics[0]):
        return tr("05.log_epoch_tags", "for the metrics {want}, the log has the tags {got}; use each metric's name as "
                  "its tag", want=sorted(metrics[0]), got=sorted(got))
    for tag, points in got.items():
        if [s for s, _ in points] != epochs:
            return tr("05.log_epoch_steps", "for epochs {epochs}, tag {tag!r} was written at steps {steps}; write each "
                      "epoch's value at that epoch", epochs=epochs, tag=tag, steps=[s for s, _ in points])
        if any(abs(v - m[tag]) > 1e-4 for (_, v), m in zip(points, metrics)):
            return tr("05.log_epoch_values", "the values of {tag!r} differ from the metrics given", tag=tag)
    return None


EXERCISES = [
    Exercise("05.log_epoch", "code", behaviour=_log_epoch_behaviour,
             hint="One SummaryWriter call per metric: its name is the tag, its value the scalar, and the epoch the "
                  "step.",
             why="TensorBoard's reader sees exactly what you wrote: one point per epoch per tag, in one run, whatever "
                 "the tags and epochs."),
    Exercise("05.scalar_points_10x2", "int", digest="b529a78d5955d37374d937e544992e0fb2729cb01b2705f3024f657bd69a7bdd",
             hint="Each add_scalar call writes one point of one tag; count the calls.",
             why="One point per call: the step you pass is the x axis, and each tag is its own curve."),
    Exercise("05.add_scalars_runs_3", "int", digest="d66a7f4510a8b563272f24c4e1d0b4c5efe7b76a9b80a3d7b26d976fe8d15d44",
             hint="Look at the runs TensorBoard listed after write_all_summaries: where did loss_train and loss_val "
                  "come from?",
             why="add_scalars writes each key as a run of its own, beside the writer's run '.'."),
    Exercise("05.profiler_steps_repeat2", "int", digest="37107b44811793be92700f87be7faaac98405d1b310cc9740cd9c85f0dd3abfb",
             hint="One cycle is wait + warmup + active steps, and only the active ones are recorded; repeat says how "
                  "many cycles run.",
             why="Warm-up keeps the profiler's own start-up cost out of the numbers; repeat samples several windows."),
]
