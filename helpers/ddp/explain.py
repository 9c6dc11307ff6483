"""The sentences of the scaling summary that compare batches, weigh the solo-step ideal and say where the time
goes (03).

Split from :mod:`.scaling`, which calls them from :func:`~.scaling.scaling_summary`. Each printed line is a
``tr`` message (in Korean in notebooks/ko); a list is said as a chain of
messages: an item, then the rest (each kind of item its own message, so that its literal text, not a bare
"; ", marks where it ends).
"""
from __future__ import annotations

from ..core.i18n import tr
from .verdicts import _names


def _between_lines(apart: dict, close: list[str]) -> list[str]:
    """Which batches' speedups this run tells apart (``apart``: (batch, "higher" or "lower") → the batches), and
    which it does not (``close``: "a–b") (03)."""
    moves = None
    for (a, way), bs in reversed(list(apart.items())):   # the last first: each says the ones after it
        f = dict(at=_names(bs), batch=a, rest=moves)
        if way == "higher":
            moves = (tr("ddp.move_higher", "higher at {at} than at {batch}", **f) if moves is None else
                     tr("ddp.move_higher_more", "higher at {at} than at {batch}; {rest}", **f))
        else:
            moves = (tr("ddp.move_lower", "lower at {at} than at {batch}", **f) if moves is None else
                     tr("ddp.move_lower_more", "lower at {at} than at {batch}; {rest}", **f))
    if moves is None:
        return [tr("ddp.between_none", "Between batches: the ranges of repeats overlap for every pair, so this run "
                   "cannot tell the batches' speedups apart.")]
    lines = [tr("ddp.between", "Between batches (every repeat at one above every repeat at the other): the speedup "
                "was {moves}.", moves=moves)]
    if close:
        lines.append(tr("ddp.ranges_overlap", "The ranges overlap for {pairs}: this run cannot tell those apart.",
                        pairs=", ".join(close)))
    return lines


def _per_sample(us: dict, batches: list[int]) -> str:
    """"94 µs at 64, 73 µs at 128", each item a message (03)."""
    out = tr("ddp.us_at", "{us} µs at {batch}", us=f"{us[batches[-1]]:.0f}", batch=batches[-1])
    for b in reversed(batches[:-1]):
        out = tr("ddp.us_at_more", "{us} µs at {batch}, {rest}", us=f"{us[b]:.0f}", batch=b, rest=out)
    return out


def _baseline_lines(by: dict, batches: list[int], n: int, reps: int, ideal: dict, margin: float) -> list[str]:
    """What 1 process's cost per sample at B and at B/N does to the ideal N×, generated from the run (03)."""
    us = {b: 1e6 * by[b]["step_s_1"] / b for b in batches}
    lines = ["", tr("ddp.against_ideal", "Against the solo-step ideal:"),
             tr("ddp.time_per_sample", "1 process's time per sample (median step / batch): {times}.",
                times=_per_sample(us, batches))]
    for b in batches:
        r, part = by[b], b // n
        if b in ideal:
            why = (tr("ddp.why_above", ", above {n}× because 1 process is slower per sample at {batch} than at {part}",
                      n=n, batch=b, part=part) if ideal[b] > n * (1 + margin)
                   else tr("ddp.why_below", ", below {n}× because 1 process is slower per sample at {part} than at "
                           "{batch}", n=n, batch=b, part=part) if ideal[b] < n / (1 + margin) else "")
            t_n, t_part = 1e3 * r["step_s_n"], 1e3 * by[part]["step_s_1"]
            noise = (tr("ddp.above_ideal", " A repeat went above that ideal ({high}×); {reps} repeats cannot tell it "
                        "from timing noise.", high=f"{r['speedup_max']:.2f}", reps=reps)
                     if r["speedup_max"] > ideal[b] else "")
            rest = noise
            if ideal[b] > n * (1 + margin):
                rest = (tr("ddp.escape_cost", " Part of the speedup at {batch} is that baseline effect, which the {n} "
                           "processes, on {part} samples each, escape, though they pay other costs: {t_n} ms a step "
                           "against {t_part} ms for 1 process alone at {part}, {pct} % more.{rest}", batch=b, n=n,
                           part=part, t_n=f"{t_n:.1f}", t_part=f"{t_part:.1f}", pct=f"{100 * (t_n / t_part - 1):.0f}",
                           rest=noise) if t_n > t_part else
                        tr("ddp.escape", " Part of the speedup at {batch} is that baseline effect, which the {n} "
                           "processes, on {part} samples each, escape.{rest}", batch=b, n=n, part=part, rest=noise))
            lines.append(tr("ddp.ideal_line", "At batch {batch} each of the {n} processes computes on {part} samples, "
                            "which 1 process did at {us_part} µs a sample against {us} µs at {batch}: stepping as fast "
                            "as 1 process alone (forward, backward, optimizer step), with no other rank to all-reduce "
                            "with, {n} processes would be {ideal}× faster (the solo-step ideal), not {n}×{why}; "
                            "measured {speedup}×, {pct} % of it.{rest}", batch=b, n=n, part=part,
                            us_part=f"{us[part]:.0f}", us=f"{us[b]:.0f}", ideal=f"{ideal[b]:.2f}", why=why,
                            speedup=f"{r['speedup']:.2f}", pct=f"{100 * r['speedup'] / ideal[b]:.0f}", rest=rest))
        elif r["speedup_max"] > n:
            lines.append(tr("ddp.above_n", "At batch {batch} a repeat went above {n}× ({high}×). Each of the {n} "
                            "processes computes on {part} samples there, a batch not timed alone here: the solo-step "
                            "ideal at {batch} needs a {part}-sample step, so this run cannot say whether it beats that "
                            "ideal.", batch=b, n=n, high=f"{r['speedup_max']:.2f}", part=part))
    if not ideal:
        lines.append(tr("ddp.no_ideal", "No batch here has its share (batch / {n}) timed too, so the solo-step ideal "
                        "is not known; {n}× assumes that 1 process's time per sample is the same at every batch, which "
                        "the line above shows it is not.", n=n))
    return lines


