"""Notebook 02's sentences on the GIL probe (section 4): its verdicts, its peak, the probe against the cut batch (02).

Split from ``report``; every sentence is said through the course's messages (``tr``).
"""
from __future__ import annotations

import statistics

from ..core.i18n import tr
from .speed import MARGIN

__all__ = ["probe_vs_cut_sentence", "probe_verdict", "probe_rule", "verdict_rule", "probe_peak_sentence"]


def _differs(base: float, both: float, margin: float) -> str:
    """Which of the two ratios is more than ``margin`` from 1×, as a message ending in the next one."""
    cut = "" if abs(both - 1) <= margin else (
        tr("02.cut_more", "the cut batch's two threads reached more samples/s than the probe's") if both > 1 else
        tr("02.cut_fewer", "the cut batch's two threads reached fewer samples/s than the probe's"))
    if abs(base - 1) <= margin:
        return cut
    more = "" if not cut else (
        tr("02.and_cut_more", ", and the cut batch's two threads reached more samples/s than the probe's")
        if both > 1 else
        tr("02.and_cut_fewer", ", and the cut batch's two threads reached fewer samples/s than the probe's"))
    return (tr("02.base_fewer", "section 4's one thread reached fewer samples/s than the probe's{more}", more=more)
            if base > 1 else
            tr("02.base_more", "section 4's one thread reached more samples/s than the probe's{more}", more=more))


def probe_vs_cut_sentence(gil: list[dict], ratios: list[float], rows: int, single: list[float] | None = None,
                          cut: list[float] | None = None, margin: float = MARGIN) -> str:
    """The probe at ``rows`` per thread against the global batch cut in two (``rows`` each), gain by gain (02).

    ``ratios``: the forward+backward threads' rounds against one thread on the whole batch;
    ``single``/``cut``: those rounds' samples/s. With them, the ratio of the two gains (from the
    medians of samples/s) is split exactly into the one-thread baselines' ratio times the two-thread
    runs' ratio, and the sentence says which part is more than ``margin`` from 1×.
    """
    row = next((r for r in gil if r["batch_per_thread"] == rows), None)
    if row is None:
        return tr("02.probe_not_run", "the probe did not run {rows} rows per thread", rows=rows)
    head = {"rows": rows, "cut": f"{statistics.median(ratios):.2f}", "all": 2 * rows, "probe": f"{row['speedup']:.2f}"}
    if not (single and cut):
        return tr("02.probe_vs_cut", "{rows} rows per thread, medians of per-round ratios: the global batch cut in two "
                  "gained {cut}× against one thread on all {all} rows with an SGD step, the probe {probe}× against one "
                  "thread on {rows} rows without one", **head)
    one, two = statistics.median(single), statistics.median(cut)
    base, both = row["one_thread"] / one, two / row["two_threads"]
    parts = _differs(base, both, margin)
    tail = (tr("02.probe_within", "Both ratios are within {margin} of 1×", margin=f"{margin:.0%}") if not parts else
            tr("02.probe_differs", "More than {margin} from 1×: {parts}. The work differs (section 4's one thread: "
                                   "{all} "
               "rows, an SGD step, .grad set to None every step; the probe's: {rows} rows, no SGD step, .grad never "
               "zeroed, so each backward adds into the last; the cut batch's two threads also sum the replicas' "
               "gradients, step and copy the weights back), but each thread computes on {rows} rows in both: this "
               "notebook does not split what makes the difference, nor how much of it the different moments make",
               margin=f"{margin:.0%}", parts=parts, all=2 * rows, rows=rows))
    return tr("02.probe_vs_cut_medians", "{rows} rows per thread, medians of per-round ratios: the global batch cut in "
              "two gained {cut}× against one thread on all {all} rows with an SGD step, the probe {probe}× against one "
              "thread on {rows} rows without one. From the medians of samples/s (the two ran at different moments): "
              "one "
              "thread {p1} in the probe, {one} in section 4 ({base}×); two threads {two} on the cut batch, {p2} in the "
              "probe ({both}×); {base} × {both} = {product}×, the ratio of the two gains taken as ratios of medians "
              "instead (cut batch {cut_ratio}× / probe {probe_ratio}×, not the medians of per-round ratios above). "
              "{tail}", **head, p1=f"{row['one_thread']:,.0f}", one=f"{one:,.0f}", base=f"{base:.3f}",
              two=f"{two:,.0f}", p2=f"{row['two_threads']:,.0f}", both=f"{both:.3f}", product=f"{base * both:.3f}",
              cut_ratio=f"{two / one:.2f}", probe_ratio=f"{row['two_threads'] / row['one_thread']:.2f}", tail=tail)


def verdict_rule(margin: float = MARGIN) -> str:
    """When section 4's rounds give a verdict, in words (the rule ``_side`` applies) (02)."""
    return tr("02.verdict_rule", "a verdict only when every round is more than {margin} beyond 1× on the same side",
              margin=f"{margin:.0%}")


def probe_rule(margin: float = MARGIN) -> str:
    """The rule the probe's verdicts follow, said once (02)."""
    return tr("02.probe_rule", "The rule gives a verdict only when every round is more than {margin} beyond 1× on the "
              "same side, so the median alone decides nothing", margin=f"{margin:.0%}")


