"""The sentences of the scaling summary that judge one batch, name batches, and sum the run up in one line (03).

Split from :mod:`.scaling`, which calls them from :func:`~.scaling.scaling_summary`.
"""
from __future__ import annotations

import statistics


def _names(batches: list[int]) -> str:
    """``[64]`` → "64", ``[64, 256, 1024]`` → "64, 256 and 1024"."""
    words = [str(b) for b in batches]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _takeaway(by: dict, groups: dict, ideal: dict, n: int) -> str:
    """The summary's first line, from the verdicts and the solo-step ideal (03): what the rest details."""
    line = f"In short, {n} processes against 1: " + "; ".join(f"{v} at {_names(bs)}" for v, bs in groups.items()) + "."
    if ideal:
        share = sorted(100 * by[b]["speedup"] / ideal[b] for b in ideal)
        span = f"{share[0]:.0f} %" if f"{share[0]:.0f}" == f"{share[-1]:.0f}" else f"{share[0]:.0f}–{share[-1]:.0f} %"
        line += f" Where the solo-step ideal (below) is known ({_names(sorted(ideal))}), the median reached {span} of it."
    return line


def _batch_lines(r: dict, verdict: str, margin: float) -> list[str]:
    """One batch: median, interquartile range and range of the repeats, how many were faster, the verdict and why (03)."""
    s, med, n = r["speedups"], r["speedup"], r["processes"]
    q1, _, q3 = statistics.quantiles(s, n=4, method="inclusive") if len(s) > 1 else s * 3
    up, down, k = sum(x > 1 + margin for x in s), sum(x < 1 / (1 + margin) for x in s), len(s)
    head = (f"  batch {r['global_batch']}: median {med:.2f}×, interquartile {q1:.2f}–{q3:.2f}×, all {r['speedup_min']:.2f}–"
            f"{r['speedup_max']:.2f}×; faster in {up} of {k} repeats, slower in {down} of {k}")
    if verdict in ("faster", "slower"):
        return [head, f"    verdict: {n} processes {verdict} than 1 in every repeat"]
    if verdict != "unclear":
        edge = (f"the lowest {r['speedup_min']:.3f}×, not above {1 + margin:.2f}×" if verdict == "mostly faster" else
                f"the highest {r['speedup_max']:.3f}×, not below {1 / (1 + margin):.2f}×")
        return [head, f"    verdict: {n} processes {verdict} than 1 (at least 3 in 4 repeats), not in every repeat: {edge}"]
    if bool(up) != bool(down):   # one way only: say which way it did not go
        way, got, other = ("slower", down, "faster") if down else ("faster", up, "slower")
        return [head, f"    verdict: not {other}: none of the {k} repeats was {other}; {got} of {k} "
                      f"{'was' if got == 1 else 'were'} {way}, fewer than 3 in 4, so not mostly {way}"]
    if med > 1 + margin or med < 1 / (1 + margin):
        way, got = ("faster", up) if med > 1 else ("slower", down)
        why = f"the median says {way}, but {got} of {k} repeats {'was' if got == 1 else 'were'} {way}: fewer than 3 in 4"
    else:
        why = f"the median is within {100 * margin:.0f} % of 1×"
    return [head, f"    verdict: no clear difference: {why}"]
