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
    """The two designs over the objective, with the 1-D projection that matters (04)."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), layout="constrained")
    xs = np.linspace(0, 1, 200)
    for ax, name in zip(axes, ("grid", "random")):
        pts = np.array(res[name]["points"])
        ax.plot(xs, [toy_objective(x, 0) * 0.25 + 1.02 for x in xs], "k-", lw=1)
        dots = ax.scatter(pts[:, 0], pts[:, 1], c=res[name]["scores"], cmap="viridis", vmin=0, vmax=1, s=60, zorder=3)
        for x in pts[:, 0]:
            ax.axvline(x, color="gray", lw=0.5, alpha=0.5)
        ax.set(xlim=(0, 1), ylim=(0, 1.3), xlabel="important parameter", ylabel="unimportant parameter",
               title=f"{name}: {res[name]['distinct_important']} distinct values, best {res[name]['best']:.2f}")
    fig.colorbar(dots, ax=list(axes), label="score of the trial",
                 fraction=0.03, pad=0.02)
    return finish(fig)


def plot_bayes_steps(steps: list[dict], f: Callable = toy_1d) -> Figure | None:
    """Small multiples: the GP's belief, the expected improvement, and the next proposal (04)."""
    fig, axes = plt.subplots(2, len(steps), figsize=(3.2 * len(steps), 4.6), sharex=True,
                             gridspec_kw={"height_ratios": [3, 1]})
    for i, s in enumerate(steps):
        ax, ax2 = axes[0, i], axes[1, i]
        ax.plot(s["grid"], f(s["grid"]), "k:", lw=1, label="true function")
        ax.plot(s["grid"], s["mean"], "C0", label="GP mean")
        ax.fill_between(s["grid"], s["mean"] - 2 * s["std"], s["mean"] + 2 * s["std"], color="C0", alpha=0.2,
                        label="± 2 std")
        ax.scatter(s["X"], s["Y"], color="k", zorder=3, s=15, label="tried")
        ax.axvline(s["next"], color="C3", ls="--", label="next")
        ax.set_title(f"step {i + 1}: {len(s['X'])} points", fontsize=9)
        ax2.plot(s["grid"], s["ei"], "C3")
        ax2.set_xlabel("x")
        if i == 0:
            ax.legend(fontsize=6, loc="lower left")
            ax2.set_ylabel("expected\nimprovement", fontsize=8)
    return finish(fig)


def plot_asha(asha: dict, full: dict, rungs: list[int], label: str = "") -> Figure | None:
    """Every trial's learning curve under ASHA (stopped ones end early) next to full runs (04)."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
    max_t = max(len(c) for c in full["curves"])
    for ax, res, title in ((axes[0], asha, "ASHA"), (axes[1], full, "every trial to the end")):
        for c in res["curves"]:
            done = len(c) == max_t
            ax.plot(range(1, len(c) + 1), c, "o-", ms=3, lw=1, alpha=0.8 if done else 0.5,
                    color="C0" if done else "gray")
        for r in rungs:
            if r < max_t:  # a rung at max_t compares nothing: every trial stops there
                ax.axvline(r, color="C3", ls=":", lw=1)
        ax.set(title=f"{title}: {res['epochs']} epochs, best {res['best_accuracy']:.3f}", xlabel="epoch")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("validation accuracy")
    from matplotlib.lines import Line2D
    axes[0].legend(handles=[Line2D([], [], color="C0", marker="o", ms=3, label=f"trained to max_t = {max_t}"),
                            Line2D([], [], color="gray", marker="o", ms=3, label="stopped at a rung"),
                            Line2D([], [], color="C3", ls=":", label="rung: trials compared here")],
                   fontsize=7, loc="lower right")
    return finish(fig, label)
