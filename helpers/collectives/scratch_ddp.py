"""DDP from scratch, checked and timed: the recipe's three versions against ``DistributedDataParallel`` (08).

Every version starts from the same parameters and trains on the same shares of the same batch;
after a few SGD steps its parameters must equal DDP's, and its step time is measured beside DDP's.
"""
from __future__ import annotations

import random
import statistics
from typing import Callable

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from ..core.i18n import tr
from ..core.measure import max_abs_diff
from ..core.models import MLP
from ..launching.launcher import launch
from ..launching.ranks import local_device
from ..launching.throughput import rank_share
from ..launching.timing import slowest_seconds_per_call
from .recipe import OverlappedDDP, allreduce_gradients, allreduce_gradients_bucketed, make_buckets

__all__ = ["VARIANTS", "MIN_ROUNDS", "scratch_model", "scratch_ddp_worker", "run_scratch_ddp", "paired_rounds",
           "compare_rounds", "ddp_verdict"]

VARIANTS = ("ddp", "per_parameter", "bucketed", "overlapped")


def scratch_model(hidden: tuple[int, ...] = (512, 512, 512), seed: int = 0) -> nn.Module:
    """The model DDP is rebuilt on: the course MLP on 8×8 digits, the same on every rank (08)."""
    torch.manual_seed(seed)
    return MLP(64, hidden, 10)


def _step_fn(variant: str, hidden: tuple[int, ...], bucket_bytes: int, lr: float, x: torch.Tensor,
             y: torch.Tensor, done: list[int] | None = None
             ) -> tuple[nn.Module, Callable[[], None], Callable[[], int | None]]:
    """The model of one variant, a function running one training step of it, and its all-reduces per step.

    The count: one per parameter with a gradient (per parameter), one per bucket (bucketed, overlapped:
    :func:`make_buckets`), and for DDP the buckets its reducer holds at the time asked (it rebuilds them
    after the first step; read through the private ``_get_zeros_like_grad_buckets``, None where absent).
    For the overlapped version, ``done`` (``[finished, started]``) adds up, at every step, how many of the
    all-reduces started during backward had already finished (``Work.is_completed()``) when backward returned.
    """
    dev = x.device
    model = scratch_model(hidden).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    net: nn.Module = model
    sync: Callable[[], None] = lambda: None  # noqa: E731
    trainable = [p for p in model.parameters() if p.requires_grad]
    count: Callable[[], int | None] = lambda: len(make_buckets(trainable, bucket_bytes))  # noqa: E731
    if variant == "ddp":
        net = DDP(model, device_ids=[dev.index] if dev.type == "cuda" else None)
        buckets = getattr(net.reducer, "_get_zeros_like_grad_buckets", None)
        count = (lambda: len(buckets())) if buckets else (lambda: None)  # noqa: E731
    elif variant == "per_parameter":
        sync = lambda: allreduce_gradients(model)  # noqa: E731
        count = lambda: len(trainable)  # noqa: E731
    elif variant == "bucketed":
        sync = lambda: allreduce_gradients_bucketed(model, bucket_bytes)  # noqa: E731
    elif variant == "overlapped":
        wrapped = OverlappedDDP(model, bucket_bytes)
        net = wrapped  # type: ignore[assignment]

        def sync() -> None:
            if done is not None:   # backward has returned: which of its all-reduces are already finished?
                done[0] += sum(work.is_completed() for work, _, _ in wrapped.pending)
                done[1] += len(wrapped.pending)
            wrapped.finish()
        count = lambda: len(wrapped.buckets)  # noqa: E731
    else:
        raise ValueError(f"unknown variant {variant!r}; choose from {VARIANTS}")

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(net(x), y).backward()
        sync()
        opt.step()

    return model, step, count


def scratch_ddp_worker(rank: int, world_size: int, variants: tuple[str, ...], hidden: tuple[int, ...], batch: int,
                       steps: int, timed_steps: int, repeats: int, bucket_bytes: int, lr: float) -> dict:
    """Train every variant ``steps`` SGD steps and compare with DDP; then time ``timed_steps`` steps of each (08).

    The variants' timings alternate within each of ``repeats`` rounds, in a fresh order each round
    (the slowest rank's time each):
    ``step_s`` keeps each variant's best round, so a burst of outside load does not decide it, and
    ``rounds`` every round's time, in order, so that two variants can be compared round by round.
    """
    dev = local_device()
    x, y = (t.to(dev) for t in rank_share(batch, world_size, rank))
    done = [0, 0]   # overlapped: all-reduces finished when backward returned, all-reduces started
    runs = {v: _step_fn(v, hidden, bucket_bytes, lr, x, y, done) for v in variants}
    params = {}
    for v, (model, step, _) in runs.items():
        for _ in range(steps):
            step()
        params[v] = [p.detach().cpu().clone() for p in model.parameters()]
    rounds: dict[str, list[float]] = {v: [] for v in variants}
    for k in range(repeats):   # a fresh order each round, seeded by k, so the same on every rank
        for v, (_, step, _) in random.Random(k).sample(list(runs.items()), len(runs)):
            rounds[v].append(slowest_seconds_per_call(step, timed_steps, dev))
    ref = params.get("ddp")
    return {"step_s": {v: min(ts) for v, ts in rounds.items()}, "rounds": rounds,
            "max_abs_diff": {v: max_abs_diff(p, ref) for v, p in params.items()} if ref else {},
            "parameters": sum(p.numel() for p in runs[variants[0]][0].parameters()),
            "all_reduces": {v: count() for v, (_, _, count) in runs.items()}, "steps": steps,
            "done_at_backward_end": tuple(done)}


