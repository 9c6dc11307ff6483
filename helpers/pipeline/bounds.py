"""Notebook 01's step against the bound: each stage's measured cost, the bound it gives, a step above it and why (01).

Each line is drawn from the step's own recorded events (``compute_rounds``: each stage's summed
forward and backward seconds in every timed round) and said with the spread of the rounds.
"""
from __future__ import annotations

import statistics

__all__ = ["beyond_bound_lines", "stage_costs", "compute_ms", "head_share", "stage_bound", "bound_step", "against_bound",
           "backward_products", "forward_products", "stage_cost_lines", "backward_wait_line", "shown_round_line",
           "compute_s"]


def _slowdown(row: dict, base: dict) -> float:
    """How many times m = 1's forward and backward time the pieces took inside the step, all four parts together (01).

    The sum of the four parts' medians (each stage's forwards, each stage's backwards) over the same
    sum at m = 1: a weighted mean of the four parts' own ratios, so never outside them.
    """
    def parts(r: dict) -> float:
        return sum(statistics.median(_compute(r, s, k)) for s in (0, 1) for k in "FB")
    return parts(row) / parts(base)


def _compute(row: dict, stage: int | None = None, kinds: str = "FB") -> list[float]:
    """Per round: the summed forward/backward seconds inside the step, of one stage or both (01)."""
    stages = [stage] if stage is not None else [0, 1]
    return [sum(row["compute_rounds"][s][r][k] for s in stages for k in kinds)
            for r in range(len(row["compute_rounds"][0]))]


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
        who = (f"library {r['schedule']} m = {m}" if "schedule" in r else f"m = {m}")
        if not tight:
            line = (f"{who}: efficiency {r['efficiency']:.2f} > 1 against the m = 1 median "
                    f"({1e3 * base['step_s']:.0f} ms): faster than the equal-cost ideal, which a cost the same at every m "
                    "cannot explain (added to both steps, it only lowers the ratio)")   # library rows: the equal-cost ideal
        else:
            line = (f"{who}: the step, {1e3 * r['step_s']:.0f} ms, is shorter than the bound's, "
                    f"{1e3 * bound_step(base, m):.0f} ms (m = 1's compute, {compute_ms(base):.1f} ms, ÷ the bound with these "
                    f"stages' costs, {bound:.2f}×): {against:.2f} of it by the medians\n  (speedup over the whole m = 1 "
                    f"step {r['speedup']:.2f}×, efficiency {r['efficiency']:.2f} against the equal-cost ideal, "
                    f"{r['ideal_speedup']:.2f}×)")
        lo_s = f"{lo:.3f}" if round(lo, 2) == 1 else f"{lo:.2f}"   # 0.997 is within the spread: not printed "1.00"
        first = "m = 1's compute" if tight else "m = 1"
        line += (f"\n  by both rows' rounds ({first}: {1e3 * blo:.0f}–{1e3 * bhi:.0f} ms, m = {m}: {1e3 * rlo:.0f}–"
                 f"{1e3 * rhi:.0f} ms) it is {lo_s}–{hi:.2f}")
        if lo <= 1:
            line += f": within the rounds' spread, no clear win over the {'bound' if tight else 'equal-cost ideal'}"
        elif tight:
            k = _slowdown(r, base)
            klo, khi = min(_compute(r)) / max(_compute(base)), max(_compute(r)) / min(_compute(base))
            rows_m1, rows_m = base.get("microbatch_rows"), r.get("microbatch_rows")
            pieces = f"pieces of {rows_m:,} rows" if rows_m else "pieces"
            line += (f": above 1 even then\n  inside its step the {pieces} took ×{k:.2f} of m = 1's forward and "
                     f"backward time (both rows' rounds: ×{klo:.2f}–{khi:.2f}), where the bound assumes ×1.00")
            if khi < 1:
                whole = f"{rows_m1:,} rows" if rows_m1 else "the whole batch"
                line += (f"\n  so here {pieces} cost less per row than {whole}, and the bound's assumption (each "
                         f"piece costs 1/m of the whole) failed; the bound at that cost, {bound:.2f}× ÷ {k:.2f} = "
                         f"{bound / k:.2f}×, against the measured m = 1 compute ÷ this step, "
                         f"{c1 / r['step_s']:.2f}× (the step's other parts only lengthen a step)")
            elif klo <= 1:
                line += ("\n  that range includes ×1.00: whether cheaper pieces made the step faster than the bound, "
                         "this run does not separate")
            else:
                line += ("\n  the pieces did not cost less, and this run does not say what made the step faster "
                         "than the bound")
        else:
            line += (": above 1 even then, so the equal-cost ideal's assumption failed here: it takes each micro-batch's work as 1/m "
                     "of the m = 1 step's; this launch does not time the library's pieces, so it cannot say which "
                     "cost less than that")
        lines.append(line)
    return "\n".join(lines)


