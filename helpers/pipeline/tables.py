"""Notebook 01's measurements as the lines it prints, each verdict drawn from the numbers and their spread (01)."""
from __future__ import annotations

import statistics

from .bounds import _compute, _slowdown, against_bound, compute_ms, compute_s, stage_bound
from .gpipe_notes import _key_line, _over_line
from .compare import _largest_gap_line, library_lines, library_table  # noqa: F401  (here before 01's split)
from .instruments import bubble_fraction
from ..core.i18n import tr
from .rounds import _rounds, rounds_side, rounds_why, verdict_word

__all__ = ["gpipe_table", "piece_cost_lines", "message_lines", "piece_model_lines", "best_split_line"]


def gpipe_table(rows: list[dict]) -> str:
    """The measured-vs-ideal table (01): step median and its rounds' range; ideal and bubble from GPipe's model.

    ``rows[0]`` is m = 1; where it carries the step's events, two more columns: the bound with the two
    stages' measured costs (``stage_bound``) and the measured speedup against it.
    """
    staged = "compute_rounds" in rows[0]
    lines = [f"{'m':>3} {'rows/mb':>7} {'step ms':>7} {'rounds ms':>9} {'speedup':>7} {'ideal (equal stages)':>20} "
             f"{'efficiency':>10}" + (f" {'bound (these stages)':>20} {'against it':>10}" if staged else "")
             + f" {'bubble (model)':>14}"]
    for r in rows:
        lo, hi = r["step_range"]
        line = (f"{r['microbatches']:>3} {r['microbatch_rows']:>7} {1e3 * r['step_s']:>7.0f} {1e3 * lo:>4.0f}–{1e3 * hi:<4.0f} "
                f"{r['speedup']:>6.2f}× {r['ideal_speedup']:>19.2f}× {r['efficiency']:>10.2f}")
        if staged:
            b = stage_bound(rows[0], r["microbatches"])
            line += f" {b:>19.2f}× {against_bound(rows[0], r):>10.2f}"
        lines.append(line + f" {bubble_fraction(r['microbatches']):>14.2f}")
    lines.append(_key_line(rows, staged))
    over = [r["microbatches"] for r in rows[1:] if round(r["efficiency"], 2) > 1]
    if over:
        lines.append(_over_line(rows, over, staged))
    return "\n".join(lines)


