"""Notebook 02's sentences generated from its measurements: each says what the numbers say (02)."""
from __future__ import annotations

import statistics

from ..core.device import hardware_label
from .instruments import LABELS
from .memory import largest_batches
from .speed import MARGIN, _side, amdahl_cap

__all__ = ["throughput_lines", "amdahl_sentence", "processes_sentence", "memory_sentences",
           "probe_vs_cut_sentence", "probe_verdict", "probe_rule", "verdict_rule", "probe_peak_sentence"]


def throughput_lines(runs: dict, per_round: dict, baselines: dict) -> list[str]:
    """One line per way to use two workers: median samples/s, and against its baseline two ways (02).

    The ratio of the two medians of samples/s, and the median of the round-by-round ratios (each
    round against its baseline's same round); the two can differ.

    ``per_round[name]``: the ratios of ``runs[name]`` to ``runs[baselines[name]]`` round by round;
    a name without a baseline is one itself (one thread; one DDP process).
    """
    lines, width = [], max(len(LABELS.get(n, n)) for n in runs)
    for name, v in runs.items():
        r, base = per_round.get(name), baselines.get(name)
        how = (f"a baseline; rounds {min(v):.0f}–{max(v):.0f} samples/s" if base is None else
               f"ratio of medians {statistics.median(v) / statistics.median(runs[base]):.2f}×; each round / that "
               f"round's {LABELS.get(base, base)}: median of per-round ratios {statistics.median(r):.2f}×, "
               f"rounds {min(r):.2f}–{max(r):.2f}×")
        lines.append(f"{LABELS.get(name, name):>{width}}: {statistics.median(v):8.0f} samples/s  ({how})")
    return lines


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
    cap = amdahl_cap(share)
    under = [r for r in (rounds or []) if r <= cap] if measured is not None and measured > cap else []
    above = measured is not None and measured > cap and not under  # every round above it, not the median alone
    short = measured is not None and measured < 1 and not slower  # below 1× without an every-round verdict
    over = [r for r in (rounds or []) if r > cap] if not (above or under) else []
    premise = _premise(one_worker_seconds, step_seconds, cap, margin, where) if step_seconds else ("", True)
    below = measured is not None and not slower and not short and measured < cap - margin and not over and premise[1]
    return (f"Amdahl's law: with the backward ({share:.1%} of {where} one-thread forward+backward pass, not of the two-thread step) left on one thread, "
            f"threading the forward gains at most {cap:.2f}× if the backward keeps that one-thread time (the law "
            "assumes the serial part unchanged; the step's other serial work on the main thread, scatter, replicate, "
            "gather, the SGD step, is not in it). The law bounds a gain, not a loss"
            + (": the shortfall below 1× here is not explained in this notebook (what the threads' step adds is "
               "not split up)" if slower else "")
            + (f". The forward-only threads' median here, {measured:.2f}×, is above that bound: the bound takes "
               f"{where} pass, timed at another moment, as the work the threads share, each on a core of its "
               "own; some of that did not hold in these rounds (which part is not split up here)" if above else "")
            + (f". The forward-only threads' median here, {measured:.2f}×, is below 1× (the rounds give no verdict: "
               f"not every round is more than {margin:.0%} below 1×); that shortfall is not explained in this notebook (what the "
               "threads' step adds is not split up)" if short else "")
            + (f". The forward-only threads' median here, {measured:.2f}×, is below that bound" if below else "")
            + (f". {len(over)} of the {len(rounds or [])} rounds ({', '.join(f'{r:.3f}×' for r in over)}) "
               f"{'lies' if len(over) == 1 else 'lie'} above that bound ({cap:.3f}×): the rounds spread wider than the "
               "distance from 1× to the bound, so this run does not place the forward-only threads against it" if over else "")
            + (f". The forward-only threads' median here, {measured:.2f}×, is above that bound ({cap:.3f}×), but "
               f"{len(under)} of the {len(rounds or [])} rounds ({', '.join(f'{r:.3f}×' for r in under)}) "
               f"{'lies' if len(under) == 1 else 'lie'} at or below it: this run does not place the forward-only "
               "threads against it" if under else "")
            + "." + premise[0])


