"""Notebook 01's measurements as the lines it prints, each verdict drawn from the numbers and their spread (01)."""
from __future__ import annotations

import statistics

from .bounds import _compute, _slowdown, against_bound, compute_ms, compute_s, stage_bound
from .instruments import bubble_fraction
from .rounds import against_naive, rounds_side

__all__ = ["gpipe_table", "library_table", "piece_cost_lines", "message_lines", "piece_model_lines", "library_lines", "best_split_line"]


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
    lines.append("key: speedup = the m = 1 median step ÷ this m's; ideal (equal stages) = 2m/(m + 1); efficiency = "
                 "speedup ÷ ideal" + ("; bound (these stages) = the best speedup of m = 1's compute with the two stages' "
                                      f"measured costs (a ratio of compute times, the speedup one of whole steps); against it = the bound's step (compute alone: m = 1's compute, "
                                      f"{compute_ms(rows[0]):.1f} ms of its {1e3 * rows[0]['step_s']:.1f} ms step, ÷ bound) ÷ "
                                      "the measured step; at m = 1 the compute's median over the step's median, each over the "
                                      "rounds (m = 1's compute: each round's four parts summed, then the median)" if staged else "")
                 + "; bubble (model) = (p − 1)/(m + p − 1), each stage's idle share in GPipe's model")
    over = [r["microbatches"] for r in rows[1:] if round(r["efficiency"], 2) > 1]
    if over:
        line = (f"efficiency above 1.00 at m = {', '.join(map(str, over))} by the medians (an m above the tighter bound "
                "with these stages' costs, if any, is judged by its rounds in section 3's last line); measured beside it, "
                "not offered as its cause")
        if staged:
            base = rows[0]
            line += (f": m = 1's median step exceeds its compute's median by "
                     f"{round(1e3 * base['step_s'], 1) - compute_ms(base):.1f} ms (a difference of medians, not one round's time: "
                     "section 4 takes it round by round)")
            if "message_s" in base:
                out_ms = round(round(1e3 * base["step_s"], 1) - compute_ms(base), 1)
                msg_ms = round(2e3 * min(base["message_s"]), 1)
                line += (f" (m = 1's two {base['message_bytes'] // 1024} KiB messages go one after the other, "
                         f"{msg_ms:.1f} ms at their fastest alone"
                         + (f", more than those {out_ms:.1f} ms: the step and its compute are medians of "
                            f"{len(base['step_rounds'])} rounds, taken apart, and a message inside the step need not "
                            "cost what it cost alone)" if msg_ms > out_ms else ")"))
            line += "; inside the step the pieces took " + ", ".join(
                f"×{_slowdown(r, base):.2f} m = 1's compute time at m = {r['microbatches']}"
                for r in rows[1:] if r["microbatches"] in over) + " (section 4 prints each part)"
        else:
            line += ": section 4 measures the pieces' cost"
        lines.append(line)
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
    alone = f"stage {costs[0]['stage']}'s" if "stage" in costs[0] else "one stage's"
    lines = [("bound with these stages' costs" if staged else "ideal speedup") + f" ÷ piece cost (predicted; the piece cost is {alone} "
             "timed alone, not the pieces' time inside the step, which the gap lines use) against "
             + ("m = 1's compute ÷ the measured step (the bound's numerator is m = 1's compute, "
                f"{compute_ms(rows[0]):.1f} of its {1e3 * rows[0]['step_s']:.1f} ms)" if staged else "the measured speedup")
             + "; each range takes m = 1's rounds at their fastest and slowest too:"]
    short, above = [], []
    for r in rows[1:]:
        c = cost.get(r["microbatches"])
        if c is None:
            continue
        ideal = stage_bound(rows[0], r["microbatches"]) if staged else r["ideal_speedup"]
        (clo, chi), (slo, shi) = c.get("ratio_range", c["cost_range"]), r["step_range"]
        plo, phi, mlo, mhi = ideal / chi, ideal / clo, blo / shi, bhi / slo
        verdict = ("short of it" if mhi < plo else "above it" if mlo > phi else "within the spread (the ranges overlap)")
        if mhi < plo:
            short.append(r["microbatches"])
        elif mlo > phi:
            above.append((r["microbatches"], c["cost_vs_m1"], _slowdown(r, rows[0]) if staged else None))
        lines.append(f"m = {r['microbatches']:>2}: predicted {ideal / c['cost_vs_m1']:.2f}× ({plo:.2f}–{phi:.2f}), "
                     f"measured {c1 / r['step_s']:.2f}× ({mlo:.2f}–{mhi:.2f}): {verdict}")
    if short:
        lines.append(f"at m = {', '.join(map(str, short))} the piece costs, timed on one stage alone, explain only "
                     f"part of the gap to the {'bound' if staged else 'ideal'};\nthe lines below take the pieces' times inside the pipelined step "
                     "itself, from its recorded events")
    else:
        # "lower" only where the two printed medians (2 decimals) differ, never below the printed precision
        lower = [r["microbatches"] for r in rows[1:] if r["microbatches"] in cost
                 and round(c1 / r["step_s"], 2) < round((stage_bound(rows[0], r["microbatches"]) if staged else
                                                     r["ideal_speedup"]) / cost[r["microbatches"]]["cost_vs_m1"], 2)]
        lines.append("no measured speedup fell short of the prediction beyond the spread of the rounds"
                     + (f" (by the medians it is lower at m = {', '.join(map(str, lower))})" if lower else "")
                     + f": this run cannot tell whether the piece costs explain all of the gap to the {'bound' if staged else 'ideal'} "
                     "or only part")
    if above:
        lines.append(f"at m = {', '.join(str(m) for m, _, _ in above)} the measured speedup is above the prediction beyond "
                     "the spread of the rounds: the step was shorter than the piece cost timed on one stage alone predicts"
                     + ("; inside the step the pieces took " + ", ".join(f"×{k:.2f} m = 1's time at m = {m}, against ×{c:.2f} alone"
                                                                       for m, c, k in above) if staged else ""))
    return "\n".join(lines)


