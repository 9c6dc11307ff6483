"""Plots the notebooks share, and how every figure is finished (00 onwards).

Plots of measurements take a ``label`` naming the hardware that produced them (see
``helpers.core.device.hardware_label``): :func:`finish` writes it above the figure, so a figure is
never separated from its origin. (Pictures of data, such as :func:`show_images`, need none.)
"""
from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import torch

from matplotlib.figure import Figure

from .train import History


def finish(fig: Figure, label: str = "") -> Figure | None:
    """Title ``fig`` with ``label`` (the hardware), lay it out, display it once in Jupyter and close it (00 onwards).

    Returns None in Jupyter (returning the figure would show it a second time as the cell's
    value; a trailing ``;`` does not suppress that under nbval), the figure elsewhere.
    """
    if label:
        fig.suptitle(label, fontsize=9)
    if fig.get_layout_engine() is None:  # a figure that chose its own layout (constrained, for a colour bar) keeps it
        fig.tight_layout()
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        return fig
    if get_ipython() is None:
        return fig
    display(fig)
    plt.close(fig)
    return None


def show_images(x: torch.Tensor, y: Sequence[int] | torch.Tensor | None = None, n: int = 32, cols: int = 8,
                title: str | None = None, pred: Sequence[int] | torch.Tensor | None = None) -> Figure | None:
    """A grid of the first ``n`` images with their labels (and predictions, red when wrong) (00)."""
    n = min(n, len(x))
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(cols * 0.9, rows * 1.0), squeeze=False)
    for i, ax in enumerate(axes.flat):
        ax.axis("off")
        if i >= n:
            continue
        img = x[i].detach().cpu()
        ax.imshow(img.permute(1, 2, 0) if img.shape[0] == 3 else img.squeeze(0), cmap="gray_r")
        if y is not None:
            text = f"{int(y[i])}"
            color = "black"
            if pred is not None:
                text += f"→{int(pred[i])}"
                color = "black" if int(pred[i]) == int(y[i]) else "red"
            ax.set_title(text, fontsize=8, color=color)
    return finish(fig, title or "")


def plot_history(hist: History, label: str = "", ax=None) -> Figure | None:
    """Train/validation loss and accuracy per epoch, side by side (00)."""
    if ax is None:
        fig, ax = plt.subplots(1, 2, figsize=(9, 3))
    else:
        fig = ax[0].figure
    epochs = range(1, len(hist.train_loss) + 1)
    ax[0].plot(epochs, hist.train_loss, "o-", label="train")
    ax[1].plot(epochs, hist.train_acc, "o-", label="train")
    if hist.val_loss:
        ax[0].plot(epochs, hist.val_loss, "s--", label="validation")
        ax[1].plot(epochs, hist.val_acc, "s--", label="validation")
    ax[0].set(xlabel="epoch", ylabel="cross-entropy loss", title="loss")
    low = min(hist.train_acc + hist.val_acc, default=0.0)   # the range the run covers, up to 100 %
    ax[1].set(xlabel="epoch", ylabel="accuracy", title="accuracy", ylim=(max(0.0, low - 0.05), 1.01))
    for a in ax:
        a.grid(alpha=0.3)
        a.legend()
    return finish(fig, label)
