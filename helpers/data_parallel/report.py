"""Notebook 02's sentences generated from its measurements: each says what the numbers say (02)."""
from __future__ import annotations

import statistics

from ..core.device import hardware_label
from ..core.i18n import tr
from .instruments import LABELS
from .report_memory import memory_sentences
from .report_probe import probe_peak_sentence, probe_rule, probe_verdict, probe_vs_cut_sentence, verdict_rule
from .speed import MARGIN, _side, amdahl_cap

__all__ = ["throughput_lines", "amdahl_sentence", "processes_sentence", "memory_sentences",
           "probe_vs_cut_sentence", "probe_verdict", "probe_rule", "verdict_rule", "probe_peak_sentence"]


def throughput_lines(runs: dict, per_round: dict, baselines: dict) -> list[str]:
    """One line per way to use two workers: median samples/s, and against its baseline two ways (02).

    The ratio of the two medians of samples/s, and the median of the round-by-round ratios (each
    round against its baseline's same round); the two can differ. The rows' labels stay English in every edition:
    they are right-aligned, which Korean's double-width characters would misalign; what follows them is a message.

    ``per_round[name]``: the ratios of ``runs[name]`` to ``runs[baselines[name]]`` round by round;
    a name without a baseline is one itself (one thread; one DDP process).
    """
    lines, width = [], max(len(LABELS.get(n, n)) for n in runs)
    for name, v in runs.items():
        r, base = per_round.get(name), baselines.get(name)
        how = (tr("02.tp_baseline", "a baseline; rounds {lo}–{hi} samples/s", lo=f"{min(v):.0f}", hi=f"{max(v):.0f}")
               if base is None else
               tr("02.tp_ratio", "ratio of medians {ratio}×; each round / that round's {base}: median of per-round "
                  "ratios {median}×, rounds {lo}–{hi}×", base=LABELS.get(base, base),
                  ratio=f"{statistics.median(v) / statistics.median(runs[base]):.2f}",
                  median=f"{statistics.median(r):.2f}", lo=f"{min(r):.2f}", hi=f"{max(r):.2f}"))
        lines.append(f"{LABELS.get(name, name):>{width}}: {statistics.median(v):8.0f} samples/s  ({how})")
    return lines


def _amdahl_clauses(slower, above, short, below, over, under, measured, margin, where, rounds, cap) -> str:
    """The clauses after "The law bounds a gain, not a loss", each a message ending in the ones after it."""
    m, total, c = (f"{measured:.2f}" if measured is not None else ""), len(rounds or []), f"{cap:.3f}"
    more = ""
    if under:
        ls = ", ".join(f"{r:.3f}×" for r in under)
        more = (tr("02.amdahl_under_one", ". The forward-only threads' median here, {m}×, is above that bound "
                                          "({cap}×), but "
                   "{n} of the {total} rounds ({rounds}) lies at or below it: this run does not place the forward-only "
                   "threads against it{more}", m=m, cap=c, n=len(under), total=total, rounds=ls, more=more)
                if len(under) == 1 else
                tr("02.amdahl_under_many", ". The forward-only threads' median here, {m}×, is above that bound "
                                           "({cap}×), "
                   "but {n} of the {total} rounds ({rounds}) lie at or below it: this run does not place the "
                   "forward-only "
                   "threads against it{more}", m=m, cap=c, n=len(under), total=total, rounds=ls, more=more))
    if over:
        ls = ", ".join(f"{r:.3f}×" for r in over)
        more = (tr("02.amdahl_over_one", ". {n} of the {total} rounds ({rounds}) lies above that bound ({cap}×): the "
                                         "rounds "
                   "spread wider than the distance from 1× to the bound, so this run does not place the forward-only "
                   "threads against it{more}", n=len(over), total=total, rounds=ls, cap=c, more=more)
                if len(over) == 1 else
                tr("02.amdahl_over_many", ". {n} of the {total} rounds ({rounds}) lie above that bound ({cap}×): the "
                                          "rounds "
                   "spread wider than the distance from 1× to the bound, so this run does not place the forward-only "
                   "threads against it{more}", n=len(over), total=total, rounds=ls, cap=c, more=more))
    if below:
        more = tr("02.amdahl_below", ". The forward-only threads' median here, {m}×, is below that bound{more}",
                  m=m, more=more)
    if short:
        more = tr("02.amdahl_short", ". The forward-only threads' median here, {m}×, is below 1× (the rounds give no "
                  "verdict: not every round is more than {margin} below 1×); that shortfall is not explained in this "
                  "notebook (what the threads' step adds is not split up){more}", m=m, margin=f"{margin:.0%}",
                  more=more)
    if above:
        more = tr("02.amdahl_above", ". The forward-only threads' median here, {m}×, is above that bound: the bound "
                                     "takes "
                  "{where} pass, timed at another moment, as the work the threads share, each on a core of its own; "
                  "some "
                  "of that did not hold in these rounds (which part is not split up here){more}", m=m, where=where,
                  more=more)
    if slower:
        more = tr("02.amdahl_slower", ": the shortfall below 1× here is not explained in this notebook (what the "
                                      "threads' "
                  "step adds is not split up){more}", more=more)
    return more


