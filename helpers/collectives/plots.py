"""Pictures of notebook 08 (who holds what before and after each collective, bus bandwidth, DDP from scratch), and the
sweep read out in sentences generated from its numbers (08)."""
from __future__ import annotations


import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from ..core.plots import finish
from .instruments import COLLECTIVES, alpha_beta_time
from .readout import _size, falling_time_lines

__all__ = ["plot_collectives", "plot_bus_bandwidth", "sweep_summary", "ring_prediction_lines", "plot_scratch_ddp"]


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


def sweep_summary(sweep: dict) -> list[str]:
    """What the sweep shows, in sentences generated from its numbers: α's and β's ranges, busbw, buckets (08)."""
    t = {r["bytes"]: r["library_s"] for r in sweep["sizes"]}
    b = sorted(t)
    small, large = (b[0], b[2]), (b[-3], b[-1])  # 1 → 16 KiB and 1 → 16 MiB: 16× the bytes each
    grow = [t[hi] / t[lo] for lo, hi in (small, large)]
    size = _size
    lines = ["all_reduce time for 16× the bytes: " + ", ".join(f"×{g:.1f} from {size(lo)} to {size(hi)}" for (lo, hi), g
                                                               in zip((small, large), grow))
             + " (α alone would give ×1, β alone ×16)"]
    flat, steep = 0.7 <= grow[0] <= 2, grow[1] >= 8  # α alone: ×1; β alone: ×16
    if grow[1] > 16:
        lines.append(f"  ×{grow[1]:.1f} is above even β alone (×16): the time per byte also grew with the size here, which "
                     "one α–β line with α ≥ 0 cannot give")
    if flat and steep:
        odd = ""
        if grow[0] < 1:   # a falling time: do the small sizes' times stay flat without leaning on that one pair?
            few = [t[x] for x in b if x <= 256 * 1024]   # up to 256 KiB: 256× the smallest size's bytes
            odd = (f"; the small sizes' ×{grow[0]:.1f} < 1, a {size(small[0])} time above the {size(small[1])} one, "
                   "is what no α–β line gives"
                   + (f"; from {size(b[0])} to 256 KiB ({256 * 1024 // b[0]}× the bytes) every time lies within "
                      f"{min(few) * 1e3:.2f}–{max(few) * 1e3:.2f} ms (×{max(few) / min(few):.2f}), so the verdict does not "
                      "rest on that odd time" if len(few) > 2 and max(few) <= 2 * min(few) else
                      ", so their verdict rests on that odd time"))
        lines.append("  so small messages pay mostly α, large ones mostly β" + odd)
    elif not flat:
        lines.append(f"  small sizes do not fit the α–β model here: ×{grow[0]:.1f} is outside the ×0.7–2 that α alone "
                     "would give, so this run does not show where α dominates")
    else:
        lines.append(f"  large sizes: ×{grow[1]:.1f} for 16× the bytes, so β does not dominate yet at these sizes here")
    inv_beta, algbw = 1e-9 / sweep["beta_s_per_byte"], max(r["bytes"] / r["library_s"] / 1e9 for r in sweep["sizes"])
    over = [r for r in sweep["sizes"] if r["bytes"] / r["library_s"] / 1e9 >= inv_beta]
    lines.append(f"the fitted line's 1/β = {inv_beta:.2f} GB/s is above every size's bytes/time (at most {algbw:.2f} GB/s), "
                 "as the model with α > 0 says" if not over else
                 f"the fitted line's 1/β = {inv_beta:.2f} GB/s; at {', '.join(size(r['bytes']) for r in over)} bytes/time "
                 f"reaches {', '.join(format(r['bytes'] / r['library_s'] / 1e9, '.2f') for r in over)} GB/s, which no line "
                 "with α > 0 gives (bytes/(α + bytes·β) < 1/β): the line misdescribes "
                 f"{'that size' if len(over) == 1 else 'those sizes'}")
    fastest = min(sweep["sizes"], key=lambda r: r["library_s"])
    if sweep["alpha_s"] > fastest["library_s"] and sweep["beta_s_per_byte"] >= 0:   # the line is ≥ α at every size
        lines.append(f"the fitted α ({sweep['alpha_s'] * 1e6:.0f} µs) is above the fastest timed all_reduce "
                     f"({fastest['library_s'] * 1e3:.2f} ms at {size(fastest['bytes'])}): a least-squares line passes between "
                     "the times, above some of them")
    lines.append("timed all_reduce / fitted line: " + ", ".join(f"×{r['library_s'] / r['library_model_s']:.2f} at {size(r['bytes'])}"
                                            for r in sorted(sweep["sizes"], key=lambda r: r["bytes"])))
    busbw = [f"{r['library_busbw_gbs']:.2f}" for r in sweep["sizes"][-3:]]
    lines.append(f"bus bandwidth at {', '.join(size(r['bytes']) for r in sweep['sizes'][-3:])}: {', '.join(busbw)} GB/s")
    k, one = b[-3] // b[0], sweep["sizes"][0]
    mid = next(r for r in sweep["sizes"] if r["bytes"] == b[-3])
    lines.append(f"{k:,} all-reduces of {size(b[0])}: {k:,} × {t[b[0]] * 1e3:.3f} ms (one, timed) = "
                 f"{k * t[b[0]] * 1e3:.0f} ms, or {k * one['library_model_s'] * 1e3:.0f} ms from the fitted line; one of "
                 f"{size(b[-3])}, the same bytes: {mid['library_model_s'] * 1e3:.1f} ms from the fitted line "
                 f"({k * one['library_model_s'] / mid['library_model_s']:.0f}× less), {t[b[-3]] * 1e3:.1f} ms timed "
                 f"({k * t[b[0]] / t[b[-3]]:.0f}× less than the timed {size(b[0])} times {k:,})")
    return lines


