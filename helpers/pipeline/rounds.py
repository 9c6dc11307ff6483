"""Notebook 01's verdicts on two sets of timed rounds: faster, mostly faster or unclear, by the rounds themselves (01)."""
from __future__ import annotations

import functools
import itertools
import math
from typing import Sequence

ROUNDS_ALPHA = 0.05   # a "mostly" verdict needs a two-sided exact p-value below this (rounds_p)

__all__ = ["rounds_p", "rounds_side", "against_naive"]


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


def rounds_side(a: list[float], b: list[float]) -> tuple[str, str]:
    """How step rounds ``a`` compare with ``b`` (01): faster/slower where the ranges do not overlap; where they do,
    mostly faster/slower where the pairs (a round of each) lean one way with a two-sided exact p-value below 0.05
    (``rounds_p``: with five rounds each, at least 23 of the 25 pairs); else unclear.

    Returns (verdict, why); a pairs count is rank-based, so one outlying round cannot decide it.
    """
    if max(a) < min(b) or min(a) > max(b):
        near, far = (max(a), min(b)) if max(a) < min(b) else (min(a), max(b))
        why = "the rounds do not overlap"
        if round(1e3 * near) == round(1e3 * far):   # in whole ms the ranges would seem to touch: say by how little
            d = next((d for d in range(1, 5) if round(1e3 * near, d) != round(1e3 * far, d)), 4)
            why += f", though in whole ms they touch: {1e3 * near:.{d}f} against {1e3 * far:.{d}f} ms at their closest"
        return ("faster" if max(a) < min(b) else "slower"), why
    n = len(a) * len(b)
    up, down = sum(x > y for x in a for y in b), sum(x < y for x in a for y in b)
    p = rounds_p(a, b)
    if up == down:
        return "unclear", f"the rounds overlap; faster and slower in {up} of the {n} pairs of rounds each, p-value {p:.2g}"
    side, k = ("slower", up) if up > down else ("faster", down)
    return (("mostly " + side) if p < ROUNDS_ALPHA else "unclear"), \
        f"the rounds overlap; {side} in {k} of the {n} pairs of rounds, p-value {p:.2g}"


def against_naive(row: dict, base: dict) -> str:
    """Faster or slower than the naive split (m = 1): by the rounds, ``rounds_side`` (01)."""
    v, why = rounds_side(row["step_rounds"], base["step_rounds"])
    return (f"{v} than the naive split ({why})" if v != "unclear" else
            f"no clear difference from the naive split ({why})")
