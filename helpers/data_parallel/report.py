"""Notebook 02's sentences generated from its measurements: each says what the numbers say (02)."""
from __future__ import annotations

import statistics

from ..core.device import hardware_label
from .instruments import LABELS, largest_batches
from .speed import MARGIN, _side, amdahl_cap

__all__ = ["throughput_lines", "amdahl_sentence", "processes_sentence", "memory_sentences"]


def throughput_lines(runs: dict, per_round: dict, baselines: dict) -> list[str]:
    """One line per way to use two workers: median samples/s, and each round against its baseline's same round (02).

    ``per_round[name]``: the ratios of ``runs[name]`` to ``runs[baselines[name]]`` round by round;
    a name without a baseline is one itself (one thread; one DDP process).
    """
    lines = []
    for name, v in runs.items():
        r, base = per_round.get(name), baselines.get(name)
        how = (f"a baseline; rounds {min(v):.0f}–{max(v):.0f} samples/s" if base is None else
               f"each round / that round's {LABELS.get(base, base)}: median {statistics.median(r):.2f}×, "
               f"rounds {min(r):.2f}–{max(r):.2f}×")
        lines.append(f"{LABELS.get(name, name):>30}: {statistics.median(v):8.0f} samples/s  ({how})")
    return lines


def amdahl_sentence(one_worker_seconds: dict, slower: bool) -> str:
    """Amdahl's bound for threading only the forward, from a one-thread pass's forward and backward times (02).

    The serial share is the backward's share of the one-worker pass (Amdahl's law starts from the
    serial run); the sentence says the bound covers a gain, not a loss.
    """
    share = one_worker_seconds["backward"] / (one_worker_seconds["forward"] + one_worker_seconds["backward"])
    cap = amdahl_cap(share)
    return (f"Amdahl's law: with the backward ({share:.0%} of section 3's one-thread pass) left on one thread, "
            f"threading the forward gains at most {cap:.2f}×. The law bounds a gain, not a loss"
            + (": the shortfall below 1× here is cost the threads add, not split up in this notebook (starting "
               "two threads every step, functional_call's parameter swaps and the GIL are candidates)" if slower else ""))


def processes_sentence(rounds: dict, single: list | None = None, margin: float = MARGIN) -> str:
    """How two DDP processes did against one, round by round in the same launch (02).

    ``rounds``: :func:`process_rounds`' samples/s, ``{1: [...], 2: [...]}``. Faster or slower only
    when every round is more than ``margin`` beyond 1× on that side, else no clear difference.
    ``single``: the one-thread rounds, to say where one DDP process stood against them.
    """
    ratios = [b / a for a, b in zip(rounds[1], rounds[2])]
    side = _side(ratios, margin)
    verdict = (f"{side} than one DDP process in every round, each by more than {margin:.0%}"
               if side != "no clear difference" else
               f"no clear difference from one DDP process (not every round more than {margin:.0%} on one side of 1×)")
    return (f"2 DDP processes vs 1 (one worker: one DDP process on the whole batch), round by round: "
            + ", ".join(f"{r:.2f}×" for r in ratios) + f": {verdict} ({hardware_label('cpu')})"
            + ("" if not single else
               f"\none DDP process ran at {statistics.median(rounds[1]) / statistics.median(single):.2f}× one thread's "
               "median (the same model, batch and SGD step; the process also runs DDP's gradient bucketing, and ran "
               "at other moments: not split up here)"))


def memory_sentences(budget: int, acc: dict, classes: int = 50_000, margin: float = MARGIN) -> list[str]:
    """The formula's largest batches for DataParallel and DDP, why they differ, and the same at ``classes`` (02)."""
    lim = largest_batches(budget, acc)
    dp, ddp, per, fixed = lim["data_parallel"], lim["ddp"], lim["per_sample"], lim["fixed"]
    ratio = ddp / dp if dp else float("inf")
    side = ("DDP fits more" if ratio > 1 + margin else "DDP fits fewer" if ratio < 1 - margin
            else f"about the same (within {margin:.0%})")
    row = acc["per_sample_extra_bytes"] - 8
    big = largest_batches(budget, acc, out_row_bytes=4 * classes)["per_sample"]
    return [f"predicted, with {budget:,} B per device: DataParallel's output device is full at a global batch of {dp}, "
            f"DDP at {ddp}: {side} ({ratio:.2f}×) in this budget",
            f"  fixed bytes: DataParallel's output device {fixed['data_parallel']:,} B, a DDP device {fixed['ddp']:,} B "
            f"(the difference: the flat copy of replica 0's gradients that the reduction makes)",
            f"  per sample of the global batch: DataParallel's output device {per['data_parallel']:,.0f} B, a DDP device "
            f"{per['ddp']:,.0f} B; close, because an output row here is {row} B ({row // 4} classes) against "
            f"{acc['per_sample_bytes'] - row:,.0f} B of saved activations",
            f"  with {classes:,} classes (exercise 2's model): {big['data_parallel']:,.0f} B against {big['ddp']:,.0f} B per "
            f"sample ({big['data_parallel'] / big['ddp']:.1f}×): the gathered outputs then decide"]
