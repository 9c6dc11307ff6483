"""Notebook 01's library schedules against the hand-written GPipe: the lines and the table it prints (01)."""
from __future__ import annotations

from ..core.i18n import tr
from .rounds import _rounds, against_naive, rounds_side, rounds_why, verdict_word

__all__ = ["library_table", "library_lines"]


def library_lines(lib: list[dict], hand: list[dict]) -> str:
    """The library's step times with their rounds, each against the library's GPipe at m = 1, beside the hand-written GPipe (01).

    ``Schedule1F1B`` refuses fewer micro-batches than stages, so 1F1B has no m = 1 of its own: its
    speedups, like GPipe's, are over the library's ``ScheduleGPipe`` step at m = 1. Both
    implementations time the same parts (zero_grad, the schedule's step, the SGD update), in
    separate launches; inside its step the library also splits the batch and divides the
    gradients by m (``scale_grads=True``), where ``gpipe_step`` chunks the batch and divides each loss by m.
    """
    base = next(r for r in lib if r["schedule"] == "gpipe" and r["microbatches"] == 1)
    hand_by_m = {r["microbatches"]: r for r in hand}
    lines = []
    for r in lib:
        lo, hi = r["step_range"]
        said = dict(schedule=f"{r['schedule']:>5}", m=r["microbatches"], ms=1e3 * r["step_s"], lo=1e3 * lo, hi=1e3 * hi,
                    speedup=r["speedup"], eff=r["efficiency"])
        lines.append(tr("01.lib_line", "library {schedule} m = {m}: {ms:.0f} ms (rounds {lo:.0f}–{hi:.0f}), "
                                       "{speedup:.2f}×, "
                        "{eff:.0%} of the ideal", **said) if r is base else
                     tr("01.lib_line_vs", "library {schedule} m = {m}: {ms:.0f} ms (rounds {lo:.0f}–{hi:.0f}), "
                        "{speedup:.2f}×, {eff:.0%} of the ideal: {against}", against=against_naive(r, base), **said))
    if any(r["schedule"] == "1f1b" for r in lib) and \
            not any(r["schedule"] == "1f1b" and r["microbatches"] == 1 for r in lib):
        lines.append(tr("01.lib_no_m1", "1F1B has no m = 1 row: Schedule1F1B refuses fewer micro-batches than stages "
                        "(m ≥ p = 2); its speedups are over the library's GPipe at m = 1 (one micro-batch: no "
                        "pipelining "
                        "either way)"))
    gp = {r["microbatches"]: r for r in lib if r["schedule"] == "gpipe"}
    both = [m for m in sorted(hand_by_m) if m in gp]
    if both:
        lines += [tr("01.lib_vs_hand", "GPipe, library against hand-written: step ms (rounds) and efficiency, each "
                                       "over "
                     "its own m = 1;"),
                  tr("01.lib_vs_hand_parts", "the same schedule and timed parts (zero_grad, the step, the SGD update), "
                     "separate launches (at m = 1 neither pipelines):")]
        for m in both:
            lib_r, hw = gp[m], hand_by_m[m]
            (llo, lhi), (hlo, hhi) = lib_r["step_range"], hw["step_range"]
            v, info = _rounds(lib_r["step_rounds"], hw["step_rounds"])
            who = tr("01.library", "library")
            if v.endswith("slower") or (info[0] == "lean" and info[1] == "slower"):   # said from the faster side
                who, (v, info) = tr("01.hand_written", "hand-written"), _rounds(hw["step_rounds"], lib_r["step_rounds"])
            verdict = (tr("01.no_clear", "no clear difference ({why})", why=rounds_why(info, who=who)) if v == "unclear"
                       else tr("01.who_side", "{who} {verdict} ({why})", who=who, verdict=verdict_word(v),
                               why=rounds_why(info)))
            lines.append(tr("01.lib_hand_line", "  m = {m}: library {l:.0f} ({llo:.0f}–{lhi:.0f}) {le:.0%}, "
                                                "hand-written "
                            "{h:.0f} ({hlo:.0f}–{hhi:.0f}) {he:.0%}: "
                            "{verdict}", m=m, l=1e3 * lib_r["step_s"], llo=1e3 * llo,
                            lhi=1e3 * lhi, le=lib_r["efficiency"], h=1e3 * hw["step_s"], hlo=1e3 * hlo, hhi=1e3 * hhi,
                            he=hw["efficiency"], verdict=verdict))
        lines.append(_largest_gap_line(gp, hand_by_m, both, lib))
    differ = ""
    for r in (r for r in lib if r["schedule"] == "1f1b" and r["microbatches"] in gp):
        g = gp[r["microbatches"]]
        v, why = rounds_side(r["step_rounds"], g["step_rounds"])
        side = (tr("01.no_clear", "no clear difference ({why})", why=why) if v == "unclear" else
                tr("01.f1b_side", "1F1B {verdict} ({why})", verdict=verdict_word(v), why=why))
        lines.append(tr("01.f1b_vs_gpipe", "1F1B against GPipe at m = {m}: {a:.0f} against {b:.0f} ms: {side}",
                        m=r["microbatches"], a=1e3 * r["step_s"], b=1e3 * g["step_s"], side=side))
        if v != "unclear":
            differ = (tr("01.f1b_differ_more", "{before}, m = {m} ({verdict})", before=differ, m=r["microbatches"],
                         verdict=verdict_word(v)) if differ else
                      tr("01.f1b_differ_item", "m = {m} ({verdict})", m=r["microbatches"], verdict=verdict_word(v)))
    if any(r["schedule"] == "1f1b" and r["microbatches"] in gp for r in lib):
        lines.append(tr("01.f1b_differed", "1F1B differed from GPipe by the rounds at {at}: this notebook does not "
                                           "time "
                        "what made the difference", at=differ) if differ else
                     tr("01.f1b_no_difference", "1F1B against GPipe: no clear difference at any m"))
    return "\n".join(lines)


