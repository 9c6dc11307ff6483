"""The sentences of the scaling summary that judge one batch, name batches, and sum the run up in one line (03).

Split from :mod:`.scaling`, which calls them from :func:`~.scaling.scaling_summary`. Each printed line is a
``tr`` message (in Korean in notebooks/ko); a list is said as a chain of
messages: an item, then the rest (each kind of item its own message, so that its literal text, not a bare
"; ", marks where it ends).
"""
from __future__ import annotations

import statistics

from ..core.i18n import tr


def _names(batches: list[int]) -> str:
    """``[64]`` → "64", ``[64, 256, 1024]`` → "64, 256 and 1024" (a message only of numbers: i18n/outputs.py says
    again a short template only where its fields are numbers, words or messages, not any phrase with an "and")."""
    words = [str(b) for b in batches]
    return words[0] if len(words) == 1 else tr("ddp.batches_and", "{first} and {last}", first=", ".join(words[:-1]),
                                               last=words[-1])


def _group(v: str, up: int, down: int, k: int, at: str, rest: str | None = None) -> str:
    """One verdict of the takeaway, at the batches ``at`` that got it, then (``rest``) the verdicts after it (03)."""
    f = dict(k=k, at=at, rest=rest)
    if v == "unclear" and bool(up) != bool(down) and down:   # one way only, too few repeats for "mostly"
        return (tr("ddp.group_not_faster", "not faster (slower in {down} of {k} repeats, none faster) at {at}",
                   down=down, **f) if rest is None else
                tr("ddp.group_not_faster_more", "not faster (slower in {down} of {k} repeats, none faster) at {at}; "
                   "{rest}", down=down, **f))
    if v == "unclear" and bool(up) != bool(down):
        return (tr("ddp.group_not_slower", "not slower (faster in {up} of {k} repeats, none slower) at {at}", up=up,
                   **f) if rest is None else
                tr("ddp.group_not_slower_more", "not slower (faster in {up} of {k} repeats, none slower) at {at}; "
                   "{rest}", up=up, **f))
    if v == "faster":
        return (tr("ddp.group_faster", "faster in every repeat at {at}", **f) if rest is None else
                tr("ddp.group_faster_more", "faster in every repeat at {at}; {rest}", **f))
    if v == "slower":
        return (tr("ddp.group_slower", "slower in every repeat at {at}", **f) if rest is None else
                tr("ddp.group_slower_more", "slower in every repeat at {at}; {rest}", **f))
    if v == "mostly faster":
        return (tr("ddp.group_mostly_faster", "mostly faster ({count} of {k} repeats) at {at}", count=up, **f)
                if rest is None else
                tr("ddp.group_mostly_faster_more", "mostly faster ({count} of {k} repeats) at {at}; {rest}", count=up,
                   **f))
    if v == "mostly slower":
        return (tr("ddp.group_mostly_slower", "mostly slower ({count} of {k} repeats) at {at}", count=down, **f)
                if rest is None else
                tr("ddp.group_mostly_slower_more", "mostly slower ({count} of {k} repeats) at {at}; {rest}",
                   count=down, **f))
    return (tr("ddp.group_unclear", "no clear difference at {at}", **f) if rest is None else
            tr("ddp.group_unclear_more", "no clear difference at {at}; {rest}", **f))


def _takeaway(by: dict, said: list[tuple], ideal: dict, n: int) -> str:
    """The summary's first line, from the verdicts (``said``: each group's arguments of :func:`_group`, in order) and
    the solo-step ideal (03): what the rest details."""
    groups = _group(*said[-1])
    for args in reversed(said[:-1]):
        groups = _group(*args, rest=groups)
    if not ideal:
        return tr("ddp.takeaway", "In short, {n} processes against 1: {groups}.", n=n, groups=groups)
    share = sorted(100 * by[b]["speedup"] / ideal[b] for b in ideal)
    span = f"{share[0]:.0f} %" if f"{share[0]:.0f}" == f"{share[-1]:.0f}" else f"{share[0]:.0f}–{share[-1]:.0f} %"
    return tr("ddp.takeaway_ideal", "In short, {n} processes against 1: {groups}. Where the solo-step ideal (below) is "
              "known ({known}), the median reached {span} of it.", n=n, groups=groups, known=_names(sorted(ideal)),
              span=span)


def thresholds_said(margin: float) -> tuple[str, str]:
    """The faster and slower thresholds as printed: ``1 + margin`` and ``1 / (1 + margin)`` (0.971 for 3%, not 0.97)
    (03)."""
    return f"{1 + margin:.2f}", f"{1 / (1 + margin):.3f}"


