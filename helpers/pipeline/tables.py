"""Notebook 01's measurements as the lines it prints, each verdict drawn from the numbers and their spread (01)."""
from __future__ import annotations

import statistics

from .instruments import bubble_fraction

__all__ = ["gpipe_table", "piece_cost_lines", "message_lines"]


def gpipe_table(rows: list[dict]) -> str:
    """The measured-vs-ideal table (01)."""
    lines = [f"{'m':>3} {'rows/mb':>8} {'step ms':>8} {'speedup':>8} {'ideal':>6} {'efficiency':>10} {'bubble':>7}"]
    for r in rows:
        lines.append(f"{r['microbatches']:>3} {r['microbatch_rows']:>8} {1e3 * r['step_s']:>8.1f} {r['speedup']:>7.2f}× "
                     f"{r['ideal_speedup']:>5.2f}× {r['efficiency']:>10.2f} {bubble_fraction(r['microbatches']):>7.2f}")
    return "\n".join(lines)


def piece_cost_lines(costs: list[dict]) -> str:
    """Each m's stage time against m = 1's, with its rounds' range and a verdict that respects it (01).

    "more"/"less" only where the two ranges do not overlap; otherwise the difference is within the
    spread of the rounds and is said so.
    """
    lo1, hi1 = costs[0]["cost_range"]
    lines = []
    for r in costs:
        lo, hi = r["cost_range"]
        verdict = ("the baseline" if r is costs[0] else "more than in one piece" if lo > hi1
                   else "less than in one piece" if hi < lo1 else "no clear difference (the rounds overlap m = 1's)")
        lines.append(f"m = {r['microbatches']:>2} ({r['microbatch_rows']:>4} rows): ×{r['cost_vs_m1']:.2f} the m = 1 time "
                     f"(rounds ×{lo:.2f}–{hi:.2f}): {verdict}")
    return "\n".join(lines)


def message_lines(rows: list[dict]) -> str:
    """Per m: one message's size and one-way time (median and range of the rounds), and 2m of them a step (01).

    Then every place where a smaller message took longer than a larger one, with whether the
    rounds of the two overlap (within the spread) or not.
    """
    lines = [f"one-way send/recv of one micro-batch's activation (its gradient is the same size), "
             f"median of {len(rows[0]['message_s'])} rounds:"]
    for r in rows:
        t = r["message_s"]
        lines.append(f"m = {r['microbatches']:>2}: {r['message_bytes'] // 1024:>5} KB {1e3 * statistics.median(t):6.2f} ms "
                     f"(rounds {1e3 * min(t):.2f}–{1e3 * max(t):.2f}); 2m = {2 * r['microbatches']:>2} messages "
                     f"{2e3 * r['microbatches'] * statistics.median(t):6.1f} ms beside a {1e3 * r['step_s']:.0f} ms step")
    for big, small in zip(rows, rows[1:]):
        if statistics.median(small["message_s"]) > statistics.median(big["message_s"]):
            overlap = min(small["message_s"]) <= max(big["message_s"])
            lines.append(f"{small['message_bytes'] // 1024} KB took longer than {big['message_bytes'] // 1024} KB here: "
                         + ("within the spread of the rounds (they overlap)" if overlap else
                            "outside the spread of the rounds (they do not overlap)"))
    return "\n".join(lines)