def _largest_gap_line(gp: dict, hand_by_m: dict, both: list[int], lib: list[dict]) -> str:
    """Where the library's GPipe and the hand-written one differed most, by their efficiencies, and what this run says
    of it: the rounds' verdict, the library's 1F1B at that m, and that the library's steps are timed whole (01)."""
    m = max(both, key=lambda k: abs(gp[k]["efficiency"] - hand_by_m[k]["efficiency"]))
    lib_r, hw = gp[m], hand_by_m[m]
    v, why = rounds_side(lib_r["step_rounds"], hw["step_rounds"])
    one = next((r for r in lib if r["schedule"] == "1f1b" and r["microbatches"] == m), None)
    said = dict(m=m, l=1e3 * lib_r["step_s"], le=lib_r["efficiency"], h=1e3 * hw["step_s"], he=hw["efficiency"])
    line = (tr("01.lib_gap_head_f1b", "largest difference in efficiency: m = {m}, library GPipe {l:.0f} ms ({le:.0%}) "
               "against hand-written {h:.0f} ms ({he:.0%}); the library's 1F1B took {o:.0f} ms at that m",
               o=1e3 * one["step_s"], **said) if one else
            tr("01.lib_gap_head", "largest difference in efficiency: m = {m}, library GPipe {l:.0f} ms ({le:.0%}) "
                                  "against "
               "hand-written {h:.0f} ms ({he:.0%})", **said))
    if v == "unclear":
        b_lib, b_hw = gp[min(both)], hand_by_m[min(both)]
        apart = [k for k in both if not rounds_side(gp[k]["step_rounds"], hand_by_m[k]["step_rounds"])[0]
                 .startswith(("unclear", "mostly"))]
        base_ms = round(1e3 * b_lib["step_s"]), round(1e3 * b_hw["step_s"])
        only = min(both) not in apart   # 01's read 21: baselines apart by their medians only are no difference
        tail = tr("01.lib_gap_unclear", "the rounds do not set the two steps apart")
        if base_ms[0] != base_ms[1]:
            said = dict(before=tail, m0=min(both), a=base_ms[0], b=base_ms[1])
            tail = (tr("01.lib_gap_only", "{before}; each efficiency divides by its own m = {m0} step, and those "
                                          "differ by "
                       "their medians only (library {a} ms, hand-written {b} ms; their rounds do not set them apart "
                       "either, "
                       "printed above): this run does not set the two efficiencies apart", **said) if only else
                    tr("01.lib_gap_differ", "{before}; each efficiency divides by its own m = {m0} step, and those "
                                            "differ "
                       "(library {a} ms, hand-written {b} ms)", **said))
        if apart:
            tail = tr("01.lib_gap_apart", "{before}; by the rounds the steps themselves differed at m = {ms} (printed "
                      "above)", before=tail, ms=", ".join(map(str, apart)))
    elif v.startswith("mostly"):
        tail = tr("01.lib_gap_mostly", "the library {verdict} by the pairs of rounds ({why}: a weak call), not set "
                                       "apart; "
                  "this run, which times the library's steps only whole, leaves the cause unexplained",
                  verdict=verdict_word(v), why=why)
    else:
        tail = tr("01.lib_gap_set", "the rounds set the two steps apart, and this run, which times the library's steps "
                  "only whole, leaves the cause unexplained")
    return line + "\n" + tr("01.lib_gap_second", "  (each efficiency is over its own m = 1; the rounds compare the two "
                            "m = {m} steps): {tail}", m=m, tail=tail)


def library_table(rows: list[dict]) -> str:
    """``torch.distributed.pipelining``'s schedules against the unsplit model: the micro-batches each stage
    held at its peak, and the largest differences of loss and gradients (01)."""
    lines = [f"{'schedule':>8} {'m':>2} {'peak held (stage 0, 1)':>23} {'loss diff':>9} {'grad diff':>9}"]
    for r in rows:
        lines.append(f"{r['schedule']:>8} {r['microbatches']:>2} {str(r['peak_live']):>23} {r['loss_diff']:>9.0e} "
                     f"{r['grad_max_abs_diff']:>9.0e}")
    return "\n".join(lines)