def library_lines(lib: list[dict], hand: list[dict]) -> str:
    """The library's step times with their rounds, each against the library's GPipe at m = 1, beside the hand-written GPipe (01).

    ``Schedule1F1B`` refuses fewer micro-batches than stages, so 1F1B has no m = 1 of its own: its
    speedups, like GPipe's, are over the library's ``ScheduleGPipe`` step at m = 1. Both
    implementations time the same parts (zero_grad, the schedule's step, the SGD update), in
    separate launches; inside its step the library also splits the batch and divides the
    gradients by m (``scale_grads=True``), where ``gpipe_step`` chunks the batch and divides each loss by m.
    """
    base = next(r for r in lib if r["schedule"] == "gpipe" and r["microbatches"] == 1)
    hand_by_m = {r["microbatches"]: r for r in hand}
    lines = []
    for r in lib:
        lo, hi = r["step_range"]
        line = (f"library {r['schedule']:>5} m = {r['microbatches']}: {1e3 * r['step_s']:.0f} ms (rounds {1e3 * lo:.0f}–"
                f"{1e3 * hi:.0f}), {r['speedup']:.2f}×, {r['efficiency']:.0%} of the ideal")
        if r is not base:
            line += ": " + against_naive(r, base)
        lines.append(line)
    if any(r["schedule"] == "1f1b" for r in lib) and not any(r["schedule"] == "1f1b" and r["microbatches"] == 1 for r in lib):
        lines.append("1F1B has no m = 1 row: Schedule1F1B refuses fewer micro-batches than stages (m ≥ p = 2); its "
                     "speedups are over the library's GPipe at m = 1 (one micro-batch: no pipelining either way)")
    gp = {r["microbatches"]: r for r in lib if r["schedule"] == "gpipe"}
    both = [m for m in sorted(hand_by_m) if m in gp]
    if both:
        lines.append("GPipe, library against hand-written: step ms (rounds) and efficiency, each over its own m = 1;\n"
                     "the same schedule and timed parts (zero_grad, the step, the SGD update), separate launches "
                     "(at m = 1 neither pipelines):")
        for m in both:
            lib_r, hw = gp[m], hand_by_m[m]
            (llo, lhi), (hlo, hhi) = lib_r["step_range"], hw["step_range"]
            v, why = rounds_side(lib_r["step_rounds"], hw["step_rounds"])
            who = "library"
            if v.endswith("slower") or "; slower in" in why:   # said from the faster side, its pairs counted as faster
                who, (v, why) = "hand-written", rounds_side(hw["step_rounds"], lib_r["step_rounds"])
            verdict = (f"no clear difference ({why.replace('; faster in', f'; {who} faster in')})" if v == "unclear"
                       else f"{who} {v} ({why})")
            lines.append(f"  m = {m}: library {1e3 * lib_r['step_s']:.0f} ({1e3 * llo:.0f}–{1e3 * lhi:.0f}) {lib_r['efficiency']:.0%}, "
                         f"hand-written {1e3 * hw['step_s']:.0f} ({1e3 * hlo:.0f}–{1e3 * hhi:.0f}) {hw['efficiency']:.0%}: {verdict}")
        lines.append(_largest_gap_line(gp, hand_by_m, both, lib))
    differ = []
    for r in (r for r in lib if r["schedule"] == "1f1b" and r["microbatches"] in gp):
        g = gp[r["microbatches"]]
        v, why = rounds_side(r["step_rounds"], g["step_rounds"])
        side = f"no clear difference ({why})" if v == "unclear" else f"1F1B {v} ({why})"
        lines.append(f"1F1B against GPipe at m = {r['microbatches']}: {1e3 * r['step_s']:.0f} against {1e3 * g['step_s']:.0f} ms: "
                     f"{side}")
        if v != "unclear":
            differ.append(f"m = {r['microbatches']} ({v})")
    if any(r["schedule"] == "1f1b" and r["microbatches"] in gp for r in lib):
        lines.append(("1F1B differed from GPipe by the rounds at " + ", ".join(differ) + ": this notebook does not "
                      "time what made the difference") if differ else "1F1B against GPipe: no clear difference at any m")
    return "\n".join(lines)


