"""Pictures of notebook 06's measurements: the leak, what each remedy keeps, the batch search (06)."""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter, MaxNLocator, NullLocator
from matplotlib.figure import Figure

from ..core.plots import finish
from .recipe import BatchSearch

__all__ = ["plot_leak", "plot_remedies", "plot_batch_search"]


def plot_leak(bug: dict, fix: dict, label: str = "") -> Figure | None:
    """Bytes held by autograd after each iteration, for the bug and the fix (06)."""
    fig, ax = plt.subplots(figsize=(6.5, 3.4))
    it = range(1, len(bug["held_bytes"]) + 1)
    ax.plot(it, bug["held_bytes"], "o-", color="C3", label="total += loss  (bug)")
    ax.plot(it, fix["held_bytes"], "s-", color="C2", label="total += loss.item()  (fix)")
    ax.set(xlabel="iteration", ylabel="bytes held by autograd's saved tensors", title="the loss-summing leak and its fix")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))  # bytes, as the text prints them
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)
    ax.legend()
    return finish(fig, label)


def plot_remedies(rem: dict, label: str = "") -> Figure | None:
    """Saved bytes of one forward under each remedy, as bars; autocast split into activations and weight copies (06)."""
    names = ["plain", "autocast", "checkpoint", "no_grad", "inference_mode"]
    ticks = ["plain\n(float32)", f"autocast\n({rem['autocast_dtype']})", f"checkpoint\n({rem['checkpoint_segments']} segments)",
             "no_grad", "inference_mode"]
    mib = lambda b: b / 2**20  # noqa: E731
    heights = [mib(rem["autocast_activations"] if n == "autocast" else rem[n]) for n in names]
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    ax.bar(ticks, heights, color="C0", label="activations")  # one colour per kind of bytes, as the legend says
    ax.bar(ticks[1], mib(rem["autocast_weight_casts"]), bottom=mib(rem["autocast_activations"]), color="C1", alpha=0.6,
           hatch="//", edgecolor="C1", label=f"{rem['autocast_dtype']} weight copies")
    for t, n in zip(ticks, names):
        ax.text(t, mib(rem[n]), f"{rem[n] / rem['plain']:.0%}", ha="center", va="bottom", fontsize=9)
    ax.set(ylabel="saved for backward, MiB\n(1 MiB = 2²⁰ B; bytes printed above)",
           title=f"one forward of {rem['blocks']} Linear+ReLU blocks (width {rem['width']}, batch {rem['batch']}): what each keeps")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=9, loc="upper right")
    return finish(fig, label)


def plot_batch_search(search: BatchSearch, label: str = "") -> Figure | None:
    """The batch sizes tried, and how far apart the largest fit and smallest failure were after each (06)."""
    fig, (ax, gap_ax) = plt.subplots(1, 2, figsize=(10, 3.4))
    sizes = [b for b, _ in search.tried]
    attempts = range(1, len(sizes) + 1)
    ax.axhline(search.batch_size, color="C2", ls=":", lw=1, zorder=1, label=f"largest that fits: {search.batch_size:,}")
    ax.plot(attempts, sizes, color="gray", lw=0.8, zorder=2)
    ax.scatter([i for i, (_, ok) in zip(attempts, search.tried) if ok], [b for b, ok in search.tried if ok], color="C2",
               zorder=3, label="fitted")
    ax.scatter([i for i, (_, ok) in zip(attempts, search.tried) if not ok], [b for b, ok in search.tried if not ok],
               color="C3", marker="x", zorder=3, label="out of memory")
    ax.set(xlabel="attempt", ylabel="batch size", yscale="log", title="the sizes tried")
    lo, hi = min(sizes), max(sizes)
    ticks = sorted({2**k for k in range(lo.bit_length() - 1, hi.bit_length() + 1) if lo <= 2**k <= hi})
    ax.set_yticks(ticks, [f"{t:,}" for t in ticks])  # after the log scale: plain numbers, not 2×10³
    ax.yaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    gaps, good, bad = [], None, None
    for bs, ok in search.tried:
        if ok:
            good = bs if good is None else max(good, bs)
        else:
            bad = bs if bad is None else min(bad, bs)
        gaps.append((bad - good) if good is not None and bad is not None else None)
    known = [(i, g) for i, g in zip(attempts, gaps) if g is not None]
    gap_ax.plot([i for i, _ in known], [g for _, g in known], "o-", color="C0")
    gap_ax.set(xlabel="attempt", ylabel="smallest failure − largest fit", yscale="log", xlim=ax.get_xlim(),
               title="the bisection closing in")
    gap_ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    gap_ax.grid(alpha=0.3)
    return finish(fig, label)
