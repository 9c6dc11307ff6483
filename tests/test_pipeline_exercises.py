"""Notebook 01's exercises: the 1F1B check passes 1F1B on any draw and refuses plausible wrong orders; the number
exercises."""
import itertools
import random

import pytest


# --- exercise 4: one_f_one_b(m, p, stage), judged by rule on varied pipelines -----------------------------------

def _ref_1f1b(m, p, s):
    """1F1B written here for the tests only (the notebook's check holds rules, not this)."""
    warm = min(p - s - 1, m)
    order = [f"F{i}" for i in range(warm)]
    for i in range(m - warm):
        order += [f"F{warm + i}", f"B{i}"]
    return order + [f"B{i}" for i in range(m - warm, m)]


def _gpipe(m, p, s):
    return [f"F{i}" for i in range(m)] + [f"B{i}" for i in range(m)]


def _table_of(cases):
    table = {c: _ref_1f1b(*c) for c in cases}
    return lambda m, p, s: table.get((m, p, s)) or _gpipe(m, p, s)


def _warm_up(count):
    def order(m, p, s):
        warm = count(m, p, s)
        out = [f"F{i}" for i in range(warm)]
        for i in range(m - warm):
            out += [f"F{warm + i}", f"B{i}"]
        return out + [f"B{i}" for i in range(m - warm, m)]
    return order


WRONG_1F1B = {
    "a table of the six cases the old check tried": _table_of([(4, 2, 0), (4, 2, 1), (6, 4, 0), (6, 4, 3), (8, 4, 1), (3, 4, 0)]),
    "a table of every stage for p <= 4, m <= 8": _table_of([(m, p, s) for p in range(1, 5) for m in range(1, 9)
                                                             for s in range(p)]),
    "GPipe's order (all forwards, then all backwards)": _gpipe,
    "one forward, one backward from the start (no warm-up)": lambda m, p, s: sum(([f"F{i}", f"B{i}"] for i in range(m)), []),
    "warm-up of p - s forwards (one too many)": _warm_up(lambda m, p, s: min(p - s, m)),
    "warm-up of p - s - 1 without min(., m)": _warm_up(lambda m, p, s: p - s - 1),
    "warm-up counted from the wrong end (s forwards)": _warm_up(lambda m, p, s: min(s, m)),
    "the same warm-up p - 1 on every stage": _warm_up(lambda m, p, s: min(p - 1, m)),
    "the right order for stage 0 on every stage": lambda m, p, s: _ref_1f1b(m, p, 0),
}


@pytest.mark.parametrize("name", WRONG_1F1B)
def test_the_1f1b_check_refuses_plausible_wrong_orders(name):
    from helpers.pipeline.lesson import _one_f_one_b_behaviour
    for seed in range(20):
        assert _one_f_one_b_behaviour(WRONG_1F1B[name], random.Random(seed)), f"{name} passed with seed {seed}"


def test_the_1f1b_check_passes_1f1b_on_any_draw_and_through_check():
    from helpers.core.checks import verify
    from helpers.pipeline.lesson import _one_f_one_b_behaviour
    for seed in range(30):
        assert _one_f_one_b_behaviour(_ref_1f1b, random.Random(seed)) is None
    assert verify("01.one_f_one_b", _ref_1f1b)[0]
    assert verify("01.one_f_one_b", lambda m, p, s: [x.lower() for x in _ref_1f1b(m, p, s)])[0]  # 'f0' reads as F0
    ok, msg = verify("01.one_f_one_b", _gpipe)
    assert not ok and "holds 4 micro-batches" in msg


def test_the_1f1b_check_tries_cases_beyond_a_short_table():
    from helpers.pipeline.lesson import _one_f_one_b_behaviour
    seen = set()
    def spy(m, p, s):
        seen.add((m, p))
        return _ref_1f1b(m, p, s)
    for seed in range(5):
        _one_f_one_b_behaviour(spy, random.Random(seed))
    assert any(p > 4 for _, p in seen) and any(m > 8 for m, _ in seen) and any(m < p for m, p in seen)
    assert len(seen) > 30


def test_the_1f1b_rules_admit_only_1f1b():
    """Every order meeting the per-stage rules, on every stage at once: only 1F1B finishes in GPipe's time."""
    from helpers.pipeline.lesson import _one_stage_problem, _pipeline_problem

    def orders(m, cap):
        out = []
        def grow(f, b, seq, live):
            if f == b == m:
                out.append(list(seq))
            if f < m and live < cap:
                grow(f + 1, b, seq + [f"F{f}"], live + 1)
            if b < f:
                grow(f, b + 1, seq + [f"B{b}"], live - 1)
        grow(0, 0, [], 0)
        return out

    for p in range(1, 5):
        for m in range(1, 5):
            per_stage = [orders(m, m) for _ in range(p)]  # every in-order interleaving; the rules then judge
            per_stage = [[o for o in os if _one_stage_problem(o, m, p, s) is None] for s, os in enumerate(per_stage)]
            passing = [c for c in itertools.product(*per_stage) if _pipeline_problem([list(o) for o in c], m, p) is None]
            assert passing == [tuple(_ref_1f1b(m, p, s) for s in range(p))], (m, p, len(passing))


def _gpipe_idle_of_stage0(m, cost0, cost1):
    """GPipe on two stages, messages free, each box as soon as its input and its stage allow (test only)."""
    t, f0 = 0, []
    for _ in range(m):
        t += cost0
        f0.append(t)
    t1 = 0
    for i in range(m):
        t1 = max(t1, f0[i]) + cost1
    b1 = [t1 + cost1 * (i + 1) for i in range(m)]
    t0 = f0[-1]
    for i in range(m):
        t0 = max(t0, b1[i]) + cost0
    return 1 - 2 * m * cost0 / t0


@pytest.mark.parametrize("exercise, right, wrong", [
    # a slow stage 1: the equal-stage formula (0.2), stage 1's idle share, stage 0's busy share, (p − 1)/m
    ("01.bubble_slow_stage", _gpipe_idle_of_stage0(4, 1, 2), [0.2, 1 / 9, 8 / 18, 0.25, 0.5, 1 / 3]),
    # step(m = 4) / step(m = 8), p = 4: slot counts without the shrinking slots, m doubled, speedup differences
    ("01.ideal_p4_m8", (7 / 4) / (11 / 8), [2, 11 / 7, 7 / 11, 32 / 11 - 16 / 7, 32 / 11, 16 / 7, 1.28]),
    # smallest m dividing 64 with min(m, p − s) · 64/m ≤ 10 rows on stage 2: one micro-batch held (8), stage 0's
    # p − s = 4 (32), ceilings that do not divide 64 (7, 13), the rows or micro-batches themselves, GPipe's m (64)
    ("01.peak_1f1b_stage2", min(m for m in (1, 2, 4, 8, 16, 32, 64) if min(m, 2) * 64 // m <= 10),
     [8, 32, 7, 13, 12, 10, 2, 4, 64, 6]),
])
def test_the_number_exercises_accept_the_rule_and_refuse_plausible_wrong_answers(exercise, right, wrong):
    from helpers.core.checks import verify
    assert verify(exercise, right)[0]
    for w in wrong:
        assert not verify(exercise, w)[0], w
