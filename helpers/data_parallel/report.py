"""Notebook 02's sentences generated from its measurements: each says what the numbers say (02)."""
from __future__ import annotations

import statistics

from ..core.device import hardware_label
from .instruments import LABELS
from .memory import largest_batches
from .speed import MARGIN, _side, amdahl_cap

__all__ = ["throughput_lines", "amdahl_sentence", "processes_sentence", "memory_sentences", "forward_sentence",
           "probe_vs_cut_sentence", "probe_verdict", "probe_rule", "verdict_rule", "probe_peak_sentence", "section4_takeaway"]


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


def amdahl_sentence(one_worker_seconds: dict, slower: bool, measured: float | None = None,
                    margin: float = MARGIN, where: str = "section 3's") -> str:
    """Amdahl's bound for threading only the forward, from a one-thread pass's forward and backward times (02).

    The serial share is the backward's share of the one-worker pass (Amdahl's law starts from the
    serial run); the sentence says the bound covers a gain, not a loss. ``measured``: the threads'
    median ratio; above the bound, the sentence says so rather than leave the two side by side.
    ``where``: whose one-thread pass the times are (a CPU pass, like the threads it is set beside).
    """
    share = one_worker_seconds["backward"] / (one_worker_seconds["forward"] + one_worker_seconds["backward"])
    cap = amdahl_cap(share)
    above = measured is not None and measured > cap
    below = measured is not None and not slower and measured < cap - margin
    return (f"Amdahl's law: with the backward ({share:.0%} of {where} one-thread pass) left on one thread, "
            f"threading the forward gains at most {cap:.2f}×. The law bounds a gain, not a loss"
            + (": the shortfall below 1× here is not explained in this notebook (what the threads' step adds is "
               "not split up, and section 3's timing of the same threaded forward is set beside it below)" if slower else "")
            + (f". The forward-only threads' median here, {measured:.2f}×, is above that bound: the bound takes "
               f"{where} pass, timed at another moment, as the work the threads share, each on a core of its "
               "own; some of that did not hold in these rounds (which part is not split up here)" if above else "")
            + (f". The forward-only threads' median here, {measured:.2f}×, is well below that bound: the bound "
               "counts only the work the threads share; what else their step spends is not split up or tested here"
               if below else "")
            + ".")


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
            + ", ".join(f"{r:.3f}×" for r in ratios) + f": {verdict} ({hardware_label('cpu')})"
            + ("" if not single else
               f"\none DDP process ran at {statistics.median(rounds[1]) / statistics.median(single):.2f}× one thread's "
               "median. The same model, batch and SGD step, but the process also runs DDP's hooks, copies its gradients "
               "into buckets and calls their all-reduce; rank 1 waited at a barrier meanwhile, and it ran at other "
               "moments than the thread. What each adds is not split up here"))


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
            f"DataParallel's output device is full at a global batch of {dp}, DDP at {ddp}. "
            f"In this budget: {_fits(ratio, margin)} ({ratio:.2f}×). The fullest moment there: "
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
            f"{acc['activation_bytes_per_sample']:,.0f} B",
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