def probe_verdict(row: dict, margin: float = MARGIN, explain: bool = True) -> str:
    """A probe row's verdict in words: the rule decides it, the median alone does not (02).

    ``explain``: add :func:`probe_rule` to a "no clear difference" (leave it out to say it once).
    """
    if row["side"] == "faster":
        return tr("02.faster_every_round", "faster in every round")
    if row["side"] == "slower":
        return tr("02.slower_every_round", "slower in every round")
    ratios = row.get("ratios", [])
    near = sum(abs(r - 1) <= margin for r in ratios)
    ran = (", ".join(f"{r:.3f}×" for r in ratios) if ratios else f"{row['speedup_min']:.3f}–{row['speedup_max']:.3f}×")
    f = {"ran": ran, "near": near, "n": len(ratios), "margin": f"{margin:.0%}"}
    if explain:
        rule = probe_rule(margin)
        return (tr("02.no_clear_near_rule", "no clear difference: the rounds ran {ran}; {near} of the {n} rounds "
                                            "within "
                   "{margin} of 1×. {rule}", **f, rule=rule) if ratios and near else
                tr("02.no_clear_sides_rule", "no clear difference: the rounds ran {ran}; rounds on both sides of 1×. "
                                             "{rule}",
                   ran=ran, rule=rule) if ratios else
                tr("02.no_clear_unknown_rule", "no clear difference: the rounds ran {ran}; not every round on one "
                                               "side. "
                   "{rule}", ran=ran, rule=rule))
    return (tr("02.no_clear_near", "no clear difference: the rounds ran {ran}; {near} of the {n} rounds within "
                                   "{margin} "
               "of 1×", **f) if ratios and near else
            tr("02.no_clear_sides", "no clear difference: the rounds ran {ran}; rounds on both sides of 1×", ran=ran)
            if ratios else
            tr("02.no_clear_unknown", "no clear difference: the rounds ran {ran}; not every round on one side",
               ran=ran))


def _items(rows: list[dict]) -> str:
    """``b (s×; rounds …)`` for each row, joined by ", ": each a message ending in the ones after it."""
    said = ""
    for r in reversed(rows):
        rng = (tr("02.peak_rounds", "rounds {lo}–{hi}×", lo=f"{r['speedup_min']:.2f}", hi=f"{r['speedup_max']:.2f}")
               if "speedup_min" in r else tr("02.peak_no_rounds", "no rounds given"))
        f = {"b": r["batch_per_thread"], "s": f"{r['speedup']:.2f}", "rng": rng}
        said = (tr("02.peak_item_more", "{b} ({s}×; {rng}), {more}", **f, more=said) if said else
                tr("02.peak_item", "{b} ({s}×; {rng})", **f))
    return said


def probe_peak_sentence(gil: list[dict]) -> str:
    """Where the probe's median ratio was largest, and whether a larger batch was lower by the rounds rule (02).

    A "gain" only when that median is above 1×; else the sentence says no batch gained by the median.
    A larger batch counts as lower only when every one of its rounds is below every round at the
    peak; rounds that overlap give no clear difference, as the probe's own verdicts do.
    """
    best = max(gil, key=lambda r: r["speedup"])
    gain = best["speedup"] > 1
    larger = [r for r in gil if r["batch_per_thread"] > best["batch_per_thread"]]
    b, s = best["batch_per_thread"], f"{best['speedup']:.2f}"
    if not larger:
        return (tr("02.peak_largest", "the probe's median gain was largest at {b} rows per thread ({s}×), the largest "
                   "batch probed", b=b, s=s) if gain else
                tr("02.peak_largest_ratio", "by the median, two threads gained at no batch probed; the probe's median "
                   "ratio was largest at {b} rows per thread ({s}×), the largest batch probed", b=b, s=s))
    if "speedup_min" not in best:
        return (tr("02.peak_not_given", "the probe's median gain was largest at {b} rows per thread ({s}×; no rounds "
                   "given); its rounds are not given, so no larger batch is judged against it", b=b, s=s) if gain else
                tr("02.peak_not_given_ratio", "by the median, two threads gained at no batch probed; the probe's "
                                              "median "
                   "ratio was largest at {b} rows per thread ({s}×; no rounds given); its rounds are not given, so no "
                   "larger batch is judged against it", b=b, s=s))
    below = [r for r in larger if "speedup_max" in r and r["speedup_max"] < best["speedup_min"]]
    overlap = [r for r in larger if r not in below]
    said = "" if not overlap else (
        tr("02.peak_and_overlap", "; at {items} the rounds overlap those at {b}: no clear difference, a lower median "
           "alone decides nothing", items=_items(overlap), b=b) if below else
        tr("02.peak_overlap", "at {items} the rounds overlap those at {b}: no clear difference, a lower median alone "
           "decides nothing", items=_items(overlap), b=b))
    if below:
        said = (tr("02.peak_below_gain", "at the larger {items} every round was below every round at {b}: here the "
                                         "gain "
                   "did not keep growing with the batch (the probe times whole steps: it does not say why){more}",
                   items=_items(below), b=b, more=said) if gain else
                tr("02.peak_below_ratio", "at the larger {items} every round was below every round at {b}: here the "
                   "ratio did not keep growing with the batch (the probe times whole steps: it does not say why){more}",
                   items=_items(below), b=b, more=said))
    f = {"b": b, "s": s, "said": said, "rng": tr("02.peak_rounds", "rounds {lo}–{hi}×", lo=f"{best['speedup_min']:.2f}",
                                                  hi=f"{best['speedup_max']:.2f}")}
    return (tr("02.peak_gain", "the probe's median gain was largest at {b} rows per thread ({s}×; {rng}); {said}", **f)
            if gain else
            tr("02.peak_ratio", "by the median, two threads gained at no batch probed; the probe's median ratio was "
                                "largest "
               "at {b} rows per thread ({s}×; {rng}); {said}", **f))