def amdahl_sentence(one_worker_seconds: dict, slower: bool, measured: float | None = None,
                    margin: float = MARGIN, where: str = "section 3's", rounds: list[float] | None = None,
                    step_seconds: dict | None = None) -> str:
    """Amdahl's bound for threading only the forward, from a one-thread pass's forward and backward times (02).

    The serial share is the backward's share of the one-worker pass (Amdahl's law starts from the
    serial run); the sentence says the bound holds only if the backward keeps that time, covers a gain,
    not a loss, and leaves out the step's other serial work. ``measured``: the threads' median ratio;
    above the bound, the sentence says so; below 1×, that the shortfall is not explained (as with
    ``slower``); "below" the bound only from 1× up and more than ``margin`` below it.
    ``where``: whose one-thread pass the times are (a CPU pass, like the threads it is set beside).
    ``rounds``: the round-by-round ratios; where one lies above the bound while the median does not, or one at
    or below it while the median is above, the sentence says so and places the threads nowhere against the bound.
    ``step_seconds``: the threaded step's parts timed in turns with that pass (``time_four_steps``); with
    them the sentence says whether the backward kept its one-thread time there (within ``margin``: the
    bound's premise), and what two threads gained on the forward itself. Where the premise failed, the
    median is not set below the bound: the bound does not hold for that step.
    """
    share = one_worker_seconds["backward"] / (one_worker_seconds["forward"] + one_worker_seconds["backward"])
    where = {"section 3's": tr("02.where_section3", "section 3's"),   # the notebook's two, said as messages
             "the CPU simulation of section 3's": tr("02.where_cpu_sim", "the CPU simulation of section 3's")}.get(
        where, where)
    cap = amdahl_cap(share)
    under = [r for r in (rounds or []) if r <= cap] if measured is not None and measured > cap else []
    above = measured is not None and measured > cap and not under  # every round above it, not the median alone
    short = measured is not None and measured < 1 and not slower  # below 1× without an every-round verdict
    over = [r for r in (rounds or []) if r > cap] if not (above or under) else []
    held = abs(step_seconds["backward"] / one_worker_seconds["backward"] - 1) <= margin if step_seconds else True
    below = measured is not None and not slower and not short and measured < cap - margin and not over and held
    clause = _amdahl_clauses(slower, above, short, below, over, under, measured, margin, where, rounds, cap)
    fields = {"share": f"{share:.1%}", "where": where, "cap": f"{cap:.2f}", "clause": clause}
    if not step_seconds:
        return tr("02.amdahl", "Amdahl's law: with the backward ({share} of {where} one-thread forward+backward "
                               "pass, not "
                  "of the two-thread step) left on one thread, threading the forward gains at most {cap}× if the "
                  "backward "
                  "keeps that one-thread time (the law assumes the serial part unchanged; the step's other serial "
                  "work on "
                  "the main thread, scatter, replicate, gather, the SGD step, is not in it). The law bounds a gain, "
                  "not a "
                  "loss{clause}.", **fields)
    one, step = one_worker_seconds, step_seconds
    kept = (tr("02.amdahl_kept", ": it kept its one-thread time (within {margin}), the bound's premise",
               margin=f"{margin:.0%}")
            if held else tr("02.amdahl_failed", ": not its one-thread time, so the premise failed there and {cap}× "
                                                "is no "
                            "bound for that step", cap=f"{cap:.2f}"))
    return tr("02.amdahl_premise", "Amdahl's law: with the backward ({share} of {where} one-thread forward+backward "
                                   "pass, "
              "not of the two-thread step) left on one thread, threading the forward gains at most {cap}× if the "
              "backward "
              "keeps that one-thread time (the law assumes the serial part unchanged; the step's other serial work "
              "on the "
              "main thread, scatter, replicate, gather, the SGD step, is not in it). The law bounds a gain, not a "
              "loss{clause}. In {where} threaded step, timed in turns with that pass, the backward took {b_step} ms "
              "against {b_one} ms on one thread{kept}; the forward on two threads (apply) took {apply} ms against "
              "{f_one} "
              "ms on one thread: {gain}×, what the threads gained on the forward itself.", **fields,
              b_step=f"{1e3 * step['backward']:.1f}", b_one=f"{1e3 * one['backward']:.1f}", kept=kept,
              apply=f"{1e3 * step['apply']:.1f}", f_one=f"{1e3 * one['forward']:.1f}",
              gain=f"{one['forward'] / step['apply']:.2f}")


