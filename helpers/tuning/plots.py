"""Pictures of notebook 04: the two designs over the objective, the GP's belief, every trial's curve (04)."""
from __future__ import annotations

from typing import Callable

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from ..core.plots import finish
from .instruments import toy_1d, toy_objective

__all__ = ["plot_grid_vs_random", "plot_bayes_steps", "plot_asha"]


def plot_grid_vs_random(res: dict) -> Figure | None:
    """The two designs over the objective: the score against the parameter that matters above, the points below (04)."""
    fig, axes = plt.subplots(2, 2, figsize=(10, 5.2), layout="constrained", sharex=True,
                             gridspec_kw={"height_ratios": [1, 2.2]})
    xs = np.linspace(0, 1, 200)
    for col, name in enumerate(("grid", "random")):
        top, ax = axes[0, col], axes[1, col]
        pts = np.array(res[name]["points"])
        top.plot(xs, [toy_objective(x, 0) for x in xs], "k-", lw=1, label="score (depends on this parameter only)")
        top.scatter(pts[:, 0], res[name]["scores"], color="C3", s=30, zorder=3, label="trials")
        top.set(ylabel="score", ylim=(-0.05, 1.1),
                title=f"{name}: {res[name]['distinct_important']} distinct values, best score {res[name]['best']:.2f}")
        dots = ax.scatter(pts[:, 0], pts[:, 1], c=res[name]["scores"], cmap="viridis", vmin=0, vmax=1, s=60, zorder=3)
        for x in pts[:, 0]:
            ax.axvline(x, color="gray", lw=0.5, alpha=0.5)
            top.axvline(x, color="gray", lw=0.5, alpha=0.5)
        ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="important parameter", ylabel="unimportant parameter")
    axes[0, 0].legend(fontsize=8, loc="upper left")
    fig.colorbar(dots, ax=list(axes[1]), label="score of the trial", fraction=0.03, pad=0.02)
    return finish(fig)


def plot_bayes_steps(steps: list[dict], f: Callable = toy_1d) -> Figure | None:
    """Small multiples: the GP's belief, the expected improvement, and the next proposal (04)."""
    fig, axes = plt.subplots(2, len(steps), figsize=(3.0 * len(steps), 5.0), sharex=True,
                             gridspec_kw={"height_ratios": [3, 1]})
    for ax in axes[0, 1:]:  # one score scale for the beliefs; each EI on its own scale, so a small maximum still shows
        ax.sharey(axes[0, 0])
        ax.tick_params(labelleft=False)
    for i, s in enumerate(steps):
        ax, ax2 = axes[0, i], axes[1, i]
        ax.plot(s["grid"], f(s["grid"]), "k:", lw=1, label="true function (unseen)")
        ax.plot(s["grid"], s["mean"], "C0", label="GP mean")
        ax.fill_between(s["grid"], s["mean"] - 2 * s["std"], s["mean"] + 2 * s["std"], color="C0", alpha=0.2,
                        label="GP mean ± 2 std")
        ax.scatter(s["X"], s["Y"], color="k", zorder=3, s=15, label="tried")
        ax.axvline(s["next"], color="C3", ls="--", label="next trial (EI maximum)")
        ax2.axvline(s["next"], color="C3", ls="--")
        ax.set_title(f"step {i + 1}: {len(s['X'])} points,\nlength scale {s['length_scale']:.2f}", fontsize=9)
        ax2.plot(s["grid"], s["ei"], "C3")
        ax2.plot(s["next"], float(np.max(s["ei"])), "o", color="C3", ms=4)
        ax2.set_ylim(0, 1.15 * float(np.max(s["ei"])) or 1.0)
        ax2.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3))
        ax2.set_xlabel("x")
    axes[0, 0].set_ylabel("score")
    axes[1, 0].set_ylabel("expected\nimprovement\n(own scale)", fontsize=9)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=5, fontsize=8, bbox_to_anchor=(0.5, 0.0))
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return finish(fig)


def plot_asha(asha: dict, full: dict, rungs: list[int], label: str = "") -> Figure | None:
    """Every trial's learning curve under ASHA (stopped ones end early, with a cross) next to full runs (04)."""
    from matplotlib.lines import Line2D

    fig, axes = plt.subplots(1, 2, figsize=(10, 4.0), sharey=True)
    max_t = max(len(c) for c in full["curves"])
    for ax, res, title in ((axes[0], asha, "ASHA"), (axes[1], full, "FIFO: every trial to the end, no rungs")):
        for r in rungs:
            if r < max_t and res is asha:  # a rung at max_t compares nothing; FIFO compares nowhere
                ax.axvline(r, color="C3", ls=":", lw=1, zorder=0)
        for c in res["curves"]:
            done = len(c) == max_t
            ax.plot(range(1, len(c) + 1), c, "-", lw=1, alpha=0.8 if done else 0.5, color="C0" if done else "gray")
            ax.plot(len(c), c[-1], "o" if done else "x", ms=4, color="C0" if done else "gray")
        ax.set(title=f"{title}: {res['epochs']} epochs, best {res['best_accuracy']:.3f}", xlabel="epoch")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("validation accuracy")
    fig.legend(handles=[Line2D([], [], color="C0", marker="o", ms=4, label=f"trained to max_t = {max_t}"),
                        Line2D([], [], color="gray", marker="x", ms=4, ls="-", label="stopped at a rung (x: its last epoch)"),
                        Line2D([], [], color="C3", ls=":", label="ASHA's rung: compared with the results recorded so far")],
               fontsize=8, loc="lower center", ncol=3)
    fig.tight_layout(rect=(0, 0.08, 1, 0.95 if label else 1))
    return finish(fig, label)
