"""Pictures of notebook 01's measurements: timelines (Gantt charts), speed-up against the bound, the sweep (01)."""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import NullLocator

from ..core.plots import finish
from .instruments import ideal_speedup

__all__ = ["plot_timelines", "plot_speedup", "plot_split_sweep"]



def plot_timelines(rows: list[dict], label: str = "") -> Figure | None:
    """Gantt charts of one step per micro-batch count: which stage computes what, when (01).

    A bar labelled F1.3 is stage 1's forward of micro-batch 3 (B: backward). Where some bar of a panel
    is too narrow for that label, every bar of the panel shows only its micro-batch, 3 (the colour says
    F or B), so that one panel never mixes the two; a bar too narrow even for that stays unlabelled.
    Time zero is the step's first computation (F0.0's start), not the step's start.
    """
    fig, axes = plt.subplots(len(rows), 1, figsize=(10, 1.3 * len(rows) + 1.0), squeeze=False)
    t_max = max(e[4] for r in rows for e in r["events"])
    colors = {"F": "#4C72B0", "B": "#DD8452"}
    for ax, r in zip(axes[:, 0], rows):
        full = min(b - a for *_, a, b in r["events"]) / t_max > 0.04   # every bar fits "F1.3": full labels
        for s, kind, i, a, b in r["events"]:
            ax.barh(1 - s, b - a, left=a, color=colors[kind], edgecolor="white")
            if full:
                ax.text(a + (b - a) / 2, 1 - s, f"{kind}{s}.{i}", ha="center", va="center", fontsize=8, color="white")
            elif (b - a) / t_max > 0.012:  # the micro-batch only, on every bar of this panel that fits it
                ax.text(a + (b - a) / 2, 1 - s, str(i), ha="center", va="center", fontsize=8, color="white")
        ax.set_yticks([1, 0], ["stage 0", "stage 1"])
        ax.set_xlim(0, t_max * 1.02)
        ax.set_title(f"m = {r['microbatches']} micro-batch{'es' if r['microbatches'] > 1 else ''} of "
                     f"{r['microbatch_rows']} rows: bars: the median round, its step {1e3 * r.get('shown_round_s', r['step_s']):.0f} ms "
                     f"(rounds {1e3 * r['step_range'][0]:.0f}–{1e3 * r['step_range'][1]:.0f} ms)",
                     fontsize=9, loc="left")
    axes[0, 0].legend(handles=[Patch(color=colors["F"], label="Fs.i: stage s's forward of micro-batch i (panels with narrow bars: i only)"),
                               Patch(color=colors["B"], label="Bs.i: its backward")],
                      loc="lower left", bbox_to_anchor=(0, 1.25), ncol=2, fontsize=8, frameon=False)
    axes[-1, 0].set_xlabel("seconds since the step's first computation began (F0.0's start; gaps: the stage computes nothing)")
    return finish(fig, label)


def plot_speedup(rows: list[dict], library_rows: list[dict] | None = None, label: str = "") -> Figure | None:
    """Measured speedup against the ideal 2m/(m+1), each implementation over its own GPipe at m = 1 (01)."""
    fig, ax = plt.subplots(figsize=(9, 4.6))
    ms = [r["microbatches"] for r in rows]
    fine = [1 + k / 10 for k in range(0, 10 * (max(ms) - 1) + 1)]
    ax.plot(fine, [ideal_speedup(m) for m in fine], "k:",
            label="ideal 2m/(m+1): equal stages, each piece 1/m of m = 1's work, nothing else in the step")
    ax.plot(ms, [r["speedup"] for r in rows], "o-", label="hand-written GPipe (over its own m = 1)")
    for name in sorted({r["schedule"] for r in library_rows or []}):
        rs = [r for r in library_rows if r["schedule"] == name and "speedup" in r]
        ax.plot([r["microbatches"] for r in rs], [r["speedup"] for r in rs], "s--",
                label=f"library {name} (over library GPipe m = 1)")
    ax.set(xlabel="micro-batches m", ylabel="speedup over m = 1", xscale="log",
           title="2-stage pipeline: measured speedup against the ideal")
    ax.set_xticks(ms, [str(m) for m in ms])
    ax.xaxis.set_minor_locator(NullLocator())  # only the m that were measured
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.17), ncol=2, frameon=False)  # below the axes, never over the data
    return finish(fig, label)


def plot_split_sweep(rows: list[dict], cost_rows: list[dict], label: str = "") -> Figure | None:
    """Speedup of the pipeline and cost of one stage against micro-batch size, at a fixed batch (01).

    Both x axes are the rows per micro-batch, each tick also naming its m; the right panel's
    error bars span the fastest and slowest round.
    """
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.6))
    batch = rows[0]["microbatch_rows"] * rows[0]["microbatches"]
    x = [r["microbatch_rows"] for r in rows]
    ax[0].plot(x, [r["speedup"] for r in rows], "o-", label="measured")
    ax[0].plot(x, [r["ideal_speedup"] for r in rows], "k:", label=f"ideal 2m/(m+1), m = {batch} / rows")
    ax[0].set(ylabel="speedup over m = 1", title="2-stage GPipe: speedup by micro-batch size")
    ax[0].set_ylim(bottom=0)
    ax[0].legend(fontsize=8, loc="lower left")
    cx = [r["microbatch_rows"] for r in cost_rows]
    mid = [r["cost_vs_m1"] for r in cost_rows]
    err = [[m - r["cost_range"][0] for m, r in zip(mid, cost_rows)], [r["cost_range"][1] - m for m, r in zip(mid, cost_rows)]]
    ax[1].errorbar(cx, mid, yerr=err, fmt="o-", color="C3", capsize=3)
    ax[1].axhline(1, color="gray", ls=":")
    ax[1].set(ylabel="stage time / its median at m = 1\n(bars: fastest to slowest round)",
              title="one stage alone: the same rows in smaller pieces")
    for a, rs in ((ax[0], rows), (ax[1], cost_rows)):  # after set(xscale=…), which resets the ticks
        a.set_xscale("log")
        a.invert_xaxis()
        a.set_xticks([r["microbatch_rows"] for r in rs], [f"{r['microbatch_rows']}\nm={r['microbatches']}" for r in rs],
                     fontsize=8)
        a.xaxis.set_minor_locator(NullLocator())
        a.set_xlabel(f"rows per micro-batch, fewer to the right\nas m grows (a {batch}-row batch)", fontsize=8)
        a.grid(alpha=0.3)
    return finish(fig, label)
