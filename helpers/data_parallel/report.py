"""Notebook 02's sentences generated from its measurements: each says what the numbers say (02)."""
from __future__ import annotations

import statistics

from ..core.device import hardware_label
from .instruments import LABELS
from .speed import MARGIN, amdahl_cap

__all__ = ["throughput_lines", "amdahl_sentence", "processes_sentence"]


def throughput_lines(runs: dict, per_round: dict, proc: dict, pkey: str) -> list[str]:
    """One line per way to use two workers: median samples/s, and each round against that round's one thread (02).

    ``per_round``: every in-process way's ratios to the same round's ``single``; the processes
    (``pkey``, one run) are compared with one DDP process (``proc[1]``) timed the same way.
    """
    lines = []
    for name, v in runs.items():
        r = per_round.get(name)
        how = (f"one run; {proc[2] / proc[1]:.2f}× 1 DDP process, {proc[1]:.0f} samples/s" if name == pkey else
               f"the baseline; rounds {min(v):.0f}–{max(v):.0f} samples/s" if name == "single" else
               f"each round / that round's 1 thread: median {statistics.median(r):.2f}×, rounds {min(r):.2f}–{max(r):.2f}×")
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


def processes_sentence(proc: dict, margin: float = MARGIN) -> str:
    """How the two DDP processes did here against one DDP process timed the same way (within ``margin``: no
    clear difference) (02). Not ranked against the rounds above: those ran at other moments."""
    ratio = proc[2] / proc[1]
    side = "faster than" if ratio > 1 + margin else "slower than" if ratio < 1 - margin else "no clear difference from"
    return (f"2 DDP processes here: {ratio:.2f}× one DDP process timed the same way (one run each): {side} one "
            f"worker ({hardware_label('cpu')})")