def _premise(one: dict, step: dict, cap: float, margin: float, where: str) -> tuple[str, bool]:
    """Did the backward keep its one-thread time in the threaded step, and what did the forward gain there?"""
    b_one, b_step, f_one, apply = one["backward"], step["backward"], one["forward"], step["apply"]
    held = abs(b_step / b_one - 1) <= margin
    return (f" In {where} threaded step, timed in turns with that pass, the backward took {1e3 * b_step:.1f} ms "
            f"against {1e3 * b_one:.1f} ms on one thread"
            + (f": it kept its one-thread time (within {margin:.0%}), the bound's premise"
               if held else f": not its one-thread time, so the premise failed there and {cap:.2f}× is no bound for that step")
            + f"; the forward on two threads (apply) took {1e3 * apply:.1f} ms against {1e3 * f_one:.1f} ms on one "
            f"thread: {f_one / apply:.2f}×, what the threads gained on the forward itself.", held)


def processes_sentence(rounds: dict, margin: float = MARGIN, single: list[float] | None = None) -> str:
    """How two DDP processes did against one, round by round in the same launch (02).

    ``rounds``: :func:`process_rounds`' samples/s, ``{1: [...], 2: [...]}``. Faster or slower only
    when every round is more than ``margin`` beyond 1× on that side, else no clear difference.
    ``single``: the plain one thread's samples/s (no DDP); with it, both process medians are also
    set against its median (ratios of medians, timed at different moments).
    """
    ratios = [b / a for a, b in zip(rounds[1], rounds[2])]
    side = _side(ratios, margin)
    verdict = (f"{side} than one DDP process in every round, each by more than {margin:.0%}"
               if side != "no clear difference" else
               f"no clear difference from one DDP process (not every round more than {margin:.0%} on one side of 1×)")
    s = (f"2 DDP processes vs 1 (one worker: one DDP process on the whole batch, a one-rank group with the same hooks "
         f"and buckets), round by round: " + ", ".join(f"{r:.3f}×" for r in ratios) + f": {verdict} ({hardware_label('cpu')})")
    if not single:
        return s
    plain, one, two = statistics.median(single), statistics.median(rounds[1]), statistics.median(rounds[2])
    return (s + f". Against the plain 1 thread (no DDP; ratios of medians, timed at different moments): one DDP process "
            f"{one:,.0f} samples/s = {one / plain:.2f}× its {plain:,.0f}, two DDP processes {two:,.0f} = {two / plain:.2f}×")


def _fits(ratio: float, margin: float) -> str:
    return ("DDP fits more" if ratio > 1 + margin else "DDP fits fewer" if ratio < 1 - margin
            else f"about the same (within {margin:.0%})")