def _no_fixed_cost_bound(rows: list[dict]) -> str:
    """Where the ring took no more than its parts timed alone at some size: they bound nothing; what the excesses show."""
    extra = [r["ring_s"] - r["ring_parts_s"] for r in rows]
    run = 0   # the smallest sizes over which the excess stays positive and within ×1.5 of itself: about constant
    while run < len(rows) and extra[run] > 0 and max(extra[:run + 1]) <= 1.5 * min(extra[:run + 1]):
        run += 1
    none = [r for r, e in zip(rows, extra) if e <= 0]
    said = (f"the ring's excess over its measured parts stays within {min(extra[:run]) * 1e3:.2f}–"
            f"{max(extra[:run]) * 1e3:.2f} ms from {_size(rows[0]['bytes'])} to {_size(rows[run - 1]['bytes'])}, as a "
            "fixed cost per call would, but " if run >= 2 else "")
    return (f"  {said}at {', '.join(_size(r['bytes']) for r in none)} the ring took no more than its parts timed alone "
            f"({', '.join('×%.2f' % (r['ring_s'] / r['ring_parts_s']) for r in none)}): there the parts are not a lower "
            "bound on the ring, so this run does not decide whether every ring call pays a fixed cost")


def _times(v: float, margin: float = 0.15) -> str:
    """``×v`` to two decimals, or three where two would land on the margin's line and hide its side (08's read 26)."""
    return f"×{v:.3f}" if min(abs(v - 1 + margin), abs(v - 1 - margin)) < 0.005 else f"×{v:.2f}"