def _largest_gap_line(gp: dict, hand_by_m: dict, both: list[int], lib: list[dict]) -> str:
    """Where the library's GPipe and the hand-written one differed most, by their efficiencies, and what this run says
    of it: the rounds' verdict, the library's 1F1B at that m, and that the library's steps are timed whole (01)."""
    m = max(both, key=lambda k: abs(gp[k]["efficiency"] - hand_by_m[k]["efficiency"]))
    lib_r, hw = gp[m], hand_by_m[m]
    v, why = rounds_side(lib_r["step_rounds"], hw["step_rounds"])
    one = next((r for r in lib if r["schedule"] == "1f1b" and r["microbatches"] == m), None)
    line = (f"largest difference in efficiency: m = {m}, library GPipe {1e3 * lib_r['step_s']:.0f} ms "
            f"({lib_r['efficiency']:.0%}) against hand-written {1e3 * hw['step_s']:.0f} ms ({hw['efficiency']:.0%})"
            + (f"; the library's 1F1B took {1e3 * one['step_s']:.0f} ms at that m" if one else ""))
    line += f"\n  (each efficiency is over its own m = 1; the rounds compare the two m = {m} steps)"
    if v == "unclear":
        b_lib, b_hw = gp[min(both)], hand_by_m[min(both)]
        apart = [k for k in both if not rounds_side(gp[k]["step_rounds"], hand_by_m[k]["step_rounds"])[0]
                 .startswith(("unclear", "mostly"))]
        base_ms = round(1e3 * b_lib["step_s"]), round(1e3 * b_hw["step_s"])
        only = min(both) not in apart   # 01's read 21: baselines apart by their medians only are no difference
        return line + (": the rounds do not set the two steps apart"
                       + (f"; each efficiency divides by its own m = {min(both)} step, and those differ{' by their medians only' * only} "
                          f"(library {base_ms[0]} ms, hand-written {base_ms[1]} ms" + ("; their rounds do not set them apart "
                          "either, printed above): this run does not set the two efficiencies apart" if only else ")")
                          if base_ms[0] != base_ms[1] else "")
                       + (f"; by the rounds the steps themselves differed at m = {', '.join(map(str, apart))} (printed "
                          "above)" if apart else ""))
    if v.startswith("mostly"):
        return line + (f": the library {v} by the pairs of rounds ({why}: a weak call), not set apart; this run, which "
                       "times the library's steps only whole, leaves the cause unexplained")
    return line + (": the rounds set the two steps apart, and this run, which times the library's steps only whole, "
                   "leaves the cause unexplained")


