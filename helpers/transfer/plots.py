"""Pictures of notebook 07: strategies against labels, augmentations seen, flipped digits per class (07)."""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.ticker import NullLocator
import torch
from matplotlib.figure import Figure

from ..core.plots import finish
from .instruments import binomial_se
from .recipe import MODES

__all__ = ["plot_strategies", "plot_augmentation_grid", "plot_flip_per_class", "plot_transformed"]


def plot_strategies(rows: list[dict], label: str = "") -> Figure | None:
    """Test accuracy against labelled images per class, one line per mode; time per optimizer step (07).

    Modes whose accuracies coincide would hide each other's lines: each mode has its own marker
    and line style, and the legend sits below the axes, clear of the data.
    """
    fig, ax = plt.subplots(1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [3, 2]})
    shots = sorted({r["shots"] for r in rows})
    styles = ["o-", "s--", "^-.", "D:"]
    for i, (mode, name) in enumerate(MODES.items()):
        rs = sorted((r for r in rows if r["mode"] == mode), key=lambda r: r["shots"])
        bars = [2 * binomial_se(r["test_acc"], r["n_test"]) for r in rs]   # each accuracy's own 2·SE (not the difference's)
        ax[0].errorbar([r["shots"] * (1 + 0.03 * (i - 1.5)) for r in rs], [r["test_acc"] for r in rs], yerr=bars,
                       fmt=styles[i % len(styles)], color=f"C{i}", capsize=3, label=name, markersize=7 - i,
                       markerfacecolor="none" if i % 2 else f"C{i}")   # nudged sideways so the bars do not overlap
    ax[0].set(xscale="log", xlabel="labels per class (digits 5–9)", ylabel="test accuracy (bars: 2·SE of each alone)",
              title="digits 5–9: from scratch, or pretrained on 0–4")
    ax[0].set_xticks(shots, [str(k) for k in shots])
    ax[0].xaxis.set_minor_locator(NullLocator())  # no 2×10¹-style labels between them
    ax[0].legend(fontsize=9, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, frameon=False)
    ax[0].grid(alpha=0.3)
    last = [r for r in rows if r["shots"] == shots[-1]]
    ax[1].barh([MODES[r["mode"]] for r in last], [1e3 * r["sec_per_step"] for r in last],
               color=[f"C{list(MODES).index(r['mode'])}" for r in last])
    ax[1].set(xlabel=f"mean ms per step ({shots[-1]} labels per class)", title="time per optimizer step")
    ax[1].tick_params(axis="y", labelsize=9)
    ax[1].invert_yaxis()
    return finish(fig, label)


def plot_augmentation_grid(images: torch.Tensor, names: list[str]) -> Figure | None:
    """Rows: augmentations; columns: the same digits (07)."""
    n = len(images) // len(names)
    fig, axes = plt.subplots(len(names), n, figsize=(n * 0.9, len(names) * 0.95))
    for r, name in enumerate(names):
        for c in range(n):
            ax = axes[r, c]
            ax.imshow(images[r * n + c, 0], cmap="gray_r", vmin=0, vmax=1)
            ax.set_xticks([])
            ax.set_yticks([])
        axes[r, 0].set_ylabel(name, rotation=0, ha="right", va="center", fontsize=8)
    return finish(fig)


def plot_flip_per_class(per_class: dict[int, tuple[float, float]], label: str = "") -> Figure | None:
    """Per digit: accuracy on normal vs mirrored test images (07)."""
    fig, ax = plt.subplots(figsize=(8.5, 3))
    digits = list(per_class)
    for i, (dx, name) in enumerate(((-0.2, "as they are"), (0.2, "mirrored left–right"))):
        acc = [per_class[d][i] for d in digits]
        bars = ax.bar([d + dx for d in digits], acc, 0.4, label=name)
        ax.bar_label(bars, ["0" if round(a, 2) == 0 else "" for a in acc], fontsize=8)  # a zero bar is not missing
    ax.set(xticks=digits, xlabel="digit", ylabel="test accuracy", ylim=(0, 1.02),
           title="the same model on the test digits, as they are and mirrored")
    ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)  # beside the bars, never on them
    ax.grid(alpha=0.3, axis="y")
    return finish(fig, label)


def plot_transformed(image: torch.Tensor, transforms: dict, seed: int = 0, inch_per_pixel: float = 0.09) -> Figure | None:
    """One digit through each transform, every output drawn to the same scale: ``inch_per_pixel`` (07).

    Each panel is placed by hand at its output's size in pixels × ``inch_per_pixel`` (a grid of
    equal-height axes would shrink the largest image to fit), in a slot wide enough for its title.
    """
    from matplotlib.layout_engine import PlaceHolderLayoutEngine

    torch.manual_seed(seed)
    outs = {"original": image, **{name: tf(image) for name, tf in transforms.items()}}
    slot = max(1.6, max(o.shape[-1] for o in outs.values()) * inch_per_pixel + 0.2)
    tallest = max(o.shape[-2] for o in outs.values()) * inch_per_pixel
    top, bottom = 0.62, 0.08  # room for two lines of title above the tallest panel
    width, height = slot * len(outs), tallest + top + bottom
    fig = plt.figure(figsize=(width, height))
    fig.set_layout_engine(PlaceHolderLayoutEngine(adjust_compatible=False, colorbar_gridspec=False))  # no re-layout
    for i, (name, out) in enumerate(outs.items()):
        w, h = out.shape[-1] * inch_per_pixel, out.shape[-2] * inch_per_pixel
        ax = fig.add_axes(((i * slot + (slot - w) / 2) / width, bottom / height, w / width, h / height))
        ax.imshow(out[0].numpy(), cmap="gray_r", vmin=0, vmax=1, aspect="equal")
        title = "\n".join(name.split(" → "))  # a chain on two lines, each step on its own
        ax.set_title(f"{title}\n{out.shape[-2]}×{out.shape[-1]}", fontsize=8)
        ax.set_xticks([])
        ax.set_yticks([])
    return finish(fig)