def run_scratch_ddp(nprocs: int = 2, variants: tuple[str, ...] = VARIANTS, hidden: tuple[int, ...] = (512, 512, 512),
                    batch: int = 512, steps: int = 3, timed_steps: int = 5, repeats: int = 3,
                    bucket_bytes: int = 2**20, lr: float = 0.1, timeout: float = 180) -> dict:
    """DDP rebuilt three ways against DDP: parameters after ``steps`` steps and step times (08).

    Returns ``{"step_s": {variant: best round's s per step}, "rounds": {variant: every round's s per step},
    "max_abs_diff": {variant: vs DDP}, "ratio": {variant: best step / DDP's best}, "repeats", "timed_steps",
    "parameters", "all_reduces": {variant: all-reduces per step, after the timed steps}, "steps", "processes",
    "done_at_backward_end": (overlapped all-reduces already finished when backward returned, started), rank 0's,
    over all its steps}``;
    ``batch`` is global, split evenly over the ranks.
    """
    if "ddp" not in variants:
        raise ValueError("the comparison needs 'ddp' among the variants")
    if batch % nprocs:
        raise ValueError(f"batch ({batch}) must divide evenly over {nprocs} processes")
    res = launch(scratch_ddp_worker, nprocs, args=(tuple(variants), tuple(hidden), batch, steps, timed_steps, repeats,
                                                   bucket_bytes, lr), timeout=timeout, verbose=False)[0]
    res["ratio"] = {v: s / res["step_s"]["ddp"] for v, s in res["step_s"].items()}
    res.update(processes=nprocs, repeats=repeats, timed_steps=timed_steps)
    return res


MIN_ROUNDS = 6  # a direction seen in every one of k ≥ 6 paired rounds: sign test, two-sided p = 2 · 0.5^k ≤ 0.031


def paired_rounds(res: dict, a: str, b: str) -> list[float]:
    """Variant ``a``'s step time over ``b``'s, round by round: each pair timed back to back in the same round (08)."""
    return [x / y for x, y in zip(res["rounds"][a], res["rounds"][b])]


def _compare(res: dict, a: str, b: str) -> tuple[str, str]:
    """:func:`compare_rounds`, its verdict the English words the code compares ("faster than", ...), and which
    reason: "all" (every round agrees), "few" (too few rounds) or "disagree"."""
    q = sorted(paired_rounds(res, a, b))
    k = len(q)
    if k >= MIN_ROUNDS and (q[-1] < 1 or q[0] > 1):
        return ("faster than" if q[-1] < 1 else "slower than"), "all"
    return "not distinguishable from", "few" if k < MIN_ROUNDS else "disagree"


def _ratio_fields(res: dict, a: str, b: str) -> tuple[list[float], dict]:
    """The sorted per-round ratios of ``a`` over ``b``, and the fields that say them: k, a, b, lo, hi, median."""
    q = sorted(paired_rounds(res, a, b))
    return q, dict(k=len(q), a=a.replace("_", " "), b=b.replace("_", " "), lo=f"{q[0]:.2f}", hi=f"{q[-1]:.2f}",
                   median=f"{statistics.median(q):.2f}")


def _why(res: dict, a: str, b: str, reason: str) -> str:
    """Why :func:`compare_rounds` says what it says, with the per-round ratios' range and median: one message per
    reason, the range inside it (a message of its own would match any line that holds it)."""
    q, f = _ratio_fields(res, a, b)
    if reason == "all":
        return tr("collectives.rounds_all", "in all {k} rounds ({a}/{b} per round ×{lo}–×{hi}, median ×{median})",
                  **f)
    if reason == "few":
        return tr("collectives.rounds_few", "only {k} rounds, fewer than the {min} a sign test needs ({a}/{b} per "
                  "round ×{lo}–×{hi}, median ×{median})", min=MIN_ROUNDS, **f)
    return tr("collectives.rounds_disagree", "the rounds disagree: {a} faster in {faster} of {k} ({a}/{b} per round "
              "×{lo}–×{hi}, median ×{median})", faster=sum(x < 1 for x in q), **f)


def _verdict_said(verdict: str) -> str:
    """A verdict of :func:`_compare` as the student reads it, in the course's language."""
    if verdict == "faster than":
        return tr("collectives.faster_than", "faster than")
    if verdict == "slower than":
        return tr("collectives.slower_than", "slower than")
    return tr("collectives.not_distinguishable", "not distinguishable from")


