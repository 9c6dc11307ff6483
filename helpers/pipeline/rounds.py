"""Notebook 01's verdicts on two sets of timed rounds: faster, mostly faster or unclear, by the rounds themselves (01)."""
from __future__ import annotations

import functools
import itertools
import math
from typing import Sequence

from ..core.i18n import tr

ROUNDS_ALPHA = 0.05   # a "mostly" verdict needs a two-sided exact p-value below this (rounds_p)

__all__ = ["rounds_p", "rounds_side", "against_naive", "rounds_why", "verdict_word"]


def rounds_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided exact p of a Mann–Whitney test of rounds ``a`` against ``b`` (01): the share of all C(n_a + n_b, n_a)
    ways to deal the pooled rounds into groups of n_a and n_b whose rank sum lies at least as far from its mean as
    ``a``'s does (ties take their mean rank). Five rounds against five: 19 of the 25 pairs on one side give 56/252 = 0.22,
    23 of them 8/252 = 0.032 (Mann & Whitney 1947)."""
    return _rank_p(tuple(a), tuple(b))


@functools.lru_cache(maxsize=512)
def _rank_p(a: tuple, b: tuple) -> float:
    pooled = sorted(a + b)
    rank = {v: (pooled.index(v) + len(pooled) - pooled[::-1].index(v) + 1) / 2 for v in pooled}   # mean rank, 1-based
    ranks, n = [rank[v] for v in a + b], len(a) + len(b)
    mean = len(a) * (n + 1) / 2
    far = abs(sum(ranks[: len(a)]) - mean) - 1e-9
    hits = sum(abs(sum(ranks[i] for i in c) - mean) >= far for c in itertools.combinations(range(n), len(a)))
    return hits / math.comb(n, len(a))


def verdict_word(v: str) -> str:
    """A verdict of ``rounds_side`` (faster, mostly slower, unclear...) as the course says it (01)."""
    return {"faster": tr("01.faster", "faster"), "slower": tr("01.slower", "slower"),
            "mostly faster": tr("01.mostly_faster", "mostly faster"),
            "mostly slower": tr("01.mostly_slower", "mostly slower"), "unclear": tr("01.unclear", "unclear"),
            "more": tr("01.more", "more"), "less": tr("01.less", "less"),
            "mostly more": tr("01.mostly_more", "mostly more"), "mostly less": tr("01.mostly_less", "mostly less")}[v]


def _rounds(a: list[float], b: list[float]) -> tuple[str, tuple]:
    """``rounds_side``'s verdict and what its why is said from: ("apart",), ("touch", near, far) (printed),
    ("tie", k, n, p) or ("lean", side, k, n, p) (01)."""
    if max(a) < min(b) or min(a) > max(b):
        near, far = (max(a), min(b)) if max(a) < min(b) else (min(a), max(b))
        why: tuple = ("apart",)
        if round(1e3 * near) == round(1e3 * far):   # in whole ms the ranges would seem to touch: say by how little
            d = next((d for d in range(1, 5) if round(1e3 * near, d) != round(1e3 * far, d)), 4)
            why = ("touch", f"{1e3 * near:.{d}f}", f"{1e3 * far:.{d}f}")
        return ("faster" if max(a) < min(b) else "slower"), why
    n = len(a) * len(b)
    up, down = sum(x > y for x in a for y in b), sum(x < y for x in a for y in b)
    p = rounds_p(a, b)
    if up == down:
        return "unclear", ("tie", up, n, f"{p:.2g}")
    side, k = ("slower", up) if up > down else ("faster", down)
    return (("mostly " + side) if p < ROUNDS_ALPHA else "unclear"), ("lean", side, k, n, f"{p:.2g}")


def rounds_why(why: tuple, who: str | None = None, cost: bool = False) -> str:
    """``_rounds``' why, said: of steps, or (``cost``) of piece costs against m = 1's (more/less); ``who`` (a
    message) names the side a leaning pair count favours, where it is faster (01)."""
    if why[0] == "apart":
        return tr("01.rounds_apart", "the rounds do not overlap")
    if why[0] == "touch":
        return tr("01.rounds_touch", "the rounds do not overlap, though in whole ms they touch: {near} against {far} "
                                     "ms "
                  "at their closest", near=why[1], far=why[2])
    if why[0] == "tie":
        if cost:
            return tr("01.rounds_tie_m1", "the rounds overlap m = 1's; less and more in {k} of the {n} pairs of rounds "
                      "each, p-value {p}", k=why[1], n=why[2], p=why[3])
        return tr("01.rounds_tie", "the rounds overlap; faster and slower in {k} of the {n} pairs of rounds each, "
                  "p-value {p}", k=why[1], n=why[2], p=why[3])
    _, side, k, n, p = why
    if cost:
        return tr("01.rounds_lean_m1", "the rounds overlap m = 1's; {side} in {k} of the {n} pairs of rounds, "
                                       "p-value {p}",
                  side=verdict_word("more" if side == "slower" else "less"), k=k, n=n, p=p)
    said = verdict_word(side)
    if who is not None and side == "faster":
        said = tr("01.who_faster", "{who} faster", who=who)
    return tr("01.rounds_lean", "the rounds overlap; {side} in {k} of the {n} pairs of rounds, p-value {p}",
              side=said, k=k, n=n, p=p)


def rounds_side(a: list[float], b: list[float]) -> tuple[str, str]:
    """How step rounds ``a`` compare with ``b`` (01): faster/slower where the ranges do not overlap; where they do,
    mostly faster/slower where the pairs (a round of each) lean one way with a two-sided exact p-value below 0.05
    (``rounds_p``: with five rounds each, at least 23 of the 25 pairs); else unclear.

    Returns (verdict, why); a pairs count is rank-based, so one outlying round cannot decide it.
    """
    v, why = _rounds(a, b)
    return v, rounds_why(why)


def against_naive(row: dict, base: dict) -> str:
    """Faster or slower than the naive split (m = 1): by the rounds, ``rounds_side`` (01)."""
    v, why = rounds_side(row["step_rounds"], base["step_rounds"])
    return (tr("01.than_naive", "{verdict} than the naive split ({why})", verdict=verdict_word(v), why=why)
            if v != "unclear" else tr("01.naive_unclear", "no clear difference from the naive split ({why})", why=why))
