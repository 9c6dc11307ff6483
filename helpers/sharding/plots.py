"""Pictures of notebook 09: bytes each rank holds by strategy and world size, measured against predicted; step times;
the line said of own costs beyond their spread (09)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from ..core.i18n import tr
from ..core.plots import finish

__all__ = ["plot_memory", "plot_step_times", "beyond_spread", "noise_said", "parts_how", "misses_said", "worst_miss",
           "within_said", "under_said", "overlap_said"]


PARTS = ("params", "grads", "optim", "gathered")
NAMES = {"ddp": "DDP", "zero1": "ZeRO-1", "fsdp2": "FSDP2", "tp": "TP"}


def overlap_said() -> str:
    """What overlap would do to 09's step-time prediction, a sum of parts with no overlap, in the course's language
    (09)."""
    return tr("sharding.overlap_said", "overlap of communication with compute, which the sum leaves out, would, other "
              "things equal, make it predict too much, not too little")


def _first(seen: set, label: str) -> str | None:
    """``label`` the first time, ``None`` after: one legend entry per part."""
    if label in seen:
        return None
    seen.add(label)
    return label


def plot_memory(rows: list[dict], label: str = "") -> Figure | None:
    """Stacked bars of parameter, gradient, optimizer and gathered-layer bytes on the largest rank, per strategy and
    world size; a black tick marks the calculator's total (09)."""
    strategies = list(dict.fromkeys(r["strategy"] for r in rows))
    sizes = sorted({r["world_size"] for r in rows})
    fig, ax = plt.subplots(figsize=(9.0, 3.4))
    width = 0.8 / len(sizes)
    seen: set = set()
    for j, n in enumerate(sizes):
        for i, s in enumerate(strategies):
            r = next(r for r in rows if r["strategy"] == s and r["world_size"] == n)
            x, bottom = i + (j - (len(sizes) - 1) / 2) * width, 0.0
            for k, part in enumerate(PARTS):
                mb = r["measured_bytes"].get(part, 0) / 1e6
                ax.bar(x, mb, width * 0.92, bottom=bottom, color=f"C{k}", alpha=0.45 + 0.55 * (j + 1) / len(sizes),
                       label=_first(seen, f"{part} (measured)") if mb else None)
                bottom += mb
            pred = sum(r["predicted_bytes"].get(p, 0) for p in PARTS) / 1e6
            ax.plot([x - width * 0.45, x + width * 0.45], [pred, pred], color="black", lw=1.5,
                    label="calculator's total" if (i, j) == (0, 0) else None)
            ax.text(x, bottom, f"N={n}", ha="center", va="bottom", fontsize=8)
    ax.plot([], [], " ", label=f"paler to darker: N = {', '.join(map(str, sizes))} (on each bar)")
    ax.set_xticks(range(len(strategies)), [NAMES.get(s, s) for s in strategies])
    ax.set(ylabel="MB on the largest rank", title="parameters, gradients, optimizer state and gathered layers per rank"
           "\n(not activations; DDP's buckets are its gradients here)")
    ax.set_ylim(0, ax.get_ylim()[1] * 1.08)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return finish(fig, label)


def plot_step_times(rows: list[dict], label: str = "") -> Figure | None:
    """Measured step time of each strategy on N > 1 ranks beside the prediction (09).

    One process is where each strategy's own cost is measured (its step less the plain model's), so its
    prediction is its measured step by construction (but for a negative part counted as 0, and the α of any
    collective a one-rank group still calls) and not shown.
    """
    timed = [r for r in rows if r.get("step_s") and r["world_size"] > 1]
    names = [f"{NAMES.get(r['strategy'], r['strategy'])}\nN={r['world_size']}" for r in timed]
    x = np.arange(len(timed))
    fig, ax = plt.subplots(figsize=(6.4, 3.0))
    ax.bar(x - 0.2, [1e3 * r["step_s"] for r in timed], 0.4, label="measured", color="C0")
    ax.bar(x + 0.2, [1e3 * r["predicted_step_s"] for r in timed], 0.4, label="predicted", color="C1", alpha=0.7)
    for xi, r in zip(x, timed):
        ax.text(xi, 1e3 * max(r["step_s"], r["predicted_step_s"]), f"{r['predicted_step_s'] / r['step_s'] - 1:+.1%}",
                ha="center", va="bottom", fontsize=8)
    ax.set_xticks(x, names, fontsize=8)
    ax.set(ylabel="ms per training step",
           title="step time, measured and predicted from parts\n(label: predicted ÷ measured − 1; − = under-predicted)")
    ax.set_ylim(0, ax.get_ylim()[1] * 1.3)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8, loc="upper left", ncol=2)
    return finish(fig, label)


def beyond_spread(own: dict[str, tuple[float, float]]) -> str:
    """What a negative own cost beyond its spread says, or ``""`` (09).

    ``own``: strategy → (its step less the plain model's step in seconds, the spread of those two timings)."""
    below = [(k, f"{v * 1e3:+.2f}", f"{n * 1e3:.2f}") for k, (v, n) in own.items() if v < 0 and -v >= n]
    if not below:
        return ""
    costs = ""   # "ddp -1.71 ms (spread ±0.66 ms), zero1 …": each a message, the list grown on its right
    for k, ms, noise in reversed(below):
        costs = (tr("sharding.own_spread_more", "{name} {ms} ms (spread ±{noise} ms), {rest}", name=k, ms=ms,
                    noise=noise, rest=costs) if costs else
                 tr("sharding.own_spread", "{name} {ms} ms (spread ±{noise} ms)", name=k, ms=ms, noise=noise))
    (d, dn), (z, zn) = own.get("ddp", (None, 0)), own.get("zero1", (None, 0))
    if d is not None and z is not None and -z >= zn and d - z > dn + zn:   # 09's read 24: the same wrapper, timed twice
        return tr("sharding.beyond_spread_zero1", "{costs}: below 0 by more than the spread; zero1 is the same DDP"
                  " wrapper plus an optimizer step, yet took {less} ms less than ddp: the spread over repeats"
                  " understates the noise between separately timed runs, and differences of that size are not told"
                  " from noise here",
                  costs=costs, less=f"{(d - z) * 1e3:.2f}")
    return tr("sharding.beyond_spread", "{costs}: below 0 by more than the spread; either the spread over repeats"
              " understates the noise between separately timed runs, or the wrapped step is faster; not told apart"
              " here", costs=costs)


