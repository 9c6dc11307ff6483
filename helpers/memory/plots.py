"""Pictures of notebook 06's measurements: the leak, what each remedy keeps, the batch search (06)."""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.ticker import NullLocator
from matplotlib.figure import Figure

from ..core.plots import finish
from .recipe import BatchSearch

__all__ = ["plot_leak", "plot_remedies", "plot_batch_search"]


def plot_leak(bug: dict, fix: dict, label: str = "") -> Figure | None:
    """Bytes held by autograd after each iteration, for the bug and the fix (06)."""
    fig, ax = plt.subplots(figsize=(6.5, 3.4))
    it = range(1, len(bug["held_bytes"]) + 1)
    ax.plot(it, [b / 1e6 for b in bug["held_bytes"]], "o-", color="C3", label="total += loss  (bug)")
    ax.plot(it, [b / 1e6 for b in fix["held_bytes"]], "s-", color="C2", label="total += loss.item()  (fix)")
    ax.set(xlabel="iteration", ylabel="MB held by autograd's saved tensors", title="the accumulation leak")
    ax.grid(alpha=0.3)
    ax.legend()
    return finish(fig, label)


def plot_remedies(rem: dict, label: str = "") -> Figure | None:
    """Saved bytes of one forward under each remedy, as bars (06)."""
    names = ["plain", "autocast", "checkpoint", "no_grad", "inference_mode"]
    fig, ax = plt.subplots(figsize=(7, 3.2))
    bars = ax.bar(names, [rem[n] / 1e6 for n in names], color=["C0", "C1", "C4", "C2", "C2"])
    for b, n in zip(bars, names):
        ax.text(b.get_x() + b.get_width() / 2, b.get_height(), f"{rem[n] / rem['plain']:.0%}", ha="center", va="bottom",
                fontsize=8)
    ax.set(ylabel="MB saved for backward", title=f"one forward of {rem['checkpoint_blocks']} blocks: what each remedy keeps")
    ax.grid(alpha=0.3, axis="y")
    return finish(fig, label)


def plot_batch_search(search: BatchSearch, label: str = "") -> Figure | None:
    """The batch sizes tried, in order, green when they fitted and red when they ran out (06)."""
    fig, ax = plt.subplots(figsize=(6.5, 3.2))
    for i, (bs, ok) in enumerate(search.tried):
        ax.scatter(i + 1, bs, color="C2" if ok else "C3", zorder=3)
    ax.plot(range(1, len(search.tried) + 1), [b for b, _ in search.tried], color="gray", lw=0.8)
    ax.axhline(search.batch_size, color="C2", ls=":", label=f"largest that fits: {search.batch_size}")
    ax.set(xlabel="attempt", ylabel="batch size", yscale="log", title="finding the largest batch (red: out of memory)")
    sizes = [b for b, _ in search.tried]
    lo, hi = min(sizes), max(sizes)
    ticks = sorted({2**k for k in range(lo.bit_length() - 1, hi.bit_length() + 1) if lo <= 2**k <= hi} | {search.batch_size})
    ax.set_yticks(ticks, [f"{t:,}" for t in ticks])  # after the log scale: plain numbers, not 2×10³
    ax.yaxis.set_minor_locator(NullLocator())
    ax.set_xticks(range(1, len(sizes) + 1))
    ax.grid(alpha=0.3)
    ax.legend()
    return finish(fig, label)