def memory_sentences(budget: int, acc: dict, classes: int = 50_000, margin: float = MARGIN,
                     big_budget: int = 16 * 2**30) -> list[str]:
    """The formula's largest batches for DataParallel and DDP, why they differ, and the same at ``classes`` (02).

    The verdict is given three ways, each within ``margin``: in ``budget`` (where the fixed bytes
    weigh), per sample of the global batch, and in ``big_budget`` (where they hardly do). Each
    design's peak is the larger of its two moments (:func:`peak_moments`), said with the one that
    decides.
    """
    lim = largest_batches(budget, acc)
    dp, ddp, per, fixed, binding = lim["data_parallel"], lim["ddp"], lim["per_sample"], lim["fixed"], lim["binding"]
    ratio = ddp / dp if dp else float("inf")
    per_ratio = per["data_parallel"] / per["ddp"]
    row = acc["output_row_bytes"]
    big = largest_batches(budget, acc, out_row_bytes=4 * classes)["per_sample"]
    far = largest_batches(big_budget, acc)
    far_ratio = far["ddp"] / far["data_parallel"] if far["data_parallel"] else float("inf")
    rows_share = 2 * 4 * classes / big["data_parallel"]
    per_verdict = ("DataParallel's output device needs more per sample" if per_ratio > 1 + margin else
                   "DataParallel's output device needs less per sample" if per_ratio < 1 - margin else
                   f"about the same per sample (within {margin:.0%})")
    when = {"loss": "while the loss is computed", "backward": "at the end of backward"}
    diff = fixed["ddp"]["loss"] - fixed["data_parallel"]["loss"]
    big_ratio = big["data_parallel"] / big["ddp"]
    grad_row = 4 * classes  # log_softmax's backward: the outputs' gradient, one more row per sample on each design
    big_ratio_backward = ((big["data_parallel"] + grad_row) / (big["ddp"] + grad_row / acc["devices"]))
    claim = ("supported" if per_ratio > 1 + margin else "not supported" if per_ratio >= 1 - margin else "contradicted")
    big_claim = "supported" if big_ratio > 1 + margin else "not supported"
    return [f"predicted, with a toy budget of {budget:,} B per device (hand-picked, of the order of this model's step): "
            f"DataParallel's output device is full at a global batch of {dp}, DDP at {ddp}, by the formula's two moments "
            f"(an upper bound: early in backward can hold more). "
            + ("In this budget the fixed bytes decide (per sample the two are within "
               f"{margin:.0%}, below): " if abs(per_ratio - 1) <= margin and abs(ratio - 1) > margin else "In this budget: ")
            + f"{_fits(ratio, margin)} ({ratio:.2f}×)"
            + ". The fuller of the two moments there: "
            f"DataParallel {when[binding['data_parallel']]}, DDP {when[binding['ddp']]}",
            f"  fixed bytes while the loss is computed: DataParallel's output device {fixed['data_parallel']['loss']:,} B "
            f"({fixed['data_parallel']['loss'] / budget:.0%} of the budget), a DDP device {fixed['ddp']['loss']:,} B "
            f"({fixed['ddp']['loss'] / budget:.0%}); the difference, {diff:,} B: DDP's all-reduce buckets, kept from "
            f"construction. gradient_as_bucket_view=True makes .grad a view of them, which saves the gradients' size at "
            f"the end of backward, not this extra",
            f"  at the end of backward (no activations left): DataParallel's output device {fixed['data_parallel']['backward']:,} B "
            f"(the parameters, Adam's state, replica 0's gradients, a flat copy of them and their sum). "
            f"A DDP device: {fixed['ddp']['backward']:,} B",
            f"  per sample of the global batch: DataParallel's output device {per['data_parallel']:,.0f} B, a DDP device "
            f"{per['ddp']:,.0f} B ({per_ratio:.2f}×): {per_verdict}. "
            f"An output row here is {row} B ({row // 4} classes); the saved activations, "
            f"{acc['activation_bytes_per_sample']:,.0f} B per sample of a device's chunk "
            f"({acc['activation_bytes_per_sample'] / acc['devices']:,.0f} B per sample of the global batch on "
            f"{acc['devices']} devices)",
            f"  with {big_budget / 2**30:.0f} GiB per device (a what-if budget where the fixed bytes hardly count): "
            f"DataParallel {far['data_parallel']:,}, DDP {far['ddp']:,}: {_fits(far_ratio, margin)} ({far_ratio:.2f}×)",
            f"  what-if, the same CNN on {acc['devices']} devices with {classes:,}-class output rows, per sample: "
            f"{big['data_parallel']:,.0f} B against {big['ddp']:,.0f} B ({big_ratio:.1f}×). {rows_share:.0%} of "
            f"DataParallel's is the gathered outputs and the loss's saved log_softmax output on the output device. "
            f"Not counted: the outputs' gradient, one more such row per sample, which log_softmax's backward adds "
            f"(on a DDP device for its chunk); with it the ratio would be {big_ratio_backward:.1f}×. Nor a "
            f"{classes:,}-class head's own parameters (fixed bytes)",
            f"the lecture's claim, that the output device forces a smaller batch than DDP: {claim} here for this "
            f"model's {row // 4} classes (per sample {per_ratio:.2f}×; the toy budget's {ratio:.2f}× is set by the "
            f"fixed bytes). {big_claim.capitalize()} in the {classes:,}-class what-if, where DataParallel's output "
            f"device needs {big_ratio:.1f}× a DDP device's bytes per sample"]


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
        return f"the probe did not run {rows} rows per thread"
    s = (f"{rows} rows per thread, medians of per-round ratios: the global batch cut in two gained "
         f"{statistics.median(ratios):.2f}× against one thread on all {2 * rows} rows with an SGD step, the probe {row['speedup']:.2f}× against "
         f"one thread on {rows} rows without one")
    if not (single and cut):
        return s
    one, two = statistics.median(single), statistics.median(cut)
    base, both = row["one_thread"] / one, two / row["two_threads"]
    parts = [f"section 4's one thread reached {'fewer' if base > 1 else 'more'} samples/s than the probe's"
             if abs(base - 1) > margin else "",
             f"the cut batch's two threads reached {'more' if both > 1 else 'fewer'} samples/s than the probe's"
             if abs(both - 1) > margin else ""]
    parts = [p for p in parts if p]
    work = (f". The work differs (section 4's one thread: {2 * rows} rows, an SGD step, .grad set to None every step; "
            f"the probe's: {rows} rows, no SGD step, .grad never zeroed, so each backward adds into the last; the cut "
            f"batch's two threads also sum the replicas' gradients, step and copy the weights back), but each thread "
            f"computes on {rows} rows in both: this notebook does not split what makes the difference, nor how much of it "
            f"the different moments make")
    return (s + f". From the medians of samples/s (the two ran at different moments): one thread {row['one_thread']:,.0f} "
            f"in the probe, {one:,.0f} in section 4 ({base:.3f}×); two threads {two:,.0f} on the cut batch, "
            f"{row['two_threads']:,.0f} in the probe ({both:.3f}×); {base:.3f} × {both:.3f} = {base * both:.3f}×, the "
            f"ratio of the two gains taken as ratios of medians instead (cut batch {two / one:.2f}× / probe "
            f"{row['two_threads'] / row['one_thread']:.2f}×, not the medians of per-round ratios above). "
            + (f"Both ratios are within {margin:.0%} of 1×" if not parts else
               f"More than {margin:.0%} from 1×: " + (", and ".join(parts)) + work))


