"""Notebook 10's figure: when each epoch started, in runs a worker was killed in, and what the failure cost (10)."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plot_restarts"]


def plot_restarts(runs: dict[str, dict], label: str = "") -> Figure:
    """One row per run: the killed rank's epoch starts against time, the kill, and the time it lost shaded (10).

    ``runs`` maps a name to :func:`helpers.resilience.instruments.recovery`'s result for the rank that was killed.
    """
    import matplotlib.pyplot as plt  # here: ranks that import this package never draw

    fig, axes = plt.subplots(len(runs), 1, figsize=(10, 1.6 + 1.3 * len(runs)), sharex=True, squeeze=False)
    for ax, (name, r) in zip(axes[:, 0], runs.items()):
        for epoch, t in r["started_s"]:
            ax.plot([t], [epoch], "o", color="C0")
            ax.annotate(f"epoch {epoch}", (t, epoch), xytext=(4, 4), textcoords="offset points", fontsize=8)
        ax.axvline(r["kill_s"], color="C3", lw=2, label=f"SIGKILL to rank {r['rank']}")
        ax.axvspan(r["kill_s"] - r["redone_s"], r["kill_s"], color="C1", alpha=0.3,
                   label=f"work redone: {r['redone_s']:.2f} s")
        ax.axvspan(r["kill_s"], r["kill_s"] + r["recovery_s"], color="C3", alpha=0.15,
                   label=f"restart: {r['recovery_s']:.1f} s")
        ax.set(ylabel="epoch", title=name, ylim=(-0.5, max(e for e, _ in r["started_s"]) + 0.8))
        ax.margins(x=0.08)   # room for the last start's label
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    ranks = sorted({r["rank"] for r in runs.values()})
    axes[-1, 0].set_xlabel(f"seconds since rank {', '.join(map(str, ranks))} started its first epoch")
    if label:
        fig.suptitle(label, fontsize=9)
    fig.tight_layout()
    return fig