def ring_prediction_lines(sweep: dict, margin: float = 0.15) -> list[str]:
    """Each size's times (all_reduce, ring, one ring step) and the ring against its predictions, led by one takeaway (08).

    The prediction (``ring_model_s``) comes from the line fitted to the step timed alone and γ, the
    additions' best seconds per byte at the large sizes. Where the rows hold ``ring_parts_s`` (the same recipe from each size's *measured* step and
    addition, no line) and ``step_model_s`` (the step line at that size), the takeaway also says, where
    the ring is within ``margin`` of its measured parts, how much of its excess over the prediction they
    explain, split into the steps (with how far the step line is from the measured step) and the
    additions; and a fixed cost per call that the ring adds to its parts is bounded: at most its smallest
    excess over them, said only where the ring exceeds its parts at every size (where it does not, the parts
    are no lower bound and no bound is said); without the parts: at most the ring's fastest call.
    """
    rows = sorted(sweep["sizes"], key=lambda r: r["bytes"])
    has_step = all("step_s" in r for r in rows)
    parts = has_step and all("ring_parts_s" in r and "step_model_s" in r for r in rows)
    head = f"{'size':>7}  {'all_reduce':>10}  {'ring':>8}  {'one step':>8}  {'predicted':>9}  ring/predicted"
    if parts:
        head += f"  {'step line':>9}  {'from parts':>10}  ring/parts"
    table = [head] + [f"{_size(r['bytes']):>7}  {r.get('library_s', float('nan')) * 1e3:7.2f} ms  {r['ring_s'] * 1e3:5.2f} ms  "
                      f"{(r['step_s'] * 1e3 if has_step else float('nan')):5.2f} ms  {r['ring_model_s'] * 1e3:6.2f} ms  "
                      f"{_times(r['ring_s'] / r['ring_model_s'], margin):<6}"
                      + (f"          {r['step_model_s'] * 1e3:6.2f} ms  {r['ring_parts_s'] * 1e3:7.2f} ms  "
                         f"{_times(r['ring_s'] / r['ring_parts_s'], margin)}" if parts else "") for r in rows]
    if parts:
        table.append("  predicted: from the line fitted to the step, plus γ (the additions' best seconds per byte "
                     "at the large sizes); from parts: 2(n − 1) × this size's measured step + (n − 1) × its measured addition, no line")
        table.append("  per whole all-reduce: all_reduce, ring, predicted, from parts; per ring step: one step, step line")
    else:
        table.append("  per whole all-reduce: all_reduce, ring, predicted; per ring step: one step")
    fits = [r for r in rows if abs(r["ring_s"] / r["ring_model_s"] - 1) <= margin]
    above = [r for r in rows if r["ring_s"] > (1 + margin) * r["ring_model_s"]]
    below = [r for r in rows if r["ring_s"] < (1 - margin) * r["ring_model_s"]]
    names = lambda rs: ", ".join(_size(r["bytes"]) for r in rs) or "no size"  # noqa: E731
    ratio = lambda rs, key: (f"{_times(min(r['ring_s'] / r[key] for r in rs), margin)}–"  # noqa: E731
                             f"{_times(max(r['ring_s'] / r[key] for r in rs), margin)}")
    rest = [r for r in above if parts and r["ring_s"] > (1 + margin) * r["ring_parts_s"]]
    near = [r for r in above if parts and r not in rest and r["ring_s"] >= (1 - margin) * r["ring_parts_s"]]
    steps = 2 * (sweep.get("world_size", 2) - 1)   # parts − prediction = the steps' miss of their line + the additions' of γ

    def explained(r: dict) -> list[str]:   # the measured parts' share of the ring's excess over the prediction, split
        excess = r["ring_s"] - r["ring_model_s"]
        by_steps = steps * (r["step_s"] - r["step_model_s"]) / excess
        by_adds = (r["ring_parts_s"] - r["ring_model_s"]) / excess - by_steps
        pct_steps, pct_adds = round(100 * by_steps), round(100 * by_adds)
        return [f"At {_size(r['bytes'])} it is within {margin:.0%} of its measured parts "
                f"({_times(r['ring_s'] / r['ring_parts_s'], margin)})",
                f"Its measured step there is {_times(r['step_s'] / r['step_model_s'], margin)} the step line "
                f"({r['step_s'] * 1e3:.2f} vs {r['step_model_s'] * 1e3:.2f} ms)",
                f"Over {steps} steps that gap is {pct_steps}% of the ring's excess over the prediction; the additions' gap "
                f"to γ is {pct_adds}%" + (f"; the other {100 - pct_steps - pct_adds}% is not identified"
                                           if pct_steps + pct_adds < 100 else "")]
    said = [f"The ring is within {margin:.0%} of its prediction at {names(fits)}"]
    luck = [r for r in fits if parts and abs(r["ring_s"] / r["ring_parts_s"] - 1) > margin]
    if luck:   # the prediction met by two misses that cancel, not by the model holding
        said.append(f"At {names(luck)} that is two misses cancelling, not the model holding: there the ring takes "
                    + ", ".join(f"{_times(r['ring_s'] / r['ring_parts_s'], margin)} its measured parts while its measured "
                                f"step is {_times(r['step_s'] / r['step_model_s'], margin)} the step line" for r in luck))
    if above:
        said.append(f"It is slower at {names(above)} ({ratio(above, 'ring_model_s')})")
    same = lambda rs: rs == above and len(rs) > 2  # noqa: E731  (the list just named again: "each of them")
    if rest:
        said.append(f"{'At each of them' if same(rest) else 'At ' + names(rest)} it also takes more than its own parts "
                    f"timed alone add up to ({ratio(rest, 'ring_parts_s')}): a cost this run does not identify")
    said += [x for r in near for x in explained(r)]
    if parts and above and not near:
        said.append(f"No size qualified for splitting the excess between steps and additions: none slower than "
                    f"predicted is within ±{margin:.0%} of its measured parts")
    if below:
        said.append(f"It is faster at {names(below)}")
    lines = ["in short:"] + [f"  {x}." for x in said] + table
    if parts:
        miss = [r for r in rows if abs(r["step_s"] / r["step_model_s"] - 1) > margin and r not in near]   # near: said above
        if miss:
            near_miss = [r for r in near if abs(r["step_s"] / r["step_model_s"] - 1) > margin]   # said above, and missed
            also = f" also (besides {names(near_miss)}, said above)" if near_miss else ""
            lines.append(f"the step line{also} misses its own measured step by more than {margin:.0%} at {names(miss)}: "
                         + ", ".join(f"{_times(r['step_s'] / r['step_model_s'], margin)} at {_size(r['bytes'])}" for r in miss)
                         + " (measured/line); a least-squares line on relative error weighs every size alike, so one "
                         "odd time pulls it at all sizes")
    unbound = []   # sizes the no-bound line names: not named again below
    if above and rest and any(r["ring_s"] <= r["ring_parts_s"] for r in rows):   # rest: only with parts
        lines.append(_no_fixed_cost_bound(rows))
        unbound = [r for r in rows if r["ring_s"] <= r["ring_parts_s"]]
    elif above:
        if parts:
            extra = {r["bytes"]: r["ring_s"] - r["ring_parts_s"] for r in rows}
            low = min(rows, key=lambda r: extra[r["bytes"]])
            bound, what = extra[low["bytes"]], f"its smallest excess over its measured parts, at {_size(low['bytes'])}"
            above = rest
        else:
            extra = {r["bytes"]: r["ring_s"] - r["ring_model_s"] for r in above}
            low = min(rows, key=lambda r: r["ring_s"])
            bound, what = low["ring_s"], f"its fastest call, at {_size(low['bytes'])}"
        big = [r for r in (rows if parts else above) if extra[r["bytes"]] > bound]
        if above:
            lines.append(f"  a fixed cost that every ring call adds is at most {bound * 1e3:.2f} ms here ({what})"
                         + (f"; the larger excess at {names(big)} is at least partly a cost at that size, or load lasting "
                            "through that size's repeats; this run does not separate them" if big else ""))
    if below:
        lines.append(f"faster than predicted at {names(below)}: there the ring took less than the lines "
                     "fitted to its parts timed alone add up to")
    if parts:
        under = [r for r in rows if r["ring_s"] < (1 - margin) * r["ring_parts_s"] and r not in unbound]
        if under:
            lines.append(f"the ring took less than its measured parts add up to at {names(under)}: "
                         + ", ".join(f"×{r['ring_s'] / r['ring_parts_s']:.2f} at {_size(r['bytes'])}" for r in under)
                         + " (ring/parts): there its steps and additions cost less, on average, inside the ring than "
                         "timed alone, so the parts timed alone do not say what the ring's steps cost at that size")
        alone = [r for r in rows if r["step_s"] > r["ring_s"]]
        if alone:
            lines.append("  " + "; ".join(f"at {_size(r['bytes'])} one step timed alone ({r['step_s'] * 1e3:.2f} ms) took "
                                          f"longer than the whole ring ({r['ring_s'] * 1e3:.2f} ms), which makes {steps} "
                                          "such steps" for r in alone))
    for key, what in (("alpha_s", "the whole all_reduce's"), ("step_alpha_s", "one step's")):
        if sweep.get(key, 0.0) < 0:
            lines.append(f"{what} fitted α is negative ({sweep[key] * 1e6:.0f} µs): no latency is negative, so no line "
                         "with α ≥ 0 fits those times; the α–β model does not describe them")
    return lines + falling_time_lines(sweep, margin)


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