def processes_sentence(rounds: dict, margin: float = MARGIN, single: list[float] | None = None) -> str:
    """How two DDP processes did against one, round by round in the same launch (02).

    ``rounds``: :func:`process_rounds`' samples/s, ``{1: [...], 2: [...]}``. Faster or slower only
    when every round is more than ``margin`` beyond 1× on that side, else no clear difference.
    ``single``: the plain one thread's samples/s (no DDP); with it, both process medians are also
    set against its median (ratios of medians, timed at different moments).
    """
    ratios = [b / a for a, b in zip(rounds[1], rounds[2])]
    side, m, hw = _side(ratios, margin), f"{margin:.0%}", hardware_label("cpu")
    verdict = (tr("02.ddp_faster", "faster than one DDP process in every round, each by more than {margin} ({hw})",
                  margin=m, hw=hw) if side == "faster" else
               tr("02.ddp_slower", "slower than one DDP process in every round, each by more than {margin} ({hw})",
                  margin=m, hw=hw) if side == "slower" else
               tr("02.ddp_no_clear", "no clear difference from one DDP process (not every round more than {margin} on "
                  "one side of 1×) ({hw})", margin=m, hw=hw))
    said = ", ".join(f"{r:.3f}×" for r in ratios)
    if not single:
        return tr("02.ddp_rounds", "2 DDP processes vs 1 (one worker: one DDP process on the whole batch, a one-rank "
                                   "group "
                  "with the same hooks and buckets), round by round: {ratios}: {verdict}", ratios=said, verdict=verdict)
    plain, one, two = statistics.median(single), statistics.median(rounds[1]), statistics.median(rounds[2])
    return tr("02.ddp_rounds_plain", "2 DDP processes vs 1 (one worker: one DDP process on the whole batch, a one-rank "
              "group with the same hooks and buckets), round by round: {ratios}: {verdict}. Against the plain 1 thread "
              "(no DDP; ratios of medians, timed at different moments): one DDP process {one} samples/s = {r1}× its "
              "{plain}, two DDP processes {two} = {r2}×", ratios=said, verdict=verdict, one=f"{one:,.0f}",
              r1=f"{one / plain:.2f}", plain=f"{plain:,.0f}", two=f"{two:,.0f}", r2=f"{two / plain:.2f}")
