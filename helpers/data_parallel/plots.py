"""Pictures of notebook 02's measurements: where a step's time goes, four ways to use two cores (02)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator, NullLocator

from ..core.plots import finish

__all__ = ["plot_step_times", "plot_throughputs"]


def plot_step_times(step_seconds: dict, title: str, label: str = "", names: dict | None = None) -> Figure | None:
    """Milliseconds per forward+backward pass in each of DataParallel's steps, one labelled bar each (02).

    ``title`` says what ran (the CPU simulation or ``torch.nn.parallel`` on GPUs); each bar is
    labelled with its time and its share of the step, so the tiny ones are still read. ``names``:
    a bar's label where it should say more than the step's key (which thread ran it).
    """
    keys = list(step_seconds)
    ms = [step_seconds[k] * 1e3 for k in keys]
    total = sum(ms)
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(keys) + 1.3))
    ax.barh([(names or {}).get(k, k) for k in keys], ms, color=[f"C{i}" for i in range(len(keys))])
    for i, v in enumerate(ms):
        ax.text(v, i, f" {v:.2f} ms ({v / total:.1%})", va="center", fontsize=9)
    ax.set(xlabel="milliseconds per forward+backward pass (mean of 20)", title=title, xlim=(0, 1.3 * max(ms)))
    ax.invert_yaxis()
    ax.grid(axis="x", alpha=0.3)
    return finish(fig, label)


def plot_throughputs(results: dict, gil_rows: list[dict], label: str = "", notes: dict | None = None) -> Figure | None:
    """Samples/s of each way to use two cores, and the 2-threads speedup against the batch (02).

    ``notes``: the text beside each bar (the notebook's ratios, as it prints them); by default the
    median's ratio to the median of ``single``.
    """
    fig, ax = plt.subplots(1, 2, figsize=(13, 3.9), width_ratios=(1.4, 1))
    fig.set_layout_engine("tight", w_pad=3)  # the left panel's notes clear the right panel's y-label
    from .instruments import LABELS

    names = list(results)
    runs = {n: sorted(v) if isinstance(v, (list, tuple)) else [v] for n, v in results.items()}
    mid = {n: float(np.median(v)) for n, v in runs.items()}
    err = [[mid[n] - runs[n][0] for n in names], [runs[n][-1] - mid[n] for n in names]]
    ax[0].barh([LABELS.get(n, n) for n in names], [mid[n] for n in names], xerr=err, capsize=3,
               color=[f"C{i}" for i in range(len(names))])
    for i, n in enumerate(names):
        note = (notes or {}).get(n, f"{mid[n] / mid['single']:.2f}×")
        ax[0].text(runs[n][-1], i, f" {note}", va="center", fontsize=9)
    ax[0].set(xlabel="samples / s (median; bars: min–max of rounds)",
              title="global batch 256: threads, then processes\n(beside each bar: the median of its rounds' ratios)", xlim=(0, 1.6 * max(r[-1] for r in runs.values())))  # room for the notes, no more
    ax[0].xaxis.set_major_locator(MaxNLocator(4))
    ax[0].invert_yaxis()
    sp = [r["speedup"] for r in gil_rows]
    lo = [r["speedup"] - r.get("speedup_min", r["speedup"]) for r in gil_rows]
    hi = [r.get("speedup_max", r["speedup"]) - r["speedup"] for r in gil_rows]
    ax[1].errorbar([r["batch_per_thread"] for r in gil_rows], sp, yerr=[lo, hi], fmt="o-", capsize=3,
                   label="median, bars: min–max of rounds")
    ax[1].axhline(2, color="gray", ls=":", label="ideal 2×")
    ax[1].axhline(1, color="C3", ls=":", label="no gain")
    ax[1].set(xscale="log", xlabel="batch per thread", ylabel="2 threads / 1 thread (samples/s)", ylim=(0, 2.2),
              title="2 threads vs 1 (forward + backward)\nby batch per thread")
    batches = [r["batch_per_thread"] for r in gil_rows]
    ax[1].set_xticks(batches, [str(b) for b in batches], rotation=45)  # 128 and 256 sit close on the log axis
    ax[1].xaxis.set_minor_locator(NullLocator())
    ax[1].legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1))  # beside the data, never on it
    for a in ax:
        a.grid(alpha=0.3)
    return finish(fig, label)
