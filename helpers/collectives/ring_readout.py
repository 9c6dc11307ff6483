"""Notebook 08's hand-written ring against its predictions, read out in sentences generated from its numbers (08)."""
from __future__ import annotations

from ..core.i18n import tr
from .readout import _size, falling_time_lines, ratios_at

__all__ = ["ring_prediction_lines"]


def _no_fixed_cost_bound(rows: list[dict]) -> str:
    """Where the ring took no more than its parts timed alone at some size: they bound nothing; what the excesses
    show."""
    extra = [r["ring_s"] - r["ring_parts_s"] for r in rows]
    run = 0   # the smallest sizes over which the excess stays positive and within ×1.5 of itself: about constant
    while run < len(rows) and extra[run] > 0 and max(extra[:run + 1]) <= 1.5 * min(extra[:run + 1]):
        run += 1
    none = [r for r, e in zip(rows, extra) if e <= 0]
    sizes = ", ".join(_size(r['bytes']) for r in none)
    ratios = ", ".join('×%.2f' % (r['ring_s'] / r['ring_parts_s']) for r in none)
    if run >= 2:
        return tr("collectives.no_bound_constant", "  the ring's excess over its measured parts stays within "
                  "{lo}–{hi} ms from {first} to {last}, as a fixed cost per call would, but at {sizes} the ring took "
                  "no more than its parts timed alone ({ratios}): there the parts are not a lower bound on the ring, "
                  "so this run does not decide whether every ring call pays a fixed cost",
                  lo=f"{min(extra[:run]) * 1e3:.2f}", hi=f"{max(extra[:run]) * 1e3:.2f}", first=_size(rows[0]['bytes']),
                  last=_size(rows[run - 1]['bytes']), sizes=sizes, ratios=ratios)
    return tr("collectives.no_bound", "  at {sizes} the ring took no more than its parts timed alone ({ratios}): there "
              "the parts are not a lower bound on the ring, so this run does not decide whether every ring call pays a "
              "fixed cost", sizes=sizes, ratios=ratios)


def _times(v: float, margin: float = 0.15) -> str:
    """``×v`` to two decimals, or three where two would land on the margin's line and hide its side (08's read 26)."""
    return f"×{v:.3f}" if min(abs(v - 1 + margin), abs(v - 1 - margin)) < 0.005 else f"×{v:.2f}"


def _names(rows: list[dict]) -> str:
    """The rows' sizes, "1 KiB, 4 KiB" (never none: where none fits, the takeaway says so in its own message)."""
    return ", ".join(_size(r["bytes"]) for r in rows) or "no size"


def _luck_items(luck: list[dict], margin: float) -> str:
    """Where the prediction holds by two misses cancelling: each size's ring/parts and step/line, each its own
    message, the list grown on its right."""
    said = ""
    for r in reversed(luck):
        f = dict(parts=_times(r['ring_s'] / r['ring_parts_s'], margin), step=_times(r['step_s'] / r['step_model_s'], margin))
        said = (tr("collectives.luck_item_more", "{parts} its measured parts while its measured step is {step} the step "
                   "line, {rest}", rest=said, **f) if said else
                tr("collectives.luck_item", "{parts} its measured parts while its measured step is {step} the step line",
                   **f))
    return said


