"""Pictures of notebook 08 (who holds what before and after each collective, bus bandwidth, DDP from scratch) (08).

The sweep read out in sentences lives in readout.py and ring_readout.py."""
from __future__ import annotations


import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from ..core.plots import finish
from .instruments import COLLECTIVES, alpha_beta_time
from .readout import sweep_summary  # noqa: F401  (its home was here: helpers.collectives.plots.sweep_summary)
from .ring_readout import ring_prediction_lines  # noqa: F401  (likewise)

__all__ = ["plot_collectives", "plot_bus_bandwidth", "plot_scratch_ddp"]


def _holdings(ax, rows: list, title: str, vmax: float) -> None:
    """One panel: a row of cells per rank, each cell a value, coloured by size (grey: not defined)."""
    width = max(len(r) for r in rows if r is not None)
    for i, r in enumerate(rows):
        for j in range(width):
            defined = r is not None and j < len(r)
            color = plt.cm.Blues(0.15 + 0.7 * r[j] / vmax) if defined else "#eeeeee"
            ax.add_patch(plt.Rectangle((j, -i - 1), 1, 1, facecolor=color, edgecolor="white"))
            if defined:
                ax.text(j + 0.5, -i - 0.5, f"{r[j]:g}", ha="center", va="center", fontsize=7,
                        color="white" if r[j] / vmax > 0.6 else "black")
        if r is None:
            ax.text(width / 2, -i - 0.5, "undefined", ha="center", va="center", fontsize=7, color="gray")
    ax.set(xlim=(0, width), ylim=(-len(rows), 0), title=title)
    ax.set_yticks([-i - 0.5 for i in range(len(rows))], [f"rank {i}" for i in range(len(rows))], fontsize=7)
    ax.set_xticks([])
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)


def plot_collectives(results: dict[str, list[dict]], label: str = "") -> Figure | None:
    """For each collective, what every rank holds before and after it (08).

    ``results`` is :func:`run_collectives`'s answer. Rank ``r`` starts with ``10r, 10r + 1, …``, so
    each number tells where it came from.
    """
    ops = [op for op in results if op in COLLECTIVES]
    vmax = max(v for op in ops for r in results[op] for side in ("before", "after") for v in (r[side] or [0]))
    fig, axes = plt.subplots(len(ops), 2, figsize=(6.4, 1.0 + 0.32 * len(results[ops[0]]) * len(ops)), squeeze=False)
    for (a, b), op in zip(axes, ops):
        _holdings(a, [r["before"] for r in results[op]], f"{op}: before", vmax)
        _holdings(b, [r["after"] for r in results[op]], f"{op}: after", vmax)
    return finish(fig, label)


def plot_bus_bandwidth(sweep: dict, label: str = "") -> Figure | None:
    """Time and bus bandwidth against message size for all_reduce and the hand-written ring, with the models (08)."""
    rows = sweep["sizes"]
    b = np.array([r["bytes"] for r in rows], dtype=float)
    fine = np.geomspace(b.min(), b.max(), 100)
    fig, ax = plt.subplots(1, 2, figsize=(10, 4.6))
    ax[0].plot(b, [r["library_s"] for r in rows], "o", color="C0", label="all_reduce (measured)")
    ax[0].plot(fine, alpha_beta_time(fine, sweep["alpha_s"], sweep["beta_s_per_byte"]), "-", color="C0",
               label=f"α–β fit of the whole all_reduce: fitted α = {sweep['alpha_s'] * 1e6:.0f} µs, "
                     f"1/β = {1e-9 / sweep['beta_s_per_byte']:.2f} GB/s")
    ax[0].plot(b, [r["ring_s"] for r in rows], "s", color="C1", label="ring (measured)")
    ax[0].plot(b, [r["ring_model_s"] for r in rows], "--", color="C1",
               label=f"ring predicted from one step's fit: fitted α = {sweep['step_alpha_s'] * 1e6:.0f} µs, "
                     f"1/β = {1e-9 / sweep['step_beta_s_per_byte']:.2f} GB/s, and the additions")
    if all("step_s" in r for r in rows):
        ax[0].plot(b, [r["step_s"] for r in rows], "^", color="C2", label="one ring step (measured, bytes/n each way)")
        ax[0].plot(fine, alpha_beta_time(fine / sweep["world_size"], sweep["step_alpha_s"], sweep["step_beta_s_per_byte"]),
                   ":", color="C2", label="one ring step: its fitted line")
    ax[0].set(xscale="log", yscale="log", xlabel="message (bytes)", ylabel="seconds per call",
              title="time = α + bytes · β")
    ax[1].plot(b, [r["library_busbw_gbs"] for r in rows], "o-", label="all_reduce")
    ax[1].plot(b, [r["ring_busbw_gbs"] for r in rows], "s-", label="hand-written ring")
    ax[1].set(xscale="log", xlabel="message (bytes)", ylabel="bus bandwidth (GB/s)",
              title=f"busbw = bytes/time · 2(n−1)/n, n = {sweep['world_size']}")
    for a in ax:
        a.grid(alpha=0.3)
        a.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1, frameon=False)
    return finish(fig, label)


def plot_scratch_ddp(res: dict, label: str = "") -> Figure | None:
    """Step time of each from-scratch DDP version beside DDP's, with its difference in parameters (08)."""
    names = list(res["step_s"])
    fig, ax = plt.subplots(figsize=(7.2, 3.8))
    rounds = res.get("rounds")
    spread = [[0.0] * len(names), [1e3 * (max(rounds[v]) - res["step_s"][v]) for v in names]] if rounds else None
    bars = ax.bar(names, [1e3 * res["step_s"][v] for v in names], color=["gray"] + ["C0"] * (len(names) - 1),
                  yerr=spread, capsize=4, ecolor="black")
    tops = {v: 1e3 * (max(rounds[v]) if rounds else res["step_s"][v]) for v in names}
    for bar, v in zip(bars, names):  # over DDP's: one ratio, or with rounds the lowest and highest round's
        q = sorted(x / y for x, y in zip(rounds[v], rounds["ddp"])) if rounds else [res["ratio"][v]] * 2
        ax.text(bar.get_x() + bar.get_width() / 2, tops[v], f"×{q[0]:.2f}–×{q[-1]:.2f}\nΔ={res['max_abs_diff'][v]:.0e}"
                if rounds else f"{q[0]:.2f}×\nΔ={res['max_abs_diff'][v]:.0e}", ha="center", va="bottom", fontsize=9)
    title = "DDP rebuilt from hooks: step time (× DDP's)" if not rounds else \
        (f"DDP rebuilt from hooks: bar, best of {len(rounds['ddp'])} rounds; whisker, up to the slowest round\n"
         "label: ÷ DDP's step in the same round, lowest–highest")
    ax.set(ylabel="ms per training step", title=title + ("; " if rounds else "\n") + "Δ = max |parameters − DDP's|")
    ax.set_ylim(0, 1.35 * max(tops.values()))
    ax.grid(alpha=0.3, axis="y")
    return finish(fig, label)
