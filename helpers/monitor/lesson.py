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
                try:
                    fn(writer, epoch, m)
                except Exception as e:  # noqa: BLE001 (a student's bug, reported in words)
                    return f"log_epoch raised {type(e).__name__}: {e}"
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
    Exercise("05.scalar_points", "int", digest="e3c42f74094f8f4044fb4d9161be1ab7e753821fc303e97b5196fe7dbbb3a5be",
             hint="How often does write_all_summaries call add_scalar for one tag?",
             why="One point per call: the step you pass is the x axis."),
    Exercise("05.add_scalars_runs", "int", digest="c540308f6bc251a19b79189e16336ae92ff9ec9f55dbaf7168270fc6b135ef5e",
             hint="add_scalars writes each key of its dictionary as a run of its own.",
             why="That is why TensorBoard lists loss_train and loss_val as runs beside '.'."),
    Exercise("05.profiler_steps", "int", digest="7b0607b319319e3059a48bb74f283384ab619d50f03ceabc508d6e77cf6c0281",
             hint="wait and warmup steps are run but not recorded.",
             why="Warm-up keeps the profiler's own start-up cost out of the numbers."),
]