def noise_said(v: float, n: float) -> str:
    """A timed difference ``v`` seconds with spread ``n`` in words; plainly not told from 0 when ``|v| < n`` (09)."""
    if abs(v) < n:   # "{ms} ms, {within}" is too short to match a whole line: only where a cell prints it as a field
        return tr("sharding.noise_ms", "{ms} ms, {within}", ms=f"{v * 1e3:+.2f}", within=tr(
            "sharding.noise_said", "within the timing noise (±{noise} ms): not told apart from 0 here",
            noise=f"{n * 1e3:.2f}"))
    return f"{v * 1e3:+.2f} ms"


def parts_how(w: dict) -> dict[str, str]:
    """How each of a timed row's ``predicted_parts`` was got, with the timing it comes from printed (09).

    ``w["compute"]`` holds the plain model's times on the row's N ranks: a part modelled as a timing ÷ N prints
    that timing, so the printed figure ÷ N is the printed part."""
    n, c, s = w["world_size"], w["compute"], w["strategy"]
    return {"own": tr("sharding.how_own", "modelled: one process's, carried over"),
            "plain rest": tr("sharding.how_plain_rest", "timed on these ranks, negative counted as 0"),
            "compute": tr("sharding.how_compute_tp", "modelled: the whole batch's forward and backward timed on"
                          " these {n} ranks, {ms} ms, ÷ {n}", n=n, ms=f"{c['fb_full_s'] * 1e3:.2f}") if s == "tp"
            else tr("sharding.how_compute", "timed on these {n} ranks, the rank's share of the batch", n=n),
            "adam": tr("sharding.how_adam_ddp", "timed on these {n} ranks, the whole model's Adam", n=n) if s == "ddp"
            else tr("sharding.how_adam", "modelled: the whole model's Adam timed on these {n} ranks, {ms} ms, ÷ {n}",
                    n=n, ms=f"{c['adam_s'] * 1e3:.2f}"),
            "comm": tr("sharding.how_comm", "modelled: Σ α + bytes a rank sends × β, fitted below")}


def misses_said(timed: list[dict]) -> str:
    """Predicted against measured step for each timed row; a miss counts as under or over only when it is larger
    than the step's spread over its repeats (09)."""
    off = [(r["predicted_step_s"] - r["step_s"], r) for r in timed]
    under = sum(m < 0 and -m > r["step_spread_s"] for m, r in off)
    over = sum(m > 0 and m > r["step_spread_s"] for m, r in off)
    return tr("sharding.misses_said", "predicted vs measured step, this run: {rows}: {under} of {total} under the"
              " measured step by more than its spread over its repeats, {over} over, {within} within it",
              rows=", ".join(f"{r['strategy']} N={r['world_size']} {m / r['step_s']:+.1%}" for m, r in off),
              under=under, total=len(off), over=over, within=len(off) - under - over)


def _beyond(r: dict) -> bool:
    return abs(r["predicted_step_s"] - r["step_s"]) > r["step_spread_s"]


def worst_miss(timed: list[dict]) -> tuple[float, dict]:
    """The largest relative miss among rows missed by more than the step's spread, or among all rows if none is (09)."""
    pool = [r for r in timed if _beyond(r)] or timed
    return max(((r["predicted_step_s"] / r["step_s"] - 1, r) for r in pool), key=lambda t: abs(t[0]))


def within_said(timed: list[dict]) -> str:
    """The rows whose miss is no larger than the step's spread, said as not told from noise; "" if none (09)."""
    rows = [r for r in timed if not _beyond(r)]
    names = ", ".join(f"{r['strategy']} N={r['world_size']}" for r in rows)
    if not rows:
        return ""
    if len(rows) > 1:
        return tr("sharding.within_said_these", "within the step's spread over its repeats: {names}; for these this run"
                  " cannot separate the model's error from timing noise", names=names)
    return tr("sharding.within_said_one", "within the step's spread over its repeats: {names}; for this one this run"
              " cannot separate the model's error from timing noise", names=names)


def under_said(timed: list[dict], cores: int) -> str:
    """When every miss beyond its spread is under, says so and names the unmeasured candidates that push that way;
    "" otherwise (09)."""
    out = [r for r in timed if _beyond(r)]
    if not out or any(r["predicted_step_s"] > r["step_s"] for r in out):
        return ""
    return tr("sharding.under_said", "every miss beyond its spread in this run is under ({under} of {total}): leaving"
              " out overlap would, other things equal, predict too much, so something else outweighs it here;"
              " candidates, none measured apart: each wrapper's own cost carried over from one process, gloo's threads"
              " sharing {cores} cores with the ranks, collectives timed alone", under=len(out), total=len(timed),
              cores=cores)
