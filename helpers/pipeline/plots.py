"""Pictures of notebook 01's measurements: timelines (Gantt charts), speed-up against the bound, the sweep (01)."""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

from ..core.plots import finish
from .instruments import ideal_speedup

__all__ = ["plot_timelines", "plot_speedup", "plot_split_sweep"]



def plot_timelines(rows: list[dict], label: str = "") -> Figure | None:
    """Gantt charts of one step per micro-batch count: which stage computes what, when (01)."""
    fig, axes = plt.subplots(len(rows), 1, figsize=(10, 1.3 * len(rows) + 0.6), squeeze=False)
    t_max = max(e[4] for r in rows for e in r["events"])
    colors = {"F": "#4C72B0", "B": "#DD8452"}
    for ax, r in zip(axes[:, 0], rows):
        for s, kind, i, a, b in r["events"]:
            ax.barh(1 - s, b - a, left=a, color=colors[kind], edgecolor="white")
            if (b - a) / t_max > 0.028:  # a label only where it fits inside its bar
                ax.text(a + (b - a) / 2, 1 - s, f"{kind}{s}.{i}", ha="center", va="center", fontsize=6, color="white")
        ax.set_yticks([1, 0], ["stage 0", "stage 1"])
        ax.set_xlim(0, t_max * 1.02)
        ax.set_title(f"m = {r['microbatches']}: step {1e3 * r['step_s']:.0f} ms", fontsize=9, loc="left")
    axes[-1, 0].set_xlabel("seconds since the step began (blue: forward, orange: backward, gaps: idle)")
    return finish(fig, label)


def plot_speedup(rows: list[dict], library_rows: list[dict] | None = None, label: str = "") -> Figure | None:
    """Measured speedup over m = 1 against the ideal 2m/(m+1) (01)."""
    fig, ax = plt.subplots(figsize=(6, 3.6))
    ms = [r["microbatches"] for r in rows]
    fine = [1 + k / 10 for k in range(0, 10 * (max(ms) - 1) + 1)]
    ax.plot(fine, [ideal_speedup(m) for m in fine], "k:", label="ideal 2m/(m+1)")
    ax.plot(ms, [r["speedup"] for r in rows], "o-", label="hand-written GPipe")
    for name in sorted({r["schedule"] for r in library_rows or []}):
        rs = [r for r in library_rows if r["schedule"] == name and "speedup" in r]
        ax.plot([r["microbatches"] for r in rs], [r["speedup"] for r in rs], "s--", label=f"pipelining {name}")
    ax.set(xlabel="micro-batches m", ylabel="speedup over m = 1", xscale="log", title="pipelining 2 stages")
    ax.set_xticks(ms, [str(m) for m in ms])
    ax.xaxis.set_minor_locator(NullLocator())  # only the m that were measured
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return finish(fig, label)


def plot_split_sweep(rows: list[dict], cost_rows: list[dict], label: str = "") -> Figure | None:
    """Efficiency of the pipeline and cost of one stage against micro-batch size, at a fixed batch (01)."""
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.4))
    ax[0].plot([r["microbatch_rows"] for r in rows], [r["speedup"] for r in rows], "o-", label="measured")
    ax[0].plot([r["microbatch_rows"] for r in rows], [r["ideal_speedup"] for r in rows], "k:", label="ideal 2m/(m+1)")
    ax[0].set(xscale="log", xlabel="rows per micro-batch", ylabel="speedup over m = 1", title="the split-size sweep")
    ax[0].invert_xaxis()
    ax[1].plot([r["microbatch_rows"] for r in cost_rows], [r["cost_vs_m1"] for r in cost_rows], "o-", color="C3")
    ax[1].axhline(1, color="gray", ls=":")
    ax[1].set(xscale="log", xlabel="rows per micro-batch", ylabel="stage time / time at m = 1",
              title="one stage alone: the same rows in smaller pieces")
    ax[1].invert_xaxis()
    for a, rs in ((ax[0], rows), (ax[1], cost_rows)):  # after set(xscale=…), which resets the ticks
        a.set_xticks([r["microbatch_rows"] for r in rs], [str(r["microbatch_rows"]) for r in rs])
        a.xaxis.set_minor_locator(NullLocator())
        a.grid(alpha=0.3)
    ax[0].legend()
    return finish(fig, label)