def piece_model_lines(rows: list[dict], costs: list[dict]) -> str:
    """GPipe's bound divided by the measured piece cost, against the measured speedup, per m (01).

    The bound: ``stage_bound`` where ``rows[0]`` carries the step's events, else the equal-cost ideal.
    If a piece costs c times its 1/m share, the pipelined step is c times longer than GPipe's model
    says, so the model predicts bound / c. Each range comes from the rounds (the costs' and the
    steps'); "short of" or "above" only where the two ranges do not overlap.
    """
    cost = {c["microbatches"]: c for c in costs}
    staged = "compute_rounds" in rows[0]   # then the bound with the two stages' measured costs, not the equal-cost ideal
    if staged:   # compute against compute: m = 1's compute (its rounds' sums) ÷ the step, as the bound's numerator
        c1 = compute_s(rows[0])
        blo, bhi = min(_compute(rows[0])), max(_compute(rows[0]))
    else:
        c1, (blo, bhi) = rows[0]["step_s"], rows[0]["step_range"]
    alone = (tr("01.stage_s", "stage {stage}'s", stage=costs[0]["stage"]) if "stage" in costs[0] else
             tr("01.one_stage", "one stage's"))
    lines = [tr("01.model_head_staged", "bound with these stages' costs ÷ piece cost (predicted; the piece cost is "
                                        "{alone} "
                "timed alone, not the pieces' time inside the step, which the gap lines use) against m = 1's compute "
                "÷ the "
                "measured step (the bound's numerator is m = 1's compute, {c1:.1f} of its {step:.1f} ms); each range "
                "takes "
                "m = 1's rounds at their fastest and slowest too:", alone=alone, c1=compute_ms(rows[0]),
                step=1e3 * rows[0]["step_s"]) if staged else
             tr("01.model_head", "ideal speedup ÷ piece cost (predicted; the piece cost is {alone} timed alone, not "
                                 "the "
                "pieces' time inside the step, which the gap lines use) against the measured speedup; each range takes "
                "m = 1's rounds at their fastest and slowest too:", alone=alone)]
    what = tr("01.word_bound", "bound") if staged else tr("01.word_ideal", "ideal")
    short, above = [], []
    for r in rows[1:]:
        c = cost.get(r["microbatches"])
        if c is None:
            continue
        ideal = stage_bound(rows[0], r["microbatches"]) if staged else r["ideal_speedup"]
        (clo, chi), (slo, shi) = c.get("ratio_range", c["cost_range"]), r["step_range"]
        plo, phi, mlo, mhi = ideal / chi, ideal / clo, blo / shi, bhi / slo
        verdict = (tr("01.model_short", "short of it") if mhi < plo else tr("01.model_above", "above it") if mlo > phi
                   else tr("01.model_within", "within the spread (the ranges overlap)"))
        if mhi < plo:
            short.append(r["microbatches"])
        elif mlo > phi:
            above.append((r["microbatches"], c["cost_vs_m1"], _slowdown(r, rows[0]) if staged else None))
        lines.append(tr("01.model_line", "m = {m:>2}: predicted {pred:.2f}× ({plo:.2f}–{phi:.2f}), measured "
                                         "{meas:.2f}× "
                        "({mlo:.2f}–{mhi:.2f}): {verdict}", m=r["microbatches"], pred=ideal / c["cost_vs_m1"], plo=plo,
                        phi=phi, meas=c1 / r["step_s"], mlo=mlo, mhi=mhi, verdict=verdict))
    if short:
        lines += [tr("01.model_short_line", "at m = {ms} the piece costs, timed on one stage alone, explain only "
                                            "part of "
                     "the gap to the {what};", ms=", ".join(map(str, short)), what=what),
                  tr("01.model_short_next", "the lines below take the pieces' times inside the pipelined step itself, "
                     "from its recorded events")]
    else:
        # "lower" only where the two printed medians (2 decimals) differ, never below the printed precision
        lower = [r["microbatches"] for r in rows[1:] if r["microbatches"] in cost
                 and round(c1 / r["step_s"], 2) < round((stage_bound(rows[0], r["microbatches"]) if staged else
                                                     r["ideal_speedup"]) / cost[r["microbatches"]]["cost_vs_m1"], 2)]
        lines.append(tr("01.model_none_lower", "no measured speedup fell short of the prediction beyond the spread "
                                               "of the "
                        "rounds (by the medians it is lower at m = {ms}): this run cannot tell whether the piece costs "
                        "explain all of the gap to the {what} or only part", ms=", ".join(map(str, lower)), what=what)
                     if lower else
                     tr("01.model_none", "no measured speedup fell short of the prediction beyond the spread of the "
                                         "rounds: "
                        "this run cannot tell whether the piece costs explain all of the gap to the {what} or only "
                        "part",
                        what=what))
    if above:
        said = ""
        for m, c, k in (above if staged else []):
            said = (tr("01.model_took_more", "{before}, ×{k:.2f} m = 1's time at m = {m}, against ×{c:.2f} alone",
                       before=said, k=k, m=m, c=c) if said else
                    tr("01.model_took", "×{k:.2f} m = 1's time at m = {m}, against ×{c:.2f} alone", k=k, m=m, c=c))
        ms = ", ".join(str(m) for m, _, _ in above)
        lines.append(tr("01.model_above_took", "at m = {ms} the measured speedup is above the prediction beyond the "
                                               "spread "
                        "of the rounds: the step was shorter than the piece cost timed on one stage alone predicts; "
                        "inside "
                        "the step the pieces took {took}", ms=ms, took=said) if staged else
                     tr("01.model_above_line", "at m = {ms} the measured speedup is above the prediction beyond the "
                                               "spread "
                        "of the rounds: the step was shorter than the piece cost timed on one stage alone "
                        "predicts", ms=ms))
    return "\n".join(lines)