def compare_rounds(res: dict, a: str, b: str) -> tuple[str, str]:
    """``a`` against ``b`` from their paired rounds (08): ("faster than" | "slower than" | "not distinguishable from",
    why).

    A direction is said only when every round agrees on it and there are at least :data:`MIN_ROUNDS`
    rounds (were the two the same, every round of k agreeing by chance has probability 2 · 0.5^k,
    the sign test's p); otherwise the two are not distinguishable in this run. ``why`` gives the
    per-round ratios' range and median, so the size of a difference is read beside its sign. Both are
    said in the course's language (the verdict too: compare :func:`ddp_verdict`'s lines, not these words).
    """
    verdict, reason = _compare(res, a, b)
    return _verdict_said(verdict), _why(res, a, b, reason)


def _pair_line(res: dict, a: str, verdict: str, b: str, reason: str) -> str:
    """One line of :func:`ddp_verdict`: ``a`` against ``b``, one whole message per verdict and reason."""
    q, f = _ratio_fields(res, a, b)
    if verdict == "faster than":
        return tr("collectives.pair_faster", "  {a} faster than {b}: in all {k} rounds ({a}/{b} per round ×{lo}–×{hi}, "
                  "median ×{median})", **f)
    if verdict == "slower than":
        return tr("collectives.pair_slower", "  {a} slower than {b}: in all {k} rounds ({a}/{b} per round ×{lo}–×{hi}, "
                  "median ×{median})", **f)
    if reason == "few":
        return tr("collectives.pair_same_few", "  {a} not distinguishable from {b}: only {k} rounds, fewer than the "
                  "{min} a sign test needs ({a}/{b} per round ×{lo}–×{hi}, median ×{median})", min=MIN_ROUNDS, **f)
    return tr("collectives.pair_same_disagree", "  {a} not distinguishable from {b}: the rounds disagree: {a} faster "
              "in {faster} of {k} ({a}/{b} per round ×{lo}–×{hi}, median ×{median})", faster=sum(x < 1 for x in q), **f)


def ddp_verdict(res: dict) -> str:
    """Overlap vs buckets alone, buckets vs one all-reduce per parameter, judged round by round (08).

    Each round times every variant in turn, in a fresh order each round, so two variants are compared by
    their ratio within each round (:func:`compare_rounds`); a direction is said only when every round, and enough
    of them, agree.
    """
    said, verdicts = [], {}
    for a, b in (("overlapped", "bucketed"), ("bucketed", "per_parameter")):
        verdicts[a, b], reason = _compare(res, a, b)
        said.append(_pair_line(res, a, verdicts[a, b], b, reason))
    k = len(res["rounds"]["ddp"])
    lines = [tr("collectives.rounds_here", "here, {k} rounds of {steps} steps, each round timing every variant in a "
                "fresh order; a direction is said only when all {k} rounds agree:", k=k,
                steps=res.get('timed_steps', '?'))] + said
    if "faster than" not in verdicts.values():
        lines.append(tr("collectives.no_benefit", "so in this run neither bucketing nor overlap shows a benefit that "
                        "every round agrees on"))
    overlap = verdicts["overlapped", "bucketed"]
    if overlap != "faster than":
        lines.append(tr("collectives.overlap_slower", "overlap made the step slower here") if overlap == "slower than"
                     else tr("collectives.overlap_not_faster", "overlap did not make the step faster in a way every "
                             "round agrees on"))
    lines.append(tr("collectives.overlap_two_ways", "overlapped differs from bucketed mainly in two ways: it starts "
                    "each bucket's all-reduce during backward, and it keeps all its buckets' all-reduces in flight at "
                    "once (async_op=True) where bucketed waits for each in turn (besides the Python cost of its "
                    "per-parameter hooks and bookkeeping); whole-step times do not say which of these made a "
                    "difference"))
    if "done_at_backward_end" in res:
        finished, started = res["done_at_backward_end"]
        lines.append(tr("collectives.done_during", "when backward returned, {finished} of the overlapped version's "
                        "{started} all-reduces (rank 0, all its steps) had already finished, so those ran during "
                        "backward", finished=finished, started=started) if finished else
                     tr("collectives.none_during", "when backward returned, {finished} of the overlapped version's "
                        "{started} all-reduces (rank 0, all its steps) had already finished: none finished during "
                        "backward (they may still have started during it)", finished=finished, started=started))
    m = len(res["rounds"]) - 1 + len(said)   # each variant against DDP above, and the two comparisons here
    lines.append(tr("collectives.sign_test_p", "a direction claimed from {k} agreeing rounds has p = 2 · 0.5^{k} = {p} "
                    "were the two the same; with {m} comparisons, one chance direction among them has probability up "
                    "to {m} × {p} = {pm}; and rounds on a shared machine are not independent, so these p are a guide, "
                    "not exact", k=k, p=f"{2 * 0.5 ** k:.3f}", m=m, pm=f"{m * 2 * 0.5 ** k:.2f}"))
    return "\n".join(lines)
