"""Notebook 05 (monitoring): its exercises."""
from __future__ import annotations

from ..core.checks import Exercise


NOTEBOOK = "05_monitoring"


EXERCISES = [
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