def library_table(rows: list[dict]) -> str:
    """``torch.distributed.pipelining``'s schedules against the unsplit model: the micro-batches each stage
    held at its peak, and the largest differences of loss and gradients (01)."""
    lines = [f"{'schedule':>8} {'m':>2} {'peak held (stage 0, 1)':>23} {'loss diff':>9} {'grad diff':>9}"]
    for r in rows:
        lines.append(f"{r['schedule']:>8} {r['microbatches']:>2} {str(r['peak_live']):>23} {r['loss_diff']:>9.0e} "
                     f"{r['grad_max_abs_diff']:>9.0e}")
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
    where = costs[0].get("where", "on the CPU with one thread")
    lines = [f"stage {costs[0]['stage']} alone, {where}"
             + (f", {len(costs[0]['cost_rounds'])} rounds:" if "cost_rounds" in costs[0] else ":")] if "stage" in costs[0] else []
    for r in costs:
        lo, hi = r["cost_range"]
        d = d_touch if r in touch or (r is costs[0] and touch) else 2
        if r is costs[0]:
            verdict = "the baseline"
        elif lo > hi1 or hi < lo1:
            verdict = "more than in one piece" if lo > hi1 else "less than in one piece"
        else:   # overlapping: the same pairs test as the steps' (rounds_side)
            v, why = rounds_side(r.get("cost_rounds", [lo, hi]), costs[0].get("cost_rounds", [lo1, hi1]))
            why = why.replace("the rounds overlap", "the rounds overlap m = 1's").replace("slower", "more").replace("faster", "less")
            verdict = (f"no clear difference ({why})" if v == "unclear"
                       else f"{v.replace('slower', 'more').replace('faster', 'less')} than in one piece ({why})")
        lines.append(f"m = {r['microbatches']:>2} ({r['microbatch_rows']:>4} rows): ×{r['cost_vs_m1']:.2f} the m = 1 time "
                     f"(rounds ×{lo:.{d}f}–{hi:.{d}f}): {verdict}")
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
    lines = [f"one-way send/recv of one micro-batch's activation (its gradient is the same size), timed alone by "
             f"ping-pong in {len(rows[0]['message_s'])} rounds, outside the step; each size's estimate is its fastest round\n"
             "(in the step, gpipe_step sends with isend, which can return before delivery, so the sender computes on; "
             "the receiver waits in recvs[i].wait()):"]
    for r in rows:
        t = r["message_s"]
        span = max(t) / min(t)
        lines.append(f"m = {r['microbatches']:>2}: {r['message_bytes'] // 1024:>5} KiB fastest {1e3 * min(t):5.2f} ms "
                     f"(median {1e3 * statistics.median(t):.2f}, slowest {1e3 * max(t):.2f}"
                     + (f"; the slowest ×{span:.0f} the fastest, the median ×{statistics.median(t) / min(t):.2f}"
                        if span > spread_limit else "")
                     + f"); 2m = {2 * r['microbatches']:>2} one after another {2e3 * r['microbatches'] * min(t):5.1f} ms; "
                     f"the step {1e3 * r['step_s']:.0f} ms")
    for big, small in zip(rows, rows[1:]):
        if min(small["message_s"]) > min(big["message_s"]):
            overlap = min(small["message_s"]) <= max(big["message_s"])
            lines.append(f"{small['message_bytes'] // 1024} KiB took longer than {big['message_bytes'] // 1024} KiB "
                         "at their fastest rounds here: " + ("within the spread of the rounds (they overlap)" if overlap
                                                              else "outside the spread of the rounds (they do not overlap)"))
    return "\n".join(lines)


def best_split_line(rows: list[dict]) -> str:
    """The fastest m by the median, named the best only if it is faster or mostly faster than every other m (01)."""
    best = min(rows, key=lambda r: r["step_s"])
    side = {r["microbatches"]: rounds_side(best["step_rounds"], r["step_rounds"]) for r in rows if r is not best}
    ties = [r for r in rows if r is not best and side[r["microbatches"]][0] != "faster"]
    if any(side[r["microbatches"]][0] == "unclear" for r in ties):
        return (f"fastest by the median: m = {best['microbatches']} ({1e3 * best['step_s']:.0f} ms); against "
                + ", ".join(f"m = {r['microbatches']}'s ({1e3 * r['step_range'][0]:.0f}–{1e3 * r['step_range'][1]:.0f} ms) "
                            f"{side[r['microbatches']][0]} ({side[r['microbatches']][1]})" for r in ties)
                + ": no clear best")
    return (f"best split here: m = {best['microbatches']} ({best['microbatch_rows']} rows per micro-batch), "
            + ("its rounds below every other m's" if not ties else "faster or mostly faster than every other m: "
               + ", ".join(f"m = {r['microbatches']}: {side[r['microbatches']][0]} ({side[r['microbatches']][1]})" for r in ties)))
