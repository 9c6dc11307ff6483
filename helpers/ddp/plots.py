"""Pictures of notebook 03's measurements: throughput and speed-up of 1 and 2 processes (03)."""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from ..core.plots import finish

__all__ = ["plot_throughput"]


def plot_throughput(rows: list[dict], label: str = "") -> Figure | None:
    """Samples/s and speedup against the global batch, one line per process count (03)."""
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.4))
    for n in sorted({r["processes"] for r in rows}):
        rs = [r for r in rows if r["processes"] == n]
        gb = [r["global_batch"] for r in rs]
        ax[0].plot(gb, [r["samples_per_s"] for r in rs], "o-", label=f"{n} process{'es' if n > 1 else ''}")
        ax[1].plot(gb, [r["speedup"] for r in rs], "o-", label=f"{n} process{'es' if n > 1 else ''}")
    n_max = max(r["processes"] for r in rows)
    ax[1].axhline(n_max, color="gray", ls=":", label=f"ideal ({n_max}×)")
    ax[0].set(xscale="log", xlabel="global batch (samples per step)", ylabel="samples / s", title="throughput")
    ax[1].set(xscale="log", xlabel="global batch (samples per step)", ylabel="speedup over 1 process",
              title="more compute per all-reduce → better scaling")
    for a in ax:
        a.grid(alpha=0.3)
        a.legend()
    return finish(fig, label)