def piece_cost_lines(costs: list[dict]) -> str:
    """Each m's stage time against m = 1's, with its rounds' range and a verdict that respects it (01).

    "more"/"less" where the two ranges do not overlap; where they overlap, "mostly more"/"mostly less" by the pairs
    of rounds (``cost_rounds``) as ``rounds_side`` judges steps, else "no clear difference". Where a range that does not overlap m = 1's touches it at
    two decimals (×1.05 beside m = 1's ×1.05), both are printed with three (or more), so the printed ranges
    show the gap the verdict rests on.
    """
    lo1, hi1 = costs[0]["cost_range"]

    def touches(r: dict, d: int) -> bool:
        lo, hi = r["cost_range"]
        return (lo > hi1 and round(lo, d) <= round(hi1, d)) or (hi < lo1 and round(hi, d) >= round(lo1, d))

    touch = [r for r in costs[1:] if touches(r, 2)]
    d_touch = next((d for d in range(3, 7) if not any(touches(r, d) for r in touch)), 6)
    where = costs[0]["where"] if "where" in costs[0] else tr("01.where_cpu", "on the CPU with one thread")
    lines = [(tr("01.cost_head_rounds", "stage {stage} alone, {where}, {n} "
                                        "rounds:", stage=costs[0]["stage"], where=where,
                 n=len(costs[0]["cost_rounds"])) if "cost_rounds" in costs[0] else
              tr("01.cost_head", "stage {stage} alone, {where}:", stage=costs[0]["stage"], where=where))] \
        if "stage" in costs[0] else []
    for r in costs:
        lo, hi = r["cost_range"]
        d = d_touch if r in touch or (r is costs[0] and touch) else 2
        if r is costs[0]:
            verdict = tr("01.cost_baseline", "the baseline")
        elif lo > hi1 or hi < lo1:
            verdict = (tr("01.cost_more", "more than in one piece") if lo > hi1 else
                       tr("01.cost_less", "less than in one piece"))
        else:   # overlapping: the same pairs test as the steps' (rounds_side), said of costs (more/less)
            v, info = _rounds(r.get("cost_rounds", [lo, hi]), costs[0].get("cost_rounds", [lo1, hi1]))
            why = rounds_why(info, cost=True)
            verdict = (tr("01.no_clear", "no clear difference ({why})", why=why) if v == "unclear" else
                       tr("01.cost_side", "{side} than in one piece ({why})", why=why,
                          side=verdict_word(v.replace("slower", "more").replace("faster", "less"))))
        lines.append(tr("01.cost_line", "m = {m:>2} ({rows:>4} rows): ×{cost:.2f} the m = 1 time (rounds ×{lo}–{hi}): "
                        "{verdict}", m=r["microbatches"], rows=r["microbatch_rows"], cost=r["cost_vs_m1"],
                        lo=f"{lo:.{d}f}", hi=f"{hi:.{d}f}", verdict=verdict))
    return "\n".join(lines)


