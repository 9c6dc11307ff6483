"""Notebook 01's step against the bound, said: each stage's measured cost, the shown round, the backward's wait, and
the steps above the bound, each line a message of the catalogue (01). The figures come from ``bounds``."""
from __future__ import annotations

import statistics

from ..core.i18n import tr
from .bounds import (COUNT_TOLERANCE, _compute, _slowdown, against_bound, bound_step, compute_ms, compute_s,
                     stage_bound, stage_costs)

__all__ = ["beyond_bound_lines", "stage_cost_lines", "backward_wait_line", "shown_round_line"]

def beyond_bound_lines(rows: list[dict]) -> str:
    """For each m above its bound (1.00 as printed): is it above 1 across both rows' rounds, and why (01).

    ``rows[0]`` is the baseline (m = 1). The ratio's range takes both rows' rounds at their extremes,
    as ``piece_model_lines`` does: m = 1's fastest round over this m's slowest, to m = 1's slowest over
    this m's fastest; a win over the bound is said only where the whole range lies above 1.
    Rows of the hand-written GPipe carry the step's events (``compute_rounds``): their step is tested
    against the tighter bound's step, ``bound_step`` (m = 1's compute alone, pipelined with the two
    stages' measured costs: the step's other parts only lengthen a step, so a step below it needs
    pieces cheaper than 1/m of m = 1's, or m = 1's compute timed long), and the lines say
    what the pieces cost inside the step, with the range of their rounds; cheaper pieces are named as
    the cause (the bound assumes each piece costs 1/m of the whole) only where that range lies below
    ×1.00. The library's rows (with ``schedule``) carry no events: they are tested against the
    equal-cost ideal 2m/(m + 1), and the line says that this launch did not time their pieces.
    """
    base = rows[0]
    if base["microbatches"] != 1:
        raise ValueError("rows[0] must be the m = 1 baseline")
    staged = "compute_rounds" in base
    lines = []
    for r in rows[1:]:
        m = r["microbatches"]
        tight = staged and "compute_rounds" in r
        bound = stage_bound(base, m) if tight else r["ideal_speedup"]
        against = against_bound(base, r) if tight else r["speedup"] / bound
        if round(against, 2) <= 1:   # above 1.00 as printed, not 1.004
            continue
        (rlo, rhi) = r["step_range"]
        if tight:   # the bound's step scales with m = 1's compute: its rounds' fastest and slowest sums
            rounds = _compute(base)
            c1, (blo, bhi) = compute_s(base), (min(rounds), max(rounds))
            lo, hi = bound_step(base, m) * blo / c1 / rhi, bound_step(base, m) * bhi / c1 / rlo
        else:
            (blo, bhi) = base["step_range"]
            lo, hi = blo / rhi / bound, bhi / rlo / bound
        who = tr("01.bb_who_lib", "library {schedule} m = {m}", schedule=r["schedule"], m=m) if "schedule" in r \
            else f"m = {m}"
        if not tight:   # library rows: the equal-cost ideal
            lines.append(tr("01.bb_lib_line", "{who}: efficiency {eff:.2f} > 1 against the m = 1 median ({ms:.0f} ms): "
                            "faster than the equal-cost ideal, which a cost the same at every m cannot explain (added "
                            "to both steps, it only lowers the ratio)", who=who, eff=r["efficiency"],
                            ms=1e3 * base["step_s"]))
        else:
            lines += [tr("01.bb_step_line", "{who}: the step, {step:.0f} ms, is shorter than the bound's, {bstep:.0f} "
                         "ms (m = 1's compute, {c1:.1f} ms, ÷ the bound with these stages' costs, {bound:.2f}×): "
                         "{against:.2f} of it by the medians", who=who, step=1e3 * r["step_s"],
                         bstep=1e3 * bound_step(base, m), c1=compute_ms(base), bound=bound, against=against),
                      tr("01.bb_speedup_line", "  (speedup over the whole m = 1 step {s:.2f}×, efficiency {e:.2f} "
                         "against the equal-cost ideal, {i:.2f}×)", s=r["speedup"], e=r["efficiency"],
                         i=r["ideal_speedup"])]
        lo_s = f"{lo:.3f}" if round(lo, 2) == 1 else f"{lo:.2f}"   # 0.997 is within the spread: not printed "1.00"
        span = dict(first=tr("01.bb_first_compute", "m = 1's compute") if tight else "m = 1", blo=f"{1e3 * blo:.0f}",
                    bhi=f"{1e3 * bhi:.0f}", m=m, rlo=f"{1e3 * rlo:.0f}", rhi=f"{1e3 * rhi:.0f}", lo=lo_s,
                    hi=f"{hi:.2f}")
        if lo <= 1:
            lines.append(tr("01.bb_rounds_within", "  by both rows' rounds ({first}: {blo}–{bhi} ms, m = {m}: "
                            "{rlo}–{rhi} ms) it is {lo}–{hi}: within the rounds' spread, no clear win over the {what}",
                            what=tr("01.word_bound", "bound") if tight else tr("01.bb_equal_ideal", "equal-cost ideal"),
                            **span))
        elif tight:
            lines.append(tr("01.bb_rounds_above", "  by both rows' rounds ({first}: {blo}–{bhi} ms, m = {m}: "
                            "{rlo}–{rhi} ms) it is {lo}–{hi}: above 1 even then", **span))
            lines += _cheaper_lines(base, r, bound, c1)
        else:
            lines.append(tr("01.bb_rounds_above_lib", "  by both rows' rounds ({first}: {blo}–{bhi} ms, m = {m}: "
                            "{rlo}–{rhi} ms) it is {lo}–{hi}: above 1 even then, so the equal-cost ideal's assumption "
                            "failed here: it takes each micro-batch's work as 1/m of the m = 1 step's; this launch "
                            "does not time the library's pieces, so it cannot say which cost less than that", **span))
    return "\n".join(lines)


