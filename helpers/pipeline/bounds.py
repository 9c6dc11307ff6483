"""Notebook 01's step against the bound: each stage's measured cost, the bound it gives, a step above it and why (01).

Each line is drawn from the step's own recorded events (``compute_rounds``: each stage's summed
forward and backward seconds in every timed round) and said with the spread of the rounds.
"""
from __future__ import annotations

import statistics

__all__ = ["stage_costs", "compute_ms", "head_share", "stage_bound", "bound_step", "against_bound",
           "backward_products", "forward_products", "compute_s"]


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