def _table(rows: list[dict], has_step: bool, parts: bool, margin: float) -> list[str]:
    """Each size's times; the header's column names stay English (Korean ones, two columns wide, would misalign)."""
    head = f"{'size':>7}  {'all_reduce':>10}  {'ring':>8}  {'one step':>8}  {'predicted':>9}  ring/predicted"
    if parts:
        head += f"  {'step line':>9}  {'from parts':>10}  ring/parts"
    table = [head] + [f"{_size(r['bytes']):>7}  {r.get('library_s', float('nan')) * 1e3:7.2f} ms  "
                      f"{r['ring_s'] * 1e3:5.2f} ms  "
                      f"{(r['step_s'] * 1e3 if has_step else float('nan')):5.2f} ms  "
                      f"{r['ring_model_s'] * 1e3:6.2f} ms  "
                      f"{_times(r['ring_s'] / r['ring_model_s'], margin):<6}"
                      + (f"          {r['step_model_s'] * 1e3:6.2f} ms  {r['ring_parts_s'] * 1e3:7.2f} ms  "
                         f"{_times(r['ring_s'] / r['ring_parts_s'], margin)}" if parts else "") for r in rows]
    if parts:
        table.append(tr("collectives.table_predicted", "  predicted: from the line fitted to the step, plus γ (the "
                        "additions' best seconds per byte at the large sizes); from parts: 2(n − 1) × this size's "
                        "measured step + (n − 1) × its measured addition, no line"))
        table.append(tr("collectives.table_per_parts", "  per whole all-reduce: all_reduce, ring, predicted, from "
                        "parts; per ring step: one step, step line"))
    else:
        table.append(tr("collectives.table_per", "  per whole all-reduce: all_reduce, ring, predicted; per ring step: "
                        "one step"))
    return table


def _explained(r: dict, steps: int, margin: float) -> list[str]:
    """The measured parts' share of the ring's excess over the prediction at one size, split: steps, additions."""
    excess = r["ring_s"] - r["ring_model_s"]
    by_steps = steps * (r["step_s"] - r["step_model_s"]) / excess
    by_adds = (r["ring_parts_s"] - r["ring_model_s"]) / excess - by_steps
    pct_steps, pct_adds = round(100 * by_steps), round(100 * by_adds)
    said = [tr("collectives.near_parts", "  At {size} it is within {margin} of its measured parts ({ratio}).",
               size=_size(r['bytes']), margin=f"{margin:.0%}", ratio=_times(r['ring_s'] / r['ring_parts_s'], margin)),
            tr("collectives.step_vs_line", "  Its measured step there is {ratio} the step line ({step} vs {line} ms).",
               ratio=_times(r['step_s'] / r['step_model_s'], margin), step=f"{r['step_s'] * 1e3:.2f}",
               line=f"{r['step_model_s'] * 1e3:.2f}")]
    if pct_steps + pct_adds < 100:
        return said + [tr("collectives.gap_split_rest", "  Over {steps} steps that gap is {pct_steps}% of the ring's "
                          "excess over the prediction; the additions' gap to γ is {pct_adds}%; the other {pct_rest}% "
                          "is not identified.", steps=steps, pct_steps=pct_steps, pct_adds=pct_adds,
                          pct_rest=100 - pct_steps - pct_adds)]
    return said + [tr("collectives.gap_split", "  Over {steps} steps that gap is {pct_steps}% of the ring's excess "
                      "over the prediction; the additions' gap to γ is {pct_adds}%.", steps=steps, pct_steps=pct_steps,
                      pct_adds=pct_adds)]


def _fixed_cost(rows: list[dict], above: list[dict], rest: list[dict], parts: bool) -> list[str]:
    """At most how much a fixed cost per ring call can be, where the ring is slower than predicted (and no size
    frees it from its parts)."""
    if parts:
        extra = {r["bytes"]: r["ring_s"] - r["ring_parts_s"] for r in rows}
        low = min(rows, key=lambda r: extra[r["bytes"]])
        bound = extra[low["bytes"]]
        what = tr("collectives.bound_by_parts", "its smallest excess over its measured parts, at {size}",
                  size=_size(low['bytes']))
        above = rest
    else:
        extra = {r["bytes"]: r["ring_s"] - r["ring_model_s"] for r in above}
        low = min(rows, key=lambda r: r["ring_s"])
        bound, what = low["ring_s"], tr("collectives.bound_by_fastest", "its fastest call, at {size}",
                                        size=_size(low['bytes']))
    big = [r for r in (rows if parts else above) if extra[r["bytes"]] > bound]
    if not above:
        return []
    if big:
        return [tr("collectives.fixed_cost_big", "  a fixed cost that every ring call adds is at most {bound} ms here "
                   "({what}); the larger excess at {sizes} is at least partly a cost at that size, or load lasting "
                   "through that size's repeats; this run does not separate them", bound=f"{bound * 1e3:.2f}",
                   what=what, sizes=_names(big))]
    return [tr("collectives.fixed_cost", "  a fixed cost that every ring call adds is at most {bound} ms here ({what})",
               bound=f"{bound * 1e3:.2f}", what=what)]