def _cheaper_lines(base: dict, r: dict, bound: float, c1: float) -> list[str]:
    """``beyond_bound_lines``' lines on what the pieces cost inside a step above the bound, and what follows (01)."""
    k = _slowdown(r, base)
    klo, khi = min(_compute(r)) / max(_compute(base)), max(_compute(r)) / min(_compute(base))
    rows_m1, rows_m = base.get("microbatch_rows"), r.get("microbatch_rows")
    pieces = tr("01.bb_pieces_rows", "pieces of {rows} rows", rows=f"{rows_m:,}") if rows_m else \
        tr("01.bb_pieces", "pieces")
    lines = [tr("01.bb_took", "  inside its step the {pieces} took ×{k:.2f} of m = 1's forward and backward time "
                "(both rows' rounds: ×{klo:.2f}–{khi:.2f}), where the bound assumes ×1.00", pieces=pieces, k=k,
                klo=klo, khi=khi)]
    if khi < 1:
        whole = (tr("01.bb_rows", "{rows} rows", rows=f"{rows_m1:,}") if rows_m1 else
                 tr("01.bb_whole", "the whole batch"))
        lines.append(tr("01.bb_cheaper", "  so here {pieces} cost less per row than {whole}, and the bound's "
                        "assumption (each piece costs 1/m of the whole) failed; the bound at that cost, {bound:.2f}× "
                        "÷ {k:.2f} = {at:.2f}×, against the measured m = 1 compute ÷ this step, {c:.2f}× (the step's "
                        "other parts only lengthen a step)", pieces=pieces, whole=whole, bound=bound, k=k, at=bound / k,
                        c=c1 / r["step_s"]))
    elif klo <= 1:
        lines.append(tr("01.bb_not_separated", "  that range includes ×1.00: whether cheaper pieces made the step "
                        "faster than the bound, this run does not separate"))
    else:
        lines.append(tr("01.bb_not_less", "  the pieces did not cost less, and this run does not say what made the "
                        "step faster than the bound"))
    return lines


def shown_round_line(base: dict) -> str:
    """m = 1's stages in the round the timelines show and by the medians over the rounds, and whether the two order the
    stages alike: one round can reverse the order the medians give (01's read 21)."""
    from .instruments import busy_share

    shown = [busy_share(base["events"], s) for s in (0, 1)]
    med = [sum(c) / base["step_s"] for c in stage_costs(base)]
    first = tr("01.sr_shown", "m = 1, in the shown round (the timelines'): from the first computation to the last, "
               "stage 0 computed {a:.0%} of the time, stage 1 {b:.0%}, never both at once;", a=shown[0], b=shown[1])
    if (shown[0] > shown[1]) != (med[0] > med[1]):
        return first + "\n" + tr("01.sr_medians_other", "  by the medians over the rounds (the parts in section 3's "
                                 "table): stage 0 computed {a:.0%} of the median step, stage 1 {b:.0%}; the shown "
                                 "round orders the two stages the other way round: here one round's variation is as "
                                 "large as the difference between the stages", a=med[0], b=med[1])
    return first + "\n" + tr("01.sr_medians", "  by the medians over the rounds (the parts in section 3's table): "
                             "stage 0 computed {a:.0%} of the median step, stage 1 {b:.0%}", a=med[0], b=med[1])