def _apart(x: float, thresholds: tuple[float, ...]) -> str:
    """``x`` with 2 decimals, or as many more (up to 5) as it takes to print it apart from each threshold at the
    same precision: a repeat at 1.0302 is above 1.03, printed 1.0302 (03)."""
    for d in range(2, 6):
        if all(f"{x:.{d}f}" != f"{t:.{d}f}" for t in thresholds):
            break
    return f"{x:.{d}f}"


def _batch_lines(r: dict, verdict: str, margin: float) -> list[str]:
    """One batch: median, interquartile range and range of the repeats, how many were faster, the verdict and why (03)."""
    s, med, n = r["speedups"], r["speedup"], r["processes"]
    q1, _, q3 = statistics.quantiles(s, n=4, method="inclusive") if len(s) > 1 else s * 3
    up, down, k = sum(x > 1 + margin for x in s), sum(x < 1 / (1 + margin) for x in s), len(s)
    hi, lo = thresholds_said(margin)
    ends = [_apart(x, (1 + margin, 1 / (1 + margin))) for x in (r["speedup_min"], r["speedup_max"])]
    head = tr("ddp.batch_head", "  batch {batch}: median {med}×, interquartile {q1}–{q3}×, all {low}–{high}×; "
              "faster in {up} of {k} repeats, slower in {down} of {k}", batch=r["global_batch"], med=f"{med:.2f}",
              q1=f"{q1:.2f}", q3=f"{q3:.2f}", low=ends[0], high=ends[1], up=up, down=down, k=k)
    if verdict == "faster":
        return [head, tr("ddp.verdict_faster", "    verdict: {n} processes faster than 1 in every repeat", n=n)]
    if verdict == "slower":
        return [head, tr("ddp.verdict_slower", "    verdict: {n} processes slower than 1 in every repeat", n=n)]
    if verdict == "mostly faster":
        return [head, tr("ddp.verdict_mostly_faster", "    verdict: {n} processes mostly faster than 1 (at least 3 in "
                         "4 repeats), not in every repeat: the lowest {low}×, not above {hi}×", n=n,
                         low=f"{r['speedup_min']:.3f}", hi=hi)]
    if verdict != "unclear":
        return [head, tr("ddp.verdict_mostly_slower", "    verdict: {n} processes mostly slower than 1 (at least 3 in "
                         "4 repeats), not in every repeat: the highest {high}×, not below {lo}×", n=n,
                         high=f"{r['speedup_max']:.3f}", lo=lo)]
    return [head, _unclear(med, up, down, k, margin)]


def _unclear(med: float, up: int, down: int, k: int, margin: float) -> str:
    """The verdict line of a batch with no clear difference, and why no stronger verdict (03)."""
    if down and not up:   # one way only: say which way it did not go
        return (tr("ddp.verdict_not_faster_one", "    verdict: not faster: none of the {k} repeats was faster; {got} "
                   "of {k} was slower, fewer than 3 in 4, so not mostly slower", k=k, got=down) if down == 1 else
                tr("ddp.verdict_not_faster", "    verdict: not faster: none of the {k} repeats was faster; {got} of "
                   "{k} were slower, fewer than 3 in 4, so not mostly slower", k=k, got=down))
    if up and not down:
        return (tr("ddp.verdict_not_slower_one", "    verdict: not slower: none of the {k} repeats was slower; {got} "
                   "of {k} was faster, fewer than 3 in 4, so not mostly faster", k=k, got=up) if up == 1 else
                tr("ddp.verdict_not_slower", "    verdict: not slower: none of the {k} repeats was slower; {got} of "
                   "{k} were faster, fewer than 3 in 4, so not mostly faster", k=k, got=up))
    if med > 1 + margin:
        return (tr("ddp.verdict_median_faster_one", "    verdict: no clear difference: the median says faster, "
                   "but {got} of {k} repeats was faster: fewer than 3 in 4", got=up, k=k) if up == 1 else
                tr("ddp.verdict_median_faster", "    verdict: no clear difference: the median says faster, but "
                   "{got} of {k} repeats were faster: fewer than 3 in 4", got=up, k=k))
    if med < 1 / (1 + margin):
        return (tr("ddp.verdict_median_slower_one", "    verdict: no clear difference: the median says slower, but "
                   "{got} of {k} repeats was slower: fewer than 3 in 4", got=down, k=k) if down == 1 else
                tr("ddp.verdict_median_slower", "    verdict: no clear difference: the median says slower, but "
                   "{got} of {k} repeats were slower: fewer than 3 in 4", got=down, k=k))
    return tr("ddp.verdict_within", "    verdict: no clear difference: the median is within {pct} % of 1×",
              pct=f"{100 * margin:.0f}")
