"""The lines under notebook 01's measured-vs-ideal table (``gpipe_table``): its key and, where it occurs, why an
efficiency above 1.00 is read with care (01)."""
from __future__ import annotations

from .bounds import _slowdown, compute_ms
from ..core.i18n import tr

__all__: list[str] = []


def _key_line(rows: list[dict], staged: bool) -> str:
    """``gpipe_table``'s key: what each column is; with the bound's two columns where ``staged`` (01)."""
    if not staged:
        return tr("01.gt_key", "key: speedup = the m = 1 median step ÷ this m's; ideal (equal stages) = 2m/(m + 1); "
                  "efficiency = speedup ÷ ideal; bubble (model) = (p − 1)/(m + p − 1), each stage's idle share in "
                  "GPipe's model")
    return tr("01.gt_key_staged", "key: speedup = the m = 1 median step ÷ this m's; ideal (equal stages) = "
              "2m/(m + 1); efficiency = speedup ÷ ideal; bound (these stages) = the best speedup of m = 1's compute "
              "with the two stages' measured costs (a ratio of compute times, the speedup one of whole steps); "
              "against it = the bound's step (compute alone: m = 1's compute, {c1:.1f} ms of its {step:.1f} ms step, "
              "÷ bound) ÷ the measured step; at m = 1 the compute's median over the step's median, each over the "
              "rounds (m = 1's compute: each round's four parts summed, then the median); bubble (model) = "
              "(p − 1)/(m + p − 1), each stage's idle share in GPipe's model",
              c1=compute_ms(rows[0]), step=1e3 * rows[0]["step_s"])


def _over_line(rows: list[dict], over: list[int], staged: bool) -> str:
    """``gpipe_table``'s line where an efficiency is above 1.00 (m in ``over``): what was measured beside it (01)."""
    ms = ", ".join(map(str, over))
    if not staged:
        return tr("01.gt_over", "efficiency above 1.00 at m = {ms} by the medians (an m above the tighter bound with "
                  "these stages' costs, if any, is judged by its rounds in section 3's last line); measured beside "
                  "it, not offered as its cause: section 4 measures the pieces' cost", ms=ms)
    base = rows[0]
    took = ""
    for r in reversed([r for r in rows[1:] if r["microbatches"] in over]):   # from the last item: each item a message
        item = dict(k=_slowdown(r, base), m=r["microbatches"])   # ending in the ones after it, said again one by one
        took = (tr("01.gt_took_then", "×{k:.2f} m = 1's compute time at m = {m}, {rest}", rest=took, **item)
                if took else tr("01.gt_took", "×{k:.2f} m = 1's compute time at m = {m}", **item))
    said = dict(ms=ms, diff=f"{round(1e3 * base['step_s'], 1) - compute_ms(base):.1f}", took=took)
    if "message_s" not in base:
        return tr("01.gt_over_staged", "efficiency above 1.00 at m = {ms} by the medians (an m above the tighter "
                  "bound with these stages' costs, if any, is judged by its rounds in section 3's last line); "
                  "measured beside it, not offered as its cause: m = 1's median step exceeds its compute's median by "
                  "{diff} ms (a difference of medians, not one round's time: section 4 takes it round by round); "
                  "inside the step the pieces took {took} (section 4 prints each part)", **said)
    out_ms = round(round(1e3 * base["step_s"], 1) - compute_ms(base), 1)
    msg_ms = round(2e3 * min(base["message_s"]), 1)
    said.update(kib=base["message_bytes"] // 1024, msg=msg_ms)
    if msg_ms > out_ms:
        return tr("01.gt_over_msg_more", "efficiency above 1.00 at m = {ms} by the medians (an m above the tighter "
                  "bound with these stages' costs, if any, is judged by its rounds in section 3's last line); "
                  "measured beside it, not offered as its cause: m = 1's median step exceeds its compute's median by "
                  "{diff} ms (a difference of medians, not one round's time: section 4 takes it round by round) "
                  "(m = 1's two {kib} KiB messages go one after the other, {msg:.1f} ms at their fastest alone, more "
                  "than those {out:.1f} ms: the step and its compute are medians of {n} rounds, taken apart, and a "
                  "message inside the step need not cost what it cost alone); inside the step the pieces took "
                  "{took} (section 4 prints each part)", out=out_ms, n=len(base["step_rounds"]), **said)
    return tr("01.gt_over_msg", "efficiency above 1.00 at m = {ms} by the medians (an m above the tighter bound with "
              "these stages' costs, if any, is judged by its rounds in section 3's last line); measured beside it, "
              "not offered as its cause: m = 1's median step exceeds its compute's median by {diff} ms (a "
              "difference of medians, not one round's time: section 4 takes it round by round) (m = 1's two {kib} "
              "KiB messages go one after the other, {msg:.1f} ms at their fastest alone); inside the step the "
              "pieces took {took} (section 4 prints each part)", **said)