def compute_s(base: dict) -> float:
    """m = 1's compute: each round's summed forwards and backwards of both stages, then the median over the rounds (01).

    Taken round by round, as the step's time outside it is (``gap_lines``): the four parts' medians, each taken over
    the rounds apart, sum to less where the parts' slow rounds differ (01's reads 20-24).
    """
    return statistics.median(_compute(base))


def compute_ms(base: dict) -> float:
    """:func:`compute_s` in ms to 0.1 ms, as printed (01)."""
    return round(1e3 * compute_s(base), 1)


def stage_costs(base: dict) -> list[tuple[float, float]]:
    """Each stage's summed forward and backward seconds in the m = 1 step, median of its rounds (01)."""
    return [(statistics.median(_compute(base, s, "F")), statistics.median(_compute(base, s, "B"))) for s in (0, 1)]


def shown_round_line(base: dict) -> str:
    """m = 1's stages in the round the timelines show and by the medians over the rounds, and whether the two order the
    stages alike: one round can reverse the order the medians give (01's read 21)."""
    from .instruments import busy_share

    shown = [busy_share(base["events"], s) for s in (0, 1)]
    med = [sum(c) / base["step_s"] for c in stage_costs(base)]
    line = (f"m = 1, in the shown round (the timelines'): from the first computation to the last, stage 0 computed "
            f"{shown[0]:.0%} of the time, stage 1 {shown[1]:.0%}, never both at once;\n  by the medians over the rounds "
            f"(the parts in section 3's table): stage 0 computed {med[0]:.0%} of the median step, stage 1 {med[1]:.0%}")
    if (shown[0] > shown[1]) != (med[0] > med[1]):
        line += ("; the shown round orders the two stages the other way round: here one round's variation is as large "
                 "as the difference between the stages")
    return line


def bound_step(base: dict, m: int) -> float:
    """The shortest GPipe step for two stages of the measured costs, messages and the step's other parts free: per
    phase, the slower stage's whole work plus one micro-batch of the other's; taken round by round with that round's
    four parts, then the median over the rounds (01).

    Given a row of m micro-batches as ``base``, its own pieces' costs: the step that model gives with them.
    """
    parts = zip(*(_compute(base, s, k) for s in (0, 1) for k in "FB"))   # per round: (f0, b0, f1, b1)
    return statistics.median(max(f0, f1) + min(f0, f1) / m + max(b0, b1) + min(b0, b1) / m for f0, b0, f1, b1 in parts)


def against_bound(base: dict, row: dict) -> float:
    """The bound's step over the measured one: m = 1's compute ÷ this step, ÷ ``stage_bound`` (01).

    Both sides count m = 1's compute only (the bound pipelines nothing else), so at m = 1 it is the
    share of the step the stages computed; above 1.00 the step beat the bound.
    """
    return bound_step(base, row["microbatches"]) / row["step_s"]


def stage_bound(base: dict, m: int) -> float:
    """GPipe's best speedup over m = 1 for two stages of the measured costs ``stage_costs(base)`` (01).

    Each phase (all forwards, then all backwards) lasts at least the slower stage's whole work plus
    one micro-batch of the faster one's, the pipe filling or draining: max + min/m. Two stages of
    equal cost give GPipe's ideal 2m/(m + 1); unequal ones give less. A ratio of compute times: the
    numerator is m = 1's compute, not its whole step (``against_bound`` compares like with like).
    """
    return compute_s(base) / bound_step(base, m)


def backward_products(stages: list) -> list[int]:
    """How many matrix products with a square (width × width) weight each stage's backward runs, from its layers (01).

    Each square ``Linear`` computes its weight's gradient (one product) and, where its input needs a
    gradient, its input's (one more). Stage 0's first layer takes the batch, which needs none; every
    other layer's input, stage 1's received activation included (``requires_grad_`` in
    ``gpipe_step``), does. A count of work (multiply-adds), not of time.
    """
    return [2 * n - (1 if s == 0 and n else 0) for s, n in enumerate(forward_products(stages))]


def head_share(stages: list) -> float:
    """Stage 1's forward multiply-adds outside its square products (its head), as a share of theirs (01)."""
    from torch import nn
    linears = [l for l in stages[1].modules() if isinstance(l, nn.Linear)]
    square = sum(l.in_features * l.out_features for l in linears if l.in_features == l.out_features)
    return sum(l.in_features * l.out_features for l in linears if l.in_features != l.out_features) / square


def forward_products(stages: list) -> list[int]:
    """How many matrix products with a square (width × width) weight each stage's forward runs: one per square
    ``Linear`` (01). Stage 1's head and loss come on top; a count of work, not of time."""
    from torch import nn
    return [sum(isinstance(l, nn.Linear) and l.in_features == l.out_features for l in stage.modules()) for stage in stages]


