"""Pictures of notebook 02's measurements: where a step's time goes, four ways to use two cores (02)."""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

from ..core.plots import finish

__all__ = ["plot_step_times", "plot_throughputs"]


def plot_step_times(step_seconds: dict, label: str = "") -> Figure | None:
    """Time per training step in each of DataParallel's steps, as a stacked bar (02)."""
    fig, ax = plt.subplots(figsize=(7, 2.8))
    left = 0.0
    for i, (k, v) in enumerate(step_seconds.items()):
        ax.barh(0, v * 1e3, left=left, color=f"C{i}", label=f"{k} {v * 1e3:.2f} ms")
        left += v * 1e3
    ax.set(yticks=[], xlabel="milliseconds per training step", title="where a DataParallel step spends its time")
    ax.legend(ncol=5, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.75))  # below the x-label
    return finish(fig, label)


def plot_throughputs(results: dict, gil_rows: list[dict], label: str = "") -> Figure | None:
    """Samples/s of each way to use two cores, and the 2-threads speedup against the batch (02)."""
    fig, ax = plt.subplots(1, 2, figsize=(11, 3.4))
    from .instruments import LABELS

    names = list(results)
    ax[0].barh([LABELS.get(n, n) for n in names], [results[n] for n in names], color=[f"C{i}" for i in range(len(names))])
    for i, n in enumerate(names):
        ax[0].text(results[n], i, f" {results[n] / results['single']:.2f}×", va="center", fontsize=8)
    ax[0].set(xlabel="samples / s (global batch 256)", title="same work, four ways (each worker on 1 core)",
              xlim=(0, 1.18 * max(results.values())))
    ax[0].invert_yaxis()
    ax[1].plot([r["batch_per_thread"] for r in gil_rows], [r["speedup"] for r in gil_rows], "o-")
    ax[1].axhline(2, color="gray", ls=":", label="ideal 2×")
    ax[1].axhline(1, color="C3", ls=":", label="no gain")
    ax[1].set(xscale="log", xlabel="batch per thread", ylabel="2 threads / 1 thread",
              title="the GIL: small steps are mostly Python")
    batches = [r["batch_per_thread"] for r in gil_rows]
    ax[1].set_xticks(batches, [str(b) for b in batches])
    ax[1].xaxis.set_minor_locator(NullLocator())
    ax[1].legend(fontsize=8)
    for a in ax:
        a.grid(alpha=0.3)
    return finish(fig, label)