def forward_sentence(one_worker_seconds: dict, step_seconds: dict, where: str = "section 3",
                     forward_only_rounds: list[float] | None = None, margin: float = MARGIN) -> str:
    """Section 3's threaded pass against one thread's, from the means, beside section 4's forward-only rounds (02).

    Section 3 gives ratios of means, not rounds: no verdict is drawn from them. ``where``: which CPU
    run the times come from. ``forward_only_rounds``: section 4's forward-only threads' step, round
    by round against one thread's; the sentence says whether section 3's whole pass (the four steps
    and the backward, against one thread's forward and backward) points the same way as section 4's
    verdict, or disagrees with it, and names no cause for a disagreement.
    """
    p3 = sum(one_worker_seconds.values()) / sum(step_seconds.values())  # speed ratio of the whole passes
    s = (f"{where} (means of 20 passes, so no verdict of their own): the forward took {1e3 * step_seconds['apply']:.1f} "
         f"ms in 2 threads against {1e3 * one_worker_seconds['forward']:.1f} ms on one thread, the backward after it "
         f"{1e3 * step_seconds['backward']:.1f} ms against {1e3 * one_worker_seconds['backward']:.1f} ms; the whole "
         f"pass (the four steps and the backward) ran {p3:.2f}× as fast as one thread's forward and backward")
    if forward_only_rounds:
        side = _side(forward_only_rounds, margin)
        s += (f". Section 4's forward-only threads (the same pass and an SGD step): {statistics.median(forward_only_rounds):.2f}× "
              f"one thread's step (median; rounds {min(forward_only_rounds):.2f}–{max(forward_only_rounds):.2f}×, "
              + (f"{side} in every round)" if side != "no clear difference" else "no clear difference)"))
        if side == "slower" and p3 >= 1 - margin or side == "faster" and p3 <= 1 + margin:
            s += (f". The two disagree: {where}'s pass found no such {'loss' if side == 'slower' else 'gain'}, and this "
                  "notebook does not find why")
        elif side != "no clear difference":
            s += ". The two point the same way"
        else:
            s += ". With no verdict from section 4's rounds, neither agreement nor disagreement is said"
    return s


def probe_vs_cut_sentence(gil: list[dict], ratios: list[float], rows: int, single: list[float] | None = None,
                          cut: list[float] | None = None) -> str:
    """Why the probe at ``rows`` per thread and the global batch cut in two (``rows`` each) give different ratios (02).

    ``ratios``: the forward+backward threads' rounds against one thread on the whole batch;
    ``single``/``cut``: those rounds' samples/s, printed beside the probe's own medians.
    """
    row = next((r for r in gil if r["batch_per_thread"] == rows), None)
    if row is None:
        return f"the probe did not run {rows} rows per thread"
    side = ""
    if single and cut:
        side = (f" Samples/s (medians; the probe and section 4's rounds ran at different moments): one thread "
                f"{row['one_thread']:,.0f} on {rows} rows (the probe), {statistics.median(single):,.0f} on {2 * rows}; "
                f"two threads {row['two_threads']:,.0f} (the probe), {statistics.median(cut):,.0f} (the cut batch).")
    return (f"{rows} rows per thread: the probe gave {row['speedup']:.2f}× (median of rounds), the global batch cut in "
            f"two {statistics.median(ratios):.2f}×. Not the same step. The cut batch is compared with one thread on "
            f"all {2 * rows} rows (the probe: one thread on {rows}).{side} The cut batch's step also sums the gradients, "
            "takes the SGD step and copies the weights into the replicas on the main thread, which the probe's does "
            "not; this run times none of these, so it does not find what makes the gap")


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


def section4_takeaway(runs: dict, gil: list[dict], prounds: dict, margin: float = MARGIN) -> str:
    """Section 4 in one line, from its round-by-round verdicts (02): each way against its own baseline.

    ``runs``: :func:`thread_variants`' rounds; ``gil``: :func:`gil_probe`'s rows; ``prounds``:
    :func:`process_rounds`' rounds. Only comparisons timed in the same rounds give a verdict.
    """
    def said(side: str, than: str) -> str:
        return f"{side} than {than}" if side in ("faster", "slower") else f"no clear difference from {than}"

    cut = _side([a / b for a, b in zip(runs["threads_forward_backward"], runs["single"])], margin)
    fwd = _side([a / b for a, b in zip(runs["threads_forward_only"], runs["single"])], margin)
    procs = _side([b / a for a, b in zip(prounds[1], prounds[2])], margin)
    wins = [r["batch_per_thread"] for r in gil if r["side"] == "faster"]
    probe = (f"two threads with a batch each beat one in every round at {', '.join(map(str, wins))} rows per thread"
             if wins else "two threads with a batch each beat one in every round at no batch probed")
    return (f"Section 4 on this machine ({hardware_label('cpu')}; each way against its own baseline, timed in the same "
            f"rounds): the global batch cut over two threads, {said(cut, 'one thread')} (forward only: "
            f"{said(fwd, 'one thread')}); {probe}; two DDP processes, {said(procs, 'one DDP process')}")
