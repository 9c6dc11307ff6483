"""Notebook 01's gap between each step and the bound's step, beside measured estimates of its parts, in ms (01)."""
from __future__ import annotations

import statistics

from .bounds import _compute, _slowdown, bound_step, compute_ms, compute_s
from .instruments import ideal_speedup

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
    lines = [f"inside the step, from the recorded events (median of {len(base['step_rounds'])} rounds); "
             f"m = 1: the stages computed {c1_ms:.1f} ms of its {step1:.1f} ms step (medians of their rounds); the "
             f"bound pipelines that compute only; round by round the step less its compute took {min(per_round):.1f} to "
             f"{max(per_round):.1f} ms, median {other_ms:.1f} ms (zero_grad, the SGD update, its two messages, waiting), "
             "not in the bound"
             + (f" (its two messages alone took {round(1e3 * msg1, 1):.1f} ms at their fastest, more than those "
                f"{other_ms:.1f} ms: a message inside the step need not cost what it cost alone)"
                if msg1 is not None and round(1e3 * msg1, 1) > other_ms else "")]
    residuals = []   # (m, gap less the estimates at most, at least, the same less the outside term)
    for r in rows[1:]:
        m = r["microbatches"]
        equal_step, ideal_step = c1 / ideal_speedup(m), bound_step(base, m)
        # to 0.1 ms, and every difference below is of these printed figures (whole ms made a 4.8 ms imbalance "+4")
        step_ms, equal_ms, ideal_ms = (round(1e3 * t, 1) for t in (r["step_s"], equal_step, ideal_step))
        gap_ms = round(step_ms - ideal_ms, 1)
        gap = r["step_s"] - ideal_step
        per = "; ".join(f"stage {s}: F ×{statistics.median(_compute(r, s, 'F')) / statistics.median(_compute(base, s, 'F')):.2f}, "
                        f"B ×{statistics.median(_compute(r, s, 'B')) / statistics.median(_compute(base, s, 'B')):.2f}"
                        for s in (0, 1))
        k = _slowdown(r, base)
        lines.append(f"m = {m:>2}: step {step_ms:.1f} ms; bound's step {equal_ms:.1f} ms with equal stages, "
                     f"{ideal_ms:.1f} ms with these stages' costs (their imbalance: {ideal_ms - equal_ms:+.1f} ms); "
                     f"gap to the latter {gap_ms:+.1f} ms\n        pieces' summed time against m = 1's: {per}; "
                     f"all four together ×{k:.2f}")
        if gap <= 0:
            lines.append("        at or below the bound with these stages' costs: no gap to explain")
            continue
        pieces = bound_step(r, m) - ideal_step   # the bound's formula on this step's own pieces, stage by stage; signed
        outside_of = "(those other ms less its two messages)" if msg1 is not None else "(those other ms, messages included)"
        p_ms, o_ms = round(1e3 * pieces, 1), round(outside_ms, 1)   # sums below are of the printed values
        said = (f"        estimates in ms (not shares of the gap): the pieces, each stage's as they took, through "
                f"the bound's formula: {p_ms:+.1f}; "
                + (f"the step's parts outside its compute, if they took m = 1's {outside_of}: {o_ms:+.1f}\n        "
                   if raw_ms >= 0 else f"the step's parts outside its compute: not estimated, counted +0.0 (m = 1's other "
                   f"{other_ms:.1f} ms" + (f" less its two messages' {msg1_ms:.1f} ms" if msg1 is not None else "")
                   + f" is {raw_ms:+.1f}, below zero: the messages cost less inside the step than alone)\n        "))
        if "message_s" in r:   # each size's fastest round (message_lines)
            one = min(r["message_s"])
            two, all_ = round(2e3 * one, 1), round(2e3 * m * one, 1)
            f_ = [statistics.median(_compute(r, st, "F")) for st in (0, 1)]
            b_ = [statistics.median(_compute(r, st, "B")) for st in (0, 1)]
            act, grad = ("last" if f_[0] > f_[1] else "first"), ("last" if b_[1] > b_[0] else "first")
            said += (f"messages at their fastest alone: {two:+.1f} for the 2 on every step's path (one activation, "
                     f"one gradient; with these pieces the {act} activation and the {grad} gradient, as the slower "
                     f"stage of each phase makes the other wait), {all_:+.1f} if all 2m = {2 * m} went one after "
                     f"another (isend lets the sender compute on, so the others may pass while a stage computes)"
                     f"\n        together {p_ms + o_ms + two:+.1f} to {p_ms + o_ms + all_:+.1f} ms, against the gap's "
                     f"{gap_ms:+.1f} ms")
        else:
            two = all_ = 0.0
            said += (f"messages: not timed in this run\n        together {p_ms + o_ms:+.1f} ms, against the gap's "
                     f"{gap_ms:+.1f} ms")
        lo, hi = (round(gap_ms - p_ms - o_ms - x, 1) for x in (all_, two))
        rlo, rhi = r["step_range"]
        residuals.append((m, lo, hi, o_ms, round(1e3 * (rhi - rlo), 1)))
        lines.append(said + f"; the gap less them: {lo:+.1f}" + (f" to {hi:+.1f} ms" if hi != lo else " ms"))
    return "\n".join(lines + ([_residual_line(residuals)] if residuals else []))