def verdict_rule(margin: float = MARGIN) -> str:
    """When section 4's rounds give a verdict, in words (the rule ``_side`` applies) (02)."""
    return f"a verdict only when every round is more than {margin:.0%} beyond 1× on the same side"


def probe_rule(margin: float = MARGIN) -> str:
    """The rule the probe's verdicts follow, said once (02)."""
    return f"The rule gives {verdict_rule(margin)}, so the median alone decides nothing"


def probe_verdict(row: dict, margin: float = MARGIN, explain: bool = True) -> str:
    """A probe row's verdict in words: the rule decides it, the median alone does not (02).

    ``explain``: add :func:`probe_rule` to a "no clear difference" (leave it out to say it once).
    """
    if row["side"] in ("faster", "slower"):
        return f"{row['side']} in every round"
    ratios = row.get("ratios", [])
    near = sum(abs(r - 1) <= margin for r in ratios)
    why = (f"{near} of the {len(ratios)} rounds within {margin:.0%} of 1×" if near else
           "rounds on both sides of 1×") if ratios else "not every round on one side"
    ran = (", ".join(f"{r:.3f}×" for r in ratios) if ratios else f"{row['speedup_min']:.3f}–{row['speedup_max']:.3f}×")
    return (f"no clear difference: the rounds ran {ran}; {why}"
            + (f". {probe_rule(margin)}" if explain else ""))


def probe_peak_sentence(gil: list[dict]) -> str:
    """Where the probe's median ratio was largest, and whether a larger batch was lower by the rounds rule (02).

    A "gain" only when that median is above 1×; else the sentence says no batch gained by the median.
    A larger batch counts as lower only when every one of its rounds is below every round at the
    peak; rounds that overlap give no clear difference, as the probe's own verdicts do.
    """
    best = max(gil, key=lambda r: r["speedup"])
    what = "gain" if best["speedup"] > 1 else "ratio"
    larger = [r for r in gil if r["batch_per_thread"] > best["batch_per_thread"]]
    head = ("" if what == "gain" else "by the median, two threads gained at no batch probed; ") + (
        f"the probe's median {what} was largest at {best['batch_per_thread']} rows per thread ({best['speedup']:.2f}×")

    def rng(r: dict) -> str:
        return f"rounds {r['speedup_min']:.2f}–{r['speedup_max']:.2f}×" if "speedup_min" in r else "no rounds given"

    if not larger:
        return head + "), the largest batch probed"
    s = head + f"; {rng(best)})"
    if "speedup_min" not in best:
        return s + "; its rounds are not given, so no larger batch is judged against it"
    below = [r for r in larger if "speedup_max" in r and r["speedup_max"] < best["speedup_min"]]
    overlap = [r for r in larger if r not in below]
    said = []
    if below:
        said.append("at the larger " + ", ".join(f"{r['batch_per_thread']} ({r['speedup']:.2f}×; {rng(r)})" for r in below)
                    + f" every round was below every round at {best['batch_per_thread']}: here the {what} did not keep "
                    "growing with the batch (the probe times whole steps: it does not say why)")
    if overlap:
        said.append("at " + ", ".join(f"{r['batch_per_thread']} ({r['speedup']:.2f}×; {rng(r)})" for r in overlap)
                    + f" the rounds overlap those at {best['batch_per_thread']}: no clear difference, a lower median "
                    "alone decides nothing")
    return s + "; " + "; ".join(said)