def stage_cost_lines(rows: list[dict], products: list[int] | None = None, forward: list[int] | None = None,
                     head: float | None = None) -> str:
    """Each stage's measured cost at m = 1, the bound they give per m beside the equal-cost ideal (01).

    With ``products`` (``backward_products``) and ``forward`` (``forward_products``): each stage's same-size matrix
    products, the backward times' and the forward times' ratios beside the products' ratios; the times are said to
    follow the counts only where both ratios lie within ``COUNT_TOLERANCE`` of their counts. ``head``
    (``head_share``): the multiply-adds stage 1's head adds to its forward, printed where the forward misses its count.
    """
    (f0, b0), (f1, b1) = costs = stage_costs(rows[0])
    slow = max((0, 1), key=lambda s: sum(costs[s]))
    ms = [[round(1e3 * t, 1) for t in c] for c in costs]   # sums of the printed values, so each printed sum adds up
    tot = [round(sum(c), 1) for c in ms]
    lines = [tr("01.sc_m1", "m = 1, inside the step (median of {n} rounds): stage 0: F {f0:.1f} ms + B {b0:.1f} ms = "
                "{t0:.1f} ms; stage 1: F {f1:.1f} + B {b1:.1f} = {t1:.1f} ms: stage {slow} takes ×{x:.2f} the other's "
                "time (of the sums as printed)", n=len(rows[0]["step_rounds"]), f0=ms[0][0], b0=ms[0][1], t0=tot[0],
                f1=ms[1][0], b1=ms[1][1], t1=tot[1], slow=slow, x=tot[slow] / tot[1 - slow])]
    if products:
        pairs = ([("forward", f1 / f0, forward)] if forward else []) + [("backward", b1 / b0, products)]
        for kind, measured, n in pairs:
            said = dict(r=measured, n1=n[1], n0=n[0], w=n[1] / n[0])
            if kind == "forward":
                lines.append(tr("01.sc_forward", "forward at m = 1: stage 1 took ×{r:.2f} stage 0's time (measured); "
                                "it runs {n1} matrix products of the same size against stage 0's {n0} (plus its head "
                                "and the loss), ×{w:.2f} the work in them", **said))
            elif forward:
                lines.append(tr("01.sc_backward", "backward at m = 1: stage 1 took ×{r:.2f} stage 0's time (measured); "
                                "it runs {n1} matrix products of the same size against stage 0's {n0}, ×{w:.2f} the "
                                "work in them", **said))
            else:
                lines.append(tr("01.sc_backward_only", "backward at m = 1: stage 1 took ×{r:.2f} stage 0's time "
                                "(measured); it runs {n1} matrix products of the same size against stage 0's {n0}, "
                                "×{w:.2f} the work in them: the count is work, not time; the forward's ratio is not "
                                "given, so no verdict", **said))
        off = [k for k, t, n in pairs if abs(t / (n[1] / n[0]) - 1) > COUNT_TOLERANCE]
        if forward:   # unrounded: the verdict's figures
            dev = {f"d{k[0]}": f"{t / (n[1] / n[0]) - 1:+.1%}" for k, t, n in pairs}
            tol = f"{COUNT_TOLERANCE:.0%}"
        if forward and off:   # the verdict on both ratios gets its own line, not the backward's tail
            tail = ""
            if "forward" in off and f1 / f0 > forward[1] / forward[0]:   # they only add work
                tail = (tr("01.sc_tail_head", "; the forward's count leaves out stage 1's head ({head:.1%} more "
                           "multiply-adds than its counted products) and its loss, which this run does not time apart",
                           head=head) if head is not None else
                        tr("01.sc_tail", "; the forward's count leaves out stage 1's head and its loss, which this run "
                           "does not time apart"))
            if len(off) > 1:
                lines.append(tr("01.sc_off_both", "the forward's and the backward's ratios lie more than {tol} from "
                                "their counts (forward {df}, backward {db}): this run does not confirm that the times "
                                "follow the count{tail}", tol=tol, tail=tail, **dev))
            elif off == ["forward"]:
                lines.append(tr("01.sc_off_forward", "the forward's ratio lies more than {tol} from its count (forward "
                                "{df}, backward {db}): this run does not confirm that the times follow the count{tail}",
                                tol=tol, tail=tail, **dev))
            else:
                lines.append(tr("01.sc_off_backward", "the backward's ratio lies more than {tol} from its count "
                                "(forward {df}, backward {db}): this run does not confirm that the times follow the "
                                "count", tol=tol, **dev))
        elif forward:
            lines.append(tr("01.sc_within", "both ratios lie within {tol} of their counts (forward {df}, backward "
                            "{db}, of the unrounded ratios): here the times follow the count", tol=tol, **dev))
    lines.append(tr("01.sc_best", "best speedup of this compute ({c:.1f} ms at m = 1, each round's four parts summed, "
                    "then the median; the parts' medians above sum to {s:.1f}) with these costs in GPipe's order (per "
                    "phase: the slower stage's work + one micro-batch of the other's; each round's, then the median), "
                    "beside the equal-cost ideal:", c=compute_ms(rows[0]), s=round(tot[0] + tot[1], 1))
                 + "\n  " + ", ".join(f"m = {r['microbatches']}: {stage_bound(rows[0], r['microbatches']):.2f}× "
                                      f"({r['ideal_speedup']:.2f}×)" for r in rows[1:]))
    return "\n".join(lines)


