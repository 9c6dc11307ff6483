"""Pictures of notebook 07: strategies against labels, augmentations seen, flipped digits per class (07)."""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.ticker import NullLocator
import torch
from matplotlib.figure import Figure

from ..core.plots import finish
from .recipe import MODES

__all__ = ["plot_strategies", "plot_augmentation_grid", "plot_flip_per_class", "plot_transformed"]


def plot_strategies(rows: list[dict], label: str = "") -> Figure | None:
    """Test accuracy against labelled images per class, one line per mode; time per epoch (07)."""
    fig, ax = plt.subplots(1, 2, figsize=(11, 3.6), gridspec_kw={"width_ratios": [3, 2]})
    shots = sorted({r["shots"] for r in rows})
    for mode, name in MODES.items():
        rs = [r for r in rows if r["mode"] == mode]
        ax[0].plot([r["shots"] for r in rs], [r["test_acc"] for r in rs], "o-", label=name)
    ax[0].set(xscale="log", xlabel="labelled images per class (digits 5–9)", ylabel="test accuracy",
              title="pretrained on digits 0–4, adapted to 5–9")
    ax[0].set_xticks(shots, [str(k) for k in shots])
    ax[0].xaxis.set_minor_locator(NullLocator())  # no 2×10¹-style labels between them
    ax[0].legend(fontsize=7)
    ax[0].grid(alpha=0.3)
    last = [r for r in rows if r["shots"] == shots[-1]]
    ax[1].barh([MODES[r["mode"]] for r in last], [1e3 * r["sec_per_epoch"] for r in last], color=[f"C{i}" for i in range(len(last))])
    ax[1].set(xlabel=f"ms per epoch ({shots[-1]} images per class)", title="fewer trainable parameters, faster epochs")
    ax[1].tick_params(axis="y", labelsize=7)
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


def plot_flip_per_class(per_class: dict[int, tuple[float, float]]) -> Figure | None:
    """Per digit: accuracy on normal vs mirrored test images (07)."""
    fig, ax = plt.subplots(figsize=(7, 3))
    digits = list(per_class)
    ax.bar([d - 0.2 for d in digits], [per_class[d][0] for d in digits], 0.4, label="as they are")
    ax.bar([d + 0.2 for d in digits], [per_class[d][1] for d in digits], 0.4, label="mirrored left–right")
    ax.set(xticks=digits, xlabel="digit", ylabel="test accuracy", title="a mirrored 2 is not a 2")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="y")
    return finish(fig)


def plot_transformed(image: torch.Tensor, transforms: dict, seed: int = 0) -> Figure | None:
    """One digit through each transform, drawn at its output size (pixels to scale) (07)."""
    torch.manual_seed(seed)
    outs = {"original": image, **{name: tf(image) for name, tf in transforms.items()}}
    fig, axes = plt.subplots(1, len(outs), figsize=(1.6 * len(outs), 2.1),
                             gridspec_kw={"width_ratios": [o.shape[-1] for o in outs.values()]})
    for ax, (name, out) in zip(axes, outs.items()):
        ax.imshow(out[0], cmap="gray_r", vmin=0, vmax=1)
        ax.set_title(f"{name}\n{out.shape[-2]}×{out.shape[-1]}", fontsize=7)
        ax.set_xticks([])
        ax.set_yticks([])
    return finish(fig)