def _shares(row: dict, by: dict, batches: list[int]) -> str:
    """"17 % at 64, 13 % at 128": the bare all-reduce against the N-process step at each batch, each a message (03)."""
    pct = {b: f"{100 * row['allreduce_s'] / by[b]['step_s_n']:.0f}" for b in batches}
    out = tr("ddp.pct_at", "{pct} % at {batch}", pct=pct[batches[-1]], batch=batches[-1])
    for b in reversed(batches[:-1]):
        out = tr("ddp.pct_at_more", "{pct} % at {batch}, {rest}", pct=pct[b], batch=b, rest=out)
    return out


def _time_lines(by: dict, batches: list[int], n: int, ideal: dict, row: dict) -> list[str]:
    """Where the time goes: the N processes against 1 process stepping on one share alone, and the bare all-reduce
    (``row``: the first row, which holds its bytes and time) (03)."""
    lines = ["", tr("ddp.where_time", "Where the time goes:")]
    halves = [b for b in batches if b in ideal]
    ar_ms = row["allreduce_s"] * 1e3
    if halves:  # the N processes against 1 process computing one share alone: the time the N processes add
        b = halves[0]
        alone_ms, got_ms = by[b // n]["step_s_1"] * 1e3, by[b]["step_s_n"] * 1e3
        f = dict(batch=b, part=b // n, alone=f"{alone_ms:.2f}", n=n, got=f"{got_ms:.2f}",
                 diff=f"{abs(got_ms - alone_ms):.2f}")
        lines.append(tr("ddp.share_more", "At batch {batch} each process computes on {part} samples. 1 process alone "
                        "took {alone} ms a step at batch {part}; {n} processes took {got} ms a step at batch {batch}, "
                        "{diff} ms more.", **f) if got_ms >= alone_ms else
                     tr("ddp.share_less", "At batch {batch} each process computes on {part} samples. 1 process alone "
                        "took {alone} ms a step at batch {part}; {n} processes took {got} ms a step at batch {batch}, "
                        "{diff} ms less.", **f))
        rest = tr("ddp.candidates_share", "a step lasting as long as its slower rank (the time kept is the slower "
                  "rank's), the all-reduce inside a step sharing the cores with the other process's compute, and the "
                  "processes sharing the machine's memory")
    else:
        b = batches[0]
        alone_ms, got_ms = by[b]["step_s_1"] / n * 1e3, by[b]["step_s_n"] * 1e3
        lines.append(tr("ddp.split_line", "At batch {batch}, 1/{n} of the 1-process step would be {alone} ms; {n} "
                        "processes took {got} ms a step, {delta} ms against perfect splitting.", batch=b, n=n,
                        alone=f"{alone_ms:.2f}", got=f"{got_ms:.2f}", delta=f"{got_ms - alone_ms:+.2f}"))
        rest = tr("ddp.candidates_split", "what else does not split (the optimizer step, each step's fixed cost), a "
                  "step lasting as long as its slower rank (the time kept is the slower rank's), and the all-reduce "
                  "inside a step sharing the cores with the other process's compute")
    lines.append(tr("ddp.bare_allreduce", "One bare all-reduce of the {kb} KB of gradients took {ar} ms, the same work "
                    "at every batch; against the {n}-process step time that is {shares}.",
                    kb=f"{row['allreduce_bytes_per_step'] / 1e3:.0f}", ar=f"{ar_ms:.2f}", n=n,
                    shares=_shares(row, by, batches)))
    extra = f"{got_ms - alone_ms:.2f}"
    if got_ms - alone_ms > ar_ms:
        lines.append(tr("ddp.not_measured", "A bare all-reduce, timed alone, takes {ar} ms; its share inside the step "
                        "is not measured, nor are those {extra} ms timed part by part; candidates besides it: {rest}.",
                        ar=f"{ar_ms:.2f}", extra=extra, rest=rest))
    else:
        lines.append(tr("ddp.less_than_bare", "Those {extra} ms are less than one bare all-reduce timed alone ({ar} "
                        "ms). Why is not measured here: the two were timed apart, and this run does not split a step "
                        "into its parts, so it cannot say how much of the all-reduce a step pays.", extra=extra,
                        ar=f"{ar_ms:.2f}"))
    return lines