COUNT_TOLERANCE = 0.05   # a time ratio "follows" a count of products only within 5 % of it (stage_cost_lines)


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
    lines = [f"m = 1, inside the step (median of {len(rows[0]['step_rounds'])} rounds): stage 0: F {ms[0][0]:.1f} ms + "
             f"B {ms[0][1]:.1f} ms = {tot[0]:.1f} ms; stage 1: F {ms[1][0]:.1f} + B {ms[1][1]:.1f} = "
             f"{tot[1]:.1f} ms: stage {slow} takes ×{tot[slow] / tot[1 - slow]:.2f} the other's time (of the sums as printed)"]
    if products:
        pairs = ([("forward", f1 / f0, forward)] if forward else []) + [("backward", b1 / b0, products)]
        for kind, measured, n in pairs:
            extra = " (plus its head and the loss)" if kind == "forward" else ""
            lines.append(f"{kind} at m = 1: stage 1 took ×{measured:.2f} stage 0's time (measured); it runs {n[1]} matrix "
                         f"products of the same size against stage 0's {n[0]}{extra}, ×{n[1] / n[0]:.2f} the work in them")
        off = [f"{k}'s" for k, t, n in pairs if abs(t / (n[1] / n[0]) - 1) > COUNT_TOLERANCE]
        dev = ", ".join(f"{k} {t / (n[1] / n[0]) - 1:+.1%}" for k, t, n in pairs)   # unrounded: the verdict's figures
        if not forward:
            lines[-1] += ": the count is work, not time; the forward's ratio is not given, so no verdict"
        elif off:   # the verdict on both ratios gets its own line, not the backward's tail
            lines.append(f"the {' and the '.join(off)} ratio{'s lie' if len(off) > 1 else ' lies'} more than "
                         f"{COUNT_TOLERANCE:.0%} from {'their counts' if len(off) > 1 else 'its count'} ({dev}): this run does "
                         "not confirm that the times follow the count"
                         + ("; the forward's count leaves out stage 1's head" + (
                             f" ({head:.1%} more multiply-adds than its counted products)" if head is not None else "")
                            + " and its loss, which this run does not time apart"
                            if "forward's" in off and f1 / f0 > forward[1] / forward[0] else ""))   # they only add work
        else:
            lines.append(f"both ratios lie within {COUNT_TOLERANCE:.0%} of their counts ({dev}, of the unrounded ratios): "
                         "here the times follow the count")
    lines.append(f"best speedup of this compute ({compute_ms(rows[0]):.1f} ms at m = 1, each round's four parts summed, then "
                 f"the median; the parts' medians above sum to {round(tot[0] + tot[1], 1):.1f}) with these costs in GPipe's "
                 "order (per phase: the slower stage's work + one micro-batch of the other's; each round's, then the median), "
                 "beside the equal-cost ideal:\n  "
                 + ", ".join(f"m = {r['microbatches']}: {stage_bound(rows[0], r['microbatches']):.2f}× "
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
    line = (f"m = {row['microbatches']}: stage {stage} sat idle {1e3 * wait:.1f} ms between its backwards in the shown "
            f"round (the gaps between its B bars)")
    if stage != 0 or wait <= 0 or len(spans) < 2:
        return line
    mean = {s: statistics.mean(b - a for ss, k, _, a, b in row["events"] if ss == s and k == "B") for s in (0, 1)}
    slower = (len(spans) - 1) * max(0.0, mean[1] - mean[0])
    if slower <= 0:
        return line + ("; stage 1's backward pieces were not slower than stage 0's on average in that round, so their "
                       "means do not account for it; this run does not say what does (candidates it does not time inside the "
                       "step: variation in the messages' delivery, pieces of uneven length)")
    d = round(1e3 * (mean[1] - mean[0]), 2)   # ms, as printed: the product and the rest below are taken from it
    slower, wait_ms = (len(spans) - 1) * d, round(1e3 * wait, 1)
    whole = ""
    if base is not None:
        (_, b0), (_, b1) = stage_costs(base)
        whole = f" (the whole backward at m = 1: ×{b1 / b0:.2f})"
    return line + (f";\n  stage 1's backward pieces took ×{mean[1] / mean[0]:.2f} stage 0's in that round{whole}, and each B0.i waits "
                   f"for B1.i's gradient: at the two stages' means that makes stage 0 wait {d:.2f} ms before each "
                   f"backward but the first, {len(spans) - 1} × {d:.2f} = {slower:.2f} ms of the {wait_ms:.1f} ms, "
                   + (f"{slower / wait_ms:.0%} of the idle time; the rest ({wait_ms - slower:.2f} ms) this run does not "
                      "attribute (candidates it does not time inside the step: variation in the messages' delivery, "
                      "pieces of uneven length)"
                      if slower < 0.995 * wait_ms else "all of the idle time" if slower <= 1.005 * wait_ms
                      else "more than the idle time: so the pieces did not each take their stage's mean, or the "
                      "gradients' deliveries took different times (this run times neither inside the step)"))
