"""Notebook 05 (monitoring): its exercises."""
from __future__ import annotations

from ..core.checks import Exercise


NOTEBOOK = "05_monitoring"


def _log_epoch_behaviour(fn) -> str | None:
    """The student's ``log_epoch(writer, epoch, metrics)``, read back with TensorBoard's own reader (05)."""
    import tempfile

    from torch.utils.tensorboard import SummaryWriter

    from .instruments import read_back

    metrics = [{"loss/train": 1.5, "acc/val": 0.5}, {"loss/train": 0.9, "acc/val": 0.75}, {"loss/train": 0.4, "acc/val": 0.9}]
    with tempfile.TemporaryDirectory(prefix="bog-05-") as tmp:
        with SummaryWriter(tmp) as writer:
            for epoch, m in enumerate(metrics, start=1):
                fn(writer, epoch, m)  # if it raises, check() says so (checks._verify_code)
        runs = read_back(tmp)["runs"]
    if set(runs) != {"."}:
        return (f"the log has the runs {sorted(runs)}; write every metric into this writer's own run (add_scalar, "
                "not add_scalars, which makes a run per key)")
    got = runs["."]["scalars"]
    if sorted(got) != sorted(metrics[0]):
        return f"the log has the tags {sorted(got)}; use each metric's name as its tag"
    for tag, points in got.items():
        if [s for s, _ in points] != [1, 2, 3]:
            return f"tag {tag!r} was written at steps {[s for s, _ in points]}; write each epoch's value at that epoch"
        if any(abs(v - m[tag]) > 1e-6 for (_, v), m in zip(points, metrics)):
            return f"the values of {tag!r} differ from the metrics given"
    return None


EXERCISES = [
    Exercise("05.log_epoch", "code", behaviour=_log_epoch_behaviour,
             hint="One SummaryWriter call per metric: its name is the tag, its value the scalar, and the epoch the "
                  "step.",
             why="TensorBoard's reader sees exactly what you wrote: one point per epoch per tag, in one run."),
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