def _residual_line(residuals: list[tuple[int, float, float, float]]) -> str:
    """Where the estimates together overshoot the gap, fall short of it, or span it; ``gap_lines``' last line (01).

    Each entry: m, the gap less the estimates with all 2m messages and with the 2 (lo ≤ hi), the
    outside term o, and the spread of that m's step rounds (slowest less fastest, ms). Where they overshoot
    and the gap lies within the estimates without o (lo + o ≤ 0 ≤ hi + o), the step's parts outside its
    compute added less than o there, by these estimates. An overshoot or a shortfall is a difference of
    medians: a difference between the gap and the estimates is said only where it exceeds that m's rounds' spread.
    """
    def ms(group: list) -> str:
        return ", ".join(str(e[0]) for e in group)

    def by(lo: float, hi: float) -> str:
        return f"by {lo:.1f} ms" if lo == hi else f"by {lo:.1f} to {hi:.1f} ms"
    over = [e for e in residuals if e[2] < 0]
    short = [e for e in residuals if e[1] > 0]
    within = [e for e in residuals if e[1] <= 0 <= e[2]]
    said = []
    if over:
        noise = [e for e in over if -e[2] <= e[4]]   # the smallest overshoot within that m's rounds' spread
        real = [e for e in over if e not in noise]
        line = (f"by the medians the estimates together overshoot the gap at m = {ms(over)} "
                f"({by(min(-e[2] for e in over), max(-e[1] for e in over))})")
        if noise:
            line += (f"; at m = {ms(noise)} by no more than that m's rounds' spread (slowest less fastest step: "
                     f"{', '.join(f'{e[4]:.1f}' for e in noise)} ms), so this run shows no difference between the gap "
                     "and the estimates there")
        if real:
            outside_said = "the outside term is m = 1's difference of medians, itself an estimate; " if any(e[3] for e in real) else ""
            fit = [e for e in real if e[1] + e[3] <= 0 <= e[2] + e[3]]
            line += (f"; at m = {ms(real)} by more than that m's rounds' spread ({', '.join(f'{e[4]:.1f}' for e in real)} ms): "
                     f"{outside_said}what would make them overshoot is a cost in m = 1's step that this m's step does not "
                     "pay, and no event here times one" + (
                         f"; at m = {ms(fit)} the pieces and the messages alone span the gap: by these estimates, the "
                         f"step's parts outside its compute added less there than m = 1's {fit[0][3]:+.1f} ms" if fit else ""))
        said.append(line)
    if short:
        beyond = [e for e in short if e[1] > e[4]]
        line = (f"by the medians the estimates together fall short of the gap at m = {ms(short)} "
                f"({by(min(e[1] for e in short), max(e[2] for e in short))})")
        if len(beyond) < len(short):
            inside = [e for e in short if e not in beyond]
            line += (f"; at m = {ms(inside)} by no more than that m's rounds' spread (slowest less fastest step: "
                     f"{', '.join(f'{e[4]:.1f}' for e in inside)} ms), so this run does not show a cost beyond the estimates there")
        if beyond:
            line += (f"; at m = {ms(beyond)} by more than that m's rounds' spread "
                     f"({', '.join(f'{e[4]:.1f}' for e in beyond)} ms): nothing timed here accounts for the rest")
        said.append(line)
    if within:
        said.append(f"at m = {ms(within)} the gap lies within the estimates' range")
    return "; ".join(said)
