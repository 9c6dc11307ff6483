"""Pictures of notebook 03's measurements: throughput and speedup of 1 and N processes (03)."""
from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, NullLocator

from ..core.plots import finish
from .scaling import solo_step_ideal, scaling_summary

__all__ = ["plot_scaling"]


def plot_scaling(rows: list[dict], label: str = "") -> Figure | None:
    """Samples/s and speedup against the global batch, medians with the range of repeats (03).

    The right panel's title is generated from the data (:func:`scaling_summary`), never written
    in advance; the ideal speedup is a labelled line, the legends sit below the axes.
    """
    n = rows[0]["processes"]
    gb = [r["global_batch"] for r in rows]
    fig, ax = plt.subplots(1, 2, figsize=(10, 4.6))
    for side, key, style in ((1, "samples_per_s_1", "o-"), (n, "samples_per_s_n", "s-")):
        ax[0].plot(gb, [r[key] for r in rows], style, label=f"{side} process{'es' if side > 1 else ''} (median)")
    med = [r["speedup"] for r in rows]
    err = [[m - r["speedup_min"] for m, r in zip(med, rows)], [r["speedup_max"] - m for m, r in zip(med, rows)]]
    ax[1].errorbar(gb, med, yerr=err, fmt="s-", color="C1", capsize=4,
                   label=f"median of the {rows[0]['repeats']} repeats' speedups (each timed side by side), "
                         "bar = their range")
    ideal = solo_step_ideal(rows)
    if ideal:  # where the share B/N was timed: 1 process's step at B over its step at B/N
        ax[1].plot(list(ideal), list(ideal.values()), "D", color="C2", mfc="none", ms=8,
                   label=f"solo-step ideal: 1 process's step at B / at B/{n}\n(above {n}× where 1 process "
                         f"is slower per sample at B than at B/{n})")
        for b, v in ideal.items():  # each marker named on the figure too, with its value
            ax[1].annotate(f"ideal {v:.2f}×", (b, v), xytext=(-8, 0), textcoords="offset points", ha="right",
                           va="center", fontsize=8, color="C2")
    ax[1].axhline(1, color="black", lw=0.8, ls="--", label="1× (no gain)")
    ax[1].axhline(n, color="gray", ls=":", label=f"{n}× (ideal if 1 process's time per sample did not change)")
    ax[0].set(ylabel="samples / s", title="throughput, median of each side\n(their ratio is not the median speedup)")
    title = "\n".join(textwrap.fill(line, 62) for line in scaling_summary(rows)["title"].split("\n"))
    ax[1].set(ylabel=f"speedup ({n} vs 1 process)", title=title, ylim=(0, max(n, *ideal.values(), *(r["speedup_max"] for r in rows)) * 1.1))
    for a in ax:
        a.set_xscale("log")
        a.xaxis.set_major_locator(FixedLocator(gb))
        a.xaxis.set_minor_locator(NullLocator())
        a.set_xticklabels([str(b) for b in gb])
        a.set_xlabel("global batch (samples per step)")
        a.set_ylim(bottom=0)
        a.grid(alpha=0.3)
        a.legend(loc="upper center", bbox_to_anchor=(0.5, 0), borderaxespad=4.5, fontsize=8,  # pad in font sizes:
                 ncol=1 if a is ax[1] else 2, frameon=False)  # below the tick labels and axis label at any axes height
    ax[1].title.set_fontsize(10)
    return finish(fig, label)