def ring_prediction_lines(sweep: dict, margin: float = 0.15) -> list[str]:
    """Each size's times (all_reduce, ring, one ring step) and the ring against its predictions, led by one
    takeaway (08).

    The prediction (``ring_model_s``) comes from the line fitted to the step timed alone and γ, the
    additions' best seconds per byte at the large sizes. Where the rows hold ``ring_parts_s`` (the same recipe from
    each size's *measured* step and addition, no line) and ``step_model_s`` (the step line at that size), the
    takeaway also says, where the ring is within ``margin`` of its measured parts, how much of its excess over the
    prediction they explain, split into the steps (with how far the step line is from the measured step) and the
    additions; and a fixed cost per call that the ring adds to its parts is bounded: at most its smallest
    excess over them, said only where the ring exceeds its parts at every size (where it does not, the parts
    are no lower bound and no bound is said); without the parts: at most the ring's fastest call.
    """
    rows = sorted(sweep["sizes"], key=lambda r: r["bytes"])
    has_step = all("step_s" in r for r in rows)
    parts = has_step and all("ring_parts_s" in r and "step_model_s" in r for r in rows)
    table = _table(rows, has_step, parts, margin)
    pct = f"{margin:.0%}"
    fits = [r for r in rows if abs(r["ring_s"] / r["ring_model_s"] - 1) <= margin]
    above = [r for r in rows if r["ring_s"] > (1 + margin) * r["ring_model_s"]]
    below = [r for r in rows if r["ring_s"] < (1 - margin) * r["ring_model_s"]]
    ratio = lambda rs, key: (f"{_times(min(r['ring_s'] / r[key] for r in rs), margin)}–"  # noqa: E731
                             f"{_times(max(r['ring_s'] / r[key] for r in rs), margin)}")
    rest = [r for r in above if parts and r["ring_s"] > (1 + margin) * r["ring_parts_s"]]
    near = [r for r in above if parts and r not in rest and r["ring_s"] >= (1 - margin) * r["ring_parts_s"]]
    steps = 2 * (sweep.get("world_size", 2) - 1)   # parts − prediction: the steps' miss of their line + additions' of γ
    said = [tr("collectives.ring_fits", "  The ring is within {margin} of its prediction at {sizes}.", margin=pct,
               sizes=_names(fits)) if fits else
            tr("collectives.ring_fits_none", "  The ring is within {margin} of its prediction at no size.", margin=pct)]
    luck = [r for r in fits if parts and abs(r["ring_s"] / r["ring_parts_s"] - 1) > margin]
    if luck:   # the prediction met by two misses that cancel, not by the model holding
        said.append(tr("collectives.ring_luck", "  At {sizes} that is two misses cancelling, not the model holding: "
                       "there the ring takes {items}.", sizes=_names(luck),
                       items=_luck_items(luck, margin)))
    if above:
        said.append(tr("collectives.ring_slower", "  It is slower at {sizes} ({ratios}).", sizes=_names(above),
                       ratios=ratio(above, 'ring_model_s')))
    if rest and rest == above and len(rest) > 2:   # the list just named again: "each of them"
        said.append(tr("collectives.rest_each", "  At each of them it also takes more than its own parts timed alone "
                       "add up to ({ratios}): a cost this run does not identify.", ratios=ratio(rest, 'ring_parts_s')))
    elif rest:
        said.append(tr("collectives.rest_at", "  At {sizes} it also takes more than its own parts timed alone add up "
                       "to ({ratios}): a cost this run does not identify.", sizes=_names(rest),
                       ratios=ratio(rest, 'ring_parts_s')))
    said += [x for r in near for x in _explained(r, steps, margin)]
    if parts and above and not near:
        said.append(tr("collectives.none_qualified", "  No size qualified for splitting the excess between steps and "
                       "additions: none slower than predicted is within ±{margin} of its measured parts.", margin=pct))
    if below:
        said.append(tr("collectives.ring_faster", "  It is faster at {sizes}.", sizes=_names(below)))
    lines = [tr("collectives.in_short", "in short:")] + said + table
    if parts:
        miss = [r for r in rows if abs(r["step_s"] / r["step_model_s"] - 1) > margin and r not in near]   # near: said
        if miss:
            near_miss = [r for r in near if abs(r["step_s"] / r["step_model_s"] - 1) > margin]   # said above, missed
            items = ratios_at([(_times(r['step_s'] / r['step_model_s'], margin)[1:], r['bytes']) for r in miss])
            lines.append(tr("collectives.step_line_miss_also", "the step line also (besides {near}, said above) misses "
                            "its own measured step by more than {margin} at {sizes}: {items} (measured/line); a "
                            "least-squares line on relative error weighs every size alike, so one odd time pulls it at "
                            "all sizes", near=_names(near_miss), margin=pct, sizes=_names(miss), items=items)
                         if near_miss else
                         tr("collectives.step_line_miss", "the step line misses its own measured step by more than "
                            "{margin} at {sizes}: {items} (measured/line); a least-squares line on relative error "
                            "weighs every size alike, so one odd time pulls it at all sizes", margin=pct,
                            sizes=_names(miss), items=items))
    unbound = []   # sizes the no-bound line names: not named again below
    if above and rest and any(r["ring_s"] <= r["ring_parts_s"] for r in rows):   # rest: only with parts
        lines.append(_no_fixed_cost_bound(rows))
        unbound = [r for r in rows if r["ring_s"] <= r["ring_parts_s"]]
    elif above:
        lines += _fixed_cost(rows, above, rest, parts)
    if below:
        lines.append(tr("collectives.faster_than_predicted", "faster than predicted at {sizes}: there the ring took "
                        "less than the lines fitted to its parts timed alone add up to", sizes=_names(below)))
    if parts:
        under = [r for r in rows if r["ring_s"] < (1 - margin) * r["ring_parts_s"] and r not in unbound]
        if under:
            lines.append(tr("collectives.under_parts", "the ring took less than its measured parts add up to at "
                            "{sizes}: {items} (ring/parts): there its steps and additions cost less, on average, "
                            "inside the ring than timed alone, so the parts timed alone do not say what the ring's "
                            "steps cost at that size", sizes=_names(under),
                            items=ratios_at([(f"{r['ring_s'] / r['ring_parts_s']:.2f}", r['bytes'])
                                             for r in under])))
        alone = [r for r in rows if r["step_s"] > r["ring_s"]]
        if alone:   # one message per size would be misread where several are joined: this line stays one English text
            lines.append("  " + "; ".join(f"at {_size(r['bytes'])} one step timed alone ({r['step_s'] * 1e3:.2f} ms) "
                                          f"took longer than the whole ring ({r['ring_s'] * 1e3:.2f} ms), which makes "
                                          f"{steps} such steps" for r in alone))
    for key in ("alpha_s", "step_alpha_s"):
        if sweep.get(key, 0.0) < 0:
            alpha = f"{sweep[key] * 1e6:.0f}"
            lines.append(tr("collectives.alpha_negative", "the whole all_reduce's fitted α is negative ({alpha} µs): "
                            "no latency is negative, so no line with α ≥ 0 fits those times; the α–β model does not "
                            "describe them", alpha=alpha) if key == "alpha_s" else
                         tr("collectives.step_alpha_negative", "one step's fitted α is negative ({alpha} µs): no "
                            "latency is negative, so no line with α ≥ 0 fits those times; the α–β model does not "
                            "describe them", alpha=alpha))
    return lines + falling_time_lines(sweep, margin)
