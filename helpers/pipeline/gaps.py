"""Notebook 01's gap between each step and the bound's step, beside measured estimates of its parts, in ms (01)."""
from __future__ import annotations

import statistics

from .bounds import _compute, _slowdown, bound_step, compute_ms, compute_s
from .gap_notes import _estimates_line, _residual_line
from .instruments import ideal_speedup
from ..core.i18n import tr

__all__ = ["gap_lines"]


def gap_lines(rows: list[dict]) -> str:
    """Per m: the gap between the measured step and the bound's step, and three measured estimates, in ms, signed (01).

    Bound step = ``bound_step``: the m = 1 step's compute (the two stages' summed forwards and
    backwards), pipelined with the two stages' measured costs; printed beside the equal-cost ideal,
    that compute ÷ 2m/(m + 1). The bound pipelines the compute only: the m = 1 step's time outside
    it (zero_grad, the SGD update, its two messages, waiting) is not in it. Pieces inside the step:
    the bound's formula applied to each stage's forwards and backwards as they took inside this step
    (``bound_step`` of this row), less the bound's step, negative where the pieces were cheaper: a stage's pieces
    count only as far as they set their phase's pace (with all four ratios equal to k, bound × (k − 1);
    ``_slowdown``'s k, all four together, is printed beside the four ratios). Messages, each at its
    size's fastest round timed alone (``message_lines`` says why not the median): two of them lie on
    every step's path whatever m is, one activation and one gradient (the last activation where stage
    0's forwards are the slower, else the first; the last gradient where stage 1's backwards are the
    slower, else the first); ``isend`` lets the sender compute on, so the other
    2m − 2 may pass while a stage computes, and all 2m one after another is the most they add if
    each costs inside the step what it cost alone. The step's own parts outside the compute: m = 1's
    time outside its compute as printed (its step's ms less its compute's ms), less its two messages at their fastest
    where they were timed, rounded to 0.1 ms as printed elsewhere, so the printed figures add up. These
    are estimates, not shares of the gap: printed in ms beside the gap and the gap less them, never as
    percentages of it; a last line (``_residual_line``) says where they overshoot or fall short of it.
    Printed differences are taken from the printed (rounded) values.
    """
    base = rows[0]
    c1 = compute_s(base)
    step1, c1_ms = round(1e3 * base["step_s"], 1), compute_ms(base)
    # round by round, the step less that round's compute (at m = 1 the stages never compute at once), then the median:
    # not the median step less the parts' medians, taken over the rounds apart (01's read 20: 56 ms against ~10)
    per_round = [1e3 * (t - c) for t, c in zip(base["step_rounds"], _compute(base))]
    other_ms = round(statistics.median(per_round), 1)
    msg1 = 2 * min(base["message_s"]) if "message_s" in base else None
    msg1_ms = round(1e3 * msg1, 1) if msg1 is not None else 0.0
    raw_ms = round(other_ms - msg1_ms, 1)   # of the printed figures: other_ms is printed below
    outside_ms = max(0.0, raw_ms)   # below zero it is no duration: the messages cost less inside the step than alone
    head = dict(n=len(base["step_rounds"]), c1=c1_ms, step=step1, lo=min(per_round), hi=max(per_round), med=other_ms)
    lines = [tr("01.gap_head_msg", "inside the step, from the recorded events (median of {n} rounds); m = 1: the "
                "stages computed {c1:.1f} ms of its {step:.1f} ms step (medians of their rounds); the bound pipelines "
                "that compute only; round by round the step less its compute took {lo:.1f} to {hi:.1f} ms, median "
                "{med:.1f} ms (zero_grad, the SGD update, its two messages, waiting), not in the bound (its two "
                "messages alone took {msg:.1f} ms at their fastest, more than those {med:.1f} ms: a message inside "
                "the step need not cost what it cost alone)", msg=round(1e3 * msg1, 1), **head)
             if msg1 is not None and round(1e3 * msg1, 1) > other_ms else
             tr("01.gap_head", "inside the step, from the recorded events (median of {n} rounds); m = 1: the stages "
                "computed {c1:.1f} ms of its {step:.1f} ms step (medians of their rounds); the bound pipelines that "
                "compute only; round by round the step less its compute took {lo:.1f} to {hi:.1f} ms, median "
                "{med:.1f} ms (zero_grad, the SGD update, its two messages, waiting), not in the bound", **head)]
    residuals = []   # (m, gap less the estimates at most, at least, the same less the outside term)
    for r in rows[1:]:
        m = r["microbatches"]
        equal_step, ideal_step = c1 / ideal_speedup(m), bound_step(base, m)
        # to 0.1 ms, and every difference below is of these printed figures (whole ms made a 4.8 ms imbalance "+4")
        step_ms, equal_ms, ideal_ms = (round(1e3 * t, 1) for t in (r["step_s"], equal_step, ideal_step))
        gap_ms = round(step_ms - ideal_ms, 1)
        gap = r["step_s"] - ideal_step
        ratio = {f"{kind.lower()}{st}": statistics.median(_compute(r, st, kind)) / statistics.median(
            _compute(base, st, kind)) for st in (0, 1) for kind in "FB"}
        lines += [tr("01.gap_m", "m = {m:>2}: step {step:.1f} ms; bound's step {equal:.1f} ms with equal stages, "
                     "{ideal:.1f} ms with these stages' costs (their imbalance: {imb:+.1f} ms); gap to the latter "
                     "{gap:+.1f} ms", m=m, step=step_ms, equal=equal_ms, ideal=ideal_ms, imb=ideal_ms - equal_ms,
                     gap=gap_ms),
                  tr("01.gap_pieces", "        pieces' summed time against m = 1's: stage 0: F ×{f0:.2f}, B ×{b0:.2f}; "
                     "stage 1: F ×{f1:.2f}, B ×{b1:.2f}; all four together ×{k:.2f}", k=_slowdown(r, base), **ratio)]
        if gap <= 0:
            lines.append(tr("01.gap_none", "        at or below the bound with these stages' costs: no gap to explain"))
            continue
        pieces = bound_step(r, m) - ideal_step   # the bound's formula on this step's own pieces, stage by stage; signed
        p_ms, o_ms = round(1e3 * pieces, 1), round(outside_ms, 1)   # sums below are of the printed values
        lines.append(_estimates_line(p_ms, o_ms, other_ms, msg1_ms, raw_ms, msg1 is not None))
        if "message_s" in r:   # each size's fastest round (message_lines)
            one = min(r["message_s"])
            two, all_ = round(2e3 * one, 1), round(2e3 * m * one, 1)
            f_ = [statistics.median(_compute(r, st, "F")) for st in (0, 1)]
            b_ = [statistics.median(_compute(r, st, "B")) for st in (0, 1)]
            first, last = tr("01.gap_first", "first"), tr("01.gap_last", "last")
            lines.append(tr("01.gap_msgs", "        messages at their fastest alone: {two:+.1f} for the 2 on every "
                            "step's path (one activation, one gradient; with these pieces the {act} activation and "
                            "the {grad} gradient, as the slower stage of each phase makes the other wait), {all:+.1f} "
                            "if all 2m = {n} went one after another (isend lets the sender compute on, so the others "
                            "may pass while a stage computes)", two=two, all=all_, n=2 * m,
                            act=last if f_[0] > f_[1] else first, grad=last if b_[1] > b_[0] else first))
        else:
            two = all_ = 0.0
            lines.append(tr("01.gap_no_msgs", "        messages: not timed in this run"))
        lo, hi = (round(gap_ms - p_ms - o_ms - x, 1) for x in (all_, two))
        rlo, rhi = r["step_range"]
        residuals.append((m, lo, hi, o_ms, round(1e3 * (rhi - rlo), 1)))
        sums = dict(a=p_ms + o_ms + two, b=p_ms + o_ms + all_, gap=gap_ms, lo=lo, hi=hi)
        lines.append(tr("01.gap_sum_one", "        together {a:+.1f} ms, against the gap's {gap:+.1f} ms; the gap less "
                        "them: {lo:+.1f} ms", **sums) if "message_s" not in r else
                     tr("01.gap_sum", "        together {a:+.1f} to {b:+.1f} ms, against the gap's {gap:+.1f} ms; the "
                        "gap less them: {lo:+.1f} ms", **sums) if hi == lo else
                     tr("01.gap_sum_range", "        together {a:+.1f} to {b:+.1f} ms, against the gap's {gap:+.1f} "
                        "ms; the gap less them: {lo:+.1f} to {hi:+.1f} ms", **sums))
    return "\n".join(lines + ([_residual_line(residuals)] if residuals else []))

