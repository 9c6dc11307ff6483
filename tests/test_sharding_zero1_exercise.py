"""Notebook 09's zero1_partition exercise: the rule passes, and plausible wrong partitions, hard-coded tables and calls
into the course are refused."""
from __future__ import annotations

import pytest

from helpers.core.checks import verify


def _right(numels, n):
    ranks = [0] * n
    for k in sorted(numels, reverse=True):
        ranks[ranks.index(min(ranks))] += k
    return ranks


def test_zero1_partition_exercise_accepts_the_rule():
    assert verify("09.zero1_partition", _right)[0]


def _even_split(numels, n):  # Ψ/N: what ZeroRedundancyOptimizer does not do
    return [sum(numels) // n + (i < sum(numels) % n) for i in range(n)]


def _in_order(numels, n):    # greedy, but without sorting first
    ranks = [0] * n
    for k in numels:
        ranks[ranks.index(min(ranks))] += k
    return ranks


def _ties_to_the_last(numels, n):  # sorted and greedy, but a tie goes to the highest rank
    ranks = [0] * n
    for k in sorted(numels, reverse=True):
        low = min(ranks)
        ranks[max(i for i, v in enumerate(ranks) if v == low)] += k
    return ranks


def _round_robin(numels, n):  # sorted, then dealt like cards: counts tensors, not elements
    ranks = [0] * n
    for i, k in enumerate(sorted(numels, reverse=True)):
        ranks[i % n] += k
    return ranks


_TABLE = {(tuple([262144] * 8 + [512] * 8), 3): [786432, 786432, 528384], ((10, 7, 7, 3, 1), 2): [14, 14],
          ((5, 5, 5, 5), 4): [5, 5, 5, 5], ((100, 1, 1, 1, 1, 1), 3): [100, 3, 2], ((8, 6, 4, 4, 2), 3): [8, 8, 8],
          ((3, 9, 1, 9), 2): [12, 10], ((4, 2), 5): [4, 2, 0, 0, 0], ((7,), 1): [7]}


def _table(numels, n):  # the fixed cases answered from a table, Ψ/N for anything else
    return _TABLE.get((tuple(numels), n)) or _even_split(numels, n)


def _calls_the_course(numels, n):
    from helpers.sharding.shares import _zero1_ranks
    return _zero1_ranks(numels, n)


def _through_the_calculator(numels, n):
    from helpers.sharding import largest_share
    from helpers.sharding import shares
    return shares._zero1_ranks(numels, n) if largest_share([(k,) for k in numels], n, "whole") else []


def _wraps_the_checks_rule(numels, n):  # the check's own copy of torch's rule, called from inside
    from helpers.sharding.lesson import _partition_rule
    return _partition_rule(numels, n)


@pytest.mark.parametrize("wrong", [_even_split, _in_order, _ties_to_the_last, _round_robin, _table, _calls_the_course,
                                   _through_the_calculator, _wraps_the_checks_rule])
def test_zero1_partition_exercise_refuses_plausible_wrong_answers(wrong):
    assert all(_right(list(k), n) == v for (k, n), v in _TABLE.items())   # the table is right where it answers
    ok, msg = verify("09.zero1_partition", wrong)
    assert not ok, wrong.__name__