def message_lines(rows: list[dict], spread_limit: float = 10.0) -> str:
    """Per m: one message's size and one-way time, and 2m of them a step, each at the size's fastest round (01).

    The estimate is the fastest round, not the median: a ping-pong timed alone is the same message
    every round, and a slower round is the machine's other work added to it (the note under Python's
    ``timeit.Timer.repeat``: "the min() of the result is probably the only number you should be
    interested in"). The median and the slowest round are printed beside it, and where the rounds
    span more than ``spread_limit`` times, both as multiples of the fastest. Then every place where a smaller message's
    estimate is above a larger one's, with whether the rounds of the two overlap.
    """
    lines = [tr("01.msg_head", "one-way send/recv of one micro-batch's activation (its gradient is the same size), "
                               "timed "
                "alone by ping-pong in {n} rounds, outside the step; each size's estimate is its fastest round",
                n=len(rows[0]["message_s"])),
             tr("01.msg_head_isend", "(in the step, gpipe_step sends with isend, which can return before delivery, "
                                     "so the "
                "sender computes on; the receiver waits in recvs[i].wait()):")]
    for r in rows:
        t = r["message_s"]
        span = max(t) / min(t)
        said = dict(m=r["microbatches"], kib=r["message_bytes"] // 1024, fast=1e3 * min(t),
                    med=1e3 * statistics.median(t),
                    slow=1e3 * max(t), two_m=2 * r["microbatches"], all_ms=2e3 * r["microbatches"] * min(t),
                    step=1e3 * r["step_s"])
        if span > spread_limit:
            lines.append(tr("01.msg_line_spread", "m = {m:>2}: {kib:>5} KiB fastest {fast:5.2f} ms (median "
                                                  "{med:.2f}, slowest "
                            "{slow:.2f}; the slowest ×{span:.0f} the fastest, the median ×{times:.2f}); 2m = "
                            "{two_m:>2} one "
                            "after another {all_ms:5.1f} ms; the step {step:.0f} ms", span=span,
                            times=statistics.median(t) / min(t), **said))
        else:
            lines.append(tr("01.msg_line", "m = {m:>2}: {kib:>5} KiB fastest {fast:5.2f} ms (median {med:.2f}, slowest "
                            "{slow:.2f}); 2m = {two_m:>2} one after another {all_ms:5.1f} ms; the step {step:.0f} "
                            "ms", **said))
    for big, small in zip(rows, rows[1:]):
        if min(small["message_s"]) > min(big["message_s"]):
            overlap = min(small["message_s"]) <= max(big["message_s"])
            lines.append(tr("01.msg_longer", "{small} KiB took longer than {big} KiB at their fastest rounds here: "
                                             "{where}",
                            small=small["message_bytes"] // 1024, big=big["message_bytes"] // 1024,
                            where=tr("01.msg_within", "within the spread of the rounds (they overlap)") if overlap else
                            tr("01.msg_outside", "outside the spread of the rounds (they do not overlap)")))
    return "\n".join(lines)


def best_split_line(rows: list[dict]) -> str:
    """The fastest m by the median, named the best only if it is faster or mostly faster than every other m (01)."""
    best = min(rows, key=lambda r: r["step_s"])
    side = {r["microbatches"]: rounds_side(best["step_rounds"], r["step_rounds"]) for r in rows if r is not best}
    ties = [r for r in rows if r is not best and side[r["microbatches"]][0] != "faster"]
    if any(side[r["microbatches"]][0] == "unclear" for r in ties):
        said = ""
        for r in ties:   # each item a message of its own, the ones before it a field: said again item by item
            item = dict(m=r["microbatches"], lo=f"{1e3 * r['step_range'][0]:.0f}", hi=f"{1e3 * r['step_range'][1]:.0f}",
                        verdict=verdict_word(side[r["microbatches"]][0]), why=side[r["microbatches"]][1])
            said = (tr("01.best_vs_more", "{before}, m = {m}'s ({lo}–{hi} ms) {verdict} ({why})", before=said, **item)
                    if said else tr("01.best_vs", "m = {m}'s ({lo}–{hi} ms) {verdict} ({why})", **item))
        return tr("01.best_unclear", "fastest by the median: m = {m} ({ms:.0f} ms); against {others}: no clear best",
                  m=best["microbatches"], ms=1e3 * best["step_s"], others=said)
    head = dict(m=best["microbatches"], rows=best["microbatch_rows"])
    if not ties:
        return tr("01.best_below", "best split here: m = {m} ({rows} rows per micro-batch), its rounds below every "
                                   "other "
                  "m's", **head)
    said = ""
    for r in ties:
        v, why = side[r["microbatches"]]
        item = dict(m=r["microbatches"], verdict=verdict_word(v), why=why)
        said = (tr("01.best_side_more", "{before}, m = {m}: {verdict} ({why})", before=said, **item) if said else
                tr("01.best_side", "m = {m}: {verdict} ({why})", **item))
    return tr("01.best_mostly", "best split here: m = {m} ({rows} rows per micro-batch), faster or mostly faster than "
              "every other m: {others}", others=said, **head)