def backward_wait_line(row: dict, stage: int = 0, base: dict | None = None) -> str:
    """How long ``stage`` sat idle between its first and last backward in the shown round, and how much of it
    stage 1's slower backward pieces account for (01).

    In GPipe's backward phase stage 1 runs its backwards back to back and B0.i waits for B1.i's gradient.
    If each backward piece took its stage's mean in that round, stage 0 would sit idle the difference
    of the two means before each of its backwards but the first: (m − 1) times it in all. The
    rest of the idle time is not attributed: the run times neither the messages' delivery nor each
    piece's own wait, the candidates it names. With ``base``
    (the m = 1 row), the pieces' ratio is printed beside the whole backward's at m = 1.
    """
    spans = sorted((a, b) for s, k, _, a, b in row["events"] if s == stage and k == "B")
    wait = sum(max(0.0, a2 - b1) for (_, b1), (a2, _) in zip(spans, spans[1:]))
    idle = dict(m=row["microbatches"], stage=stage, w=1e3 * wait)
    if stage != 0 or wait <= 0 or len(spans) < 2:
        return tr("01.bw_idle", "m = {m}: stage {stage} sat idle {w:.1f} ms between its backwards in the shown round "
                  "(the gaps between its B bars)", **idle)
    mean = {s: statistics.mean(b - a for ss, k, _, a, b in row["events"] if ss == s and k == "B") for s in (0, 1)}
    slower = (len(spans) - 1) * max(0.0, mean[1] - mean[0])
    if slower <= 0:
        return tr("01.bw_idle_not_slower", "m = {m}: stage {stage} sat idle {w:.1f} ms between its backwards in the "
                  "shown round (the gaps between its B bars); stage 1's backward pieces were not slower than stage 0's "
                  "on average in that round, so their means do not account for it; this run does not say what does "
                  "(candidates it does not time inside the step: variation in the messages' delivery, pieces of "
                  "uneven length)", **idle)
    d = round(1e3 * (mean[1] - mean[0]), 2)   # ms, as printed: the product and the rest below are taken from it
    slower, wait_ms = (len(spans) - 1) * d, round(1e3 * wait, 1)
    tail = (tr("01.bw_share", "{pct:.0%} of the idle time; the rest ({rest:.2f} ms) this run does not attribute "
               "(candidates it does not time inside the step: variation in the messages' delivery, pieces of uneven "
               "length)", pct=slower / wait_ms, rest=wait_ms - slower) if slower < 0.995 * wait_ms else
            tr("01.bw_all", "all of the idle time") if slower <= 1.005 * wait_ms else
            tr("01.bw_more", "more than the idle time: so the pieces did not each take their stage's mean, or the "
               "gradients' deliveries took different times (this run times neither inside the step)"))
    said = dict(r=mean[1] / mean[0], d=d, n=len(spans) - 1, s=slower, w=wait_ms, tail=tail)
    first = tr("01.bw_idle_then", "m = {m}: stage {stage} sat idle {w:.1f} ms between its backwards in the shown round "
               "(the gaps between its B bars);", **idle)
    if base is None:
        return first + "\n" + tr("01.bw_pieces", "  stage 1's backward pieces took ×{r:.2f} stage 0's in that round, "
                                 "and each B0.i waits for B1.i's gradient: at the two stages' means that makes stage 0 "
                                 "wait {d:.2f} ms before each backward but the first, {n} × {d:.2f} = {s:.2f} ms of "
                                 "the {w:.1f} ms, {tail}", **said)
    (_, b0), (_, b1) = stage_costs(base)
    return first + "\n" + tr("01.bw_pieces_whole", "  stage 1's backward pieces took ×{r:.2f} stage 0's in that round "
                             "(the whole backward at m = 1: ×{x:.2f}), and each B0.i waits for B1.i's gradient: at the "
                             "two stages' means that makes stage 0 wait {d:.2f} ms before each backward but the first, "
                             "{n} × {d:.2f} = {s:.2f} ms of the {w:.1f} ms, {tail}", x=b1 / b0, **said)
