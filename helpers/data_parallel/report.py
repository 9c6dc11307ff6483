"""Notebook 02's sentences generated from its measurements: each says what the numbers say (02)."""
from __future__ import annotations

import statistics

from ..core.device import hardware_label
from .instruments import LABELS
from .memory import largest_batches
from .speed import MARGIN, _side, amdahl_cap

__all__ = ["throughput_lines", "amdahl_sentence", "processes_sentence", "memory_sentences", "forward_sentence",
           "probe_vs_cut_sentence", "probe_verdict", "probe_peak_sentence"]


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


def amdahl_sentence(one_worker_seconds: dict, slower: bool, measured: float | None = None) -> str:
    """Amdahl's bound for threading only the forward, from a one-thread pass's forward and backward times (02).

    The serial share is the backward's share of the one-worker pass (Amdahl's law starts from the
    serial run); the sentence says the bound covers a gain, not a loss. ``measured``: the threads'
    median ratio; above the bound, the sentence says so rather than leave the two side by side.
    """
    share = one_worker_seconds["backward"] / (one_worker_seconds["forward"] + one_worker_seconds["backward"])
    cap = amdahl_cap(share)
    above = measured is not None and measured > cap
    return (f"Amdahl's law: with the backward ({share:.0%} of section 3's one-thread pass) left on one thread, "
            f"threading the forward gains at most {cap:.2f}×. The law bounds a gain, not a loss"
            + (": the shortfall below 1× here is cost the threads add, not split up in this notebook (starting "
               "two threads every step, functional_call's parameter swaps and the GIL are candidates)" if slower else "")
            + (f". The forward-only threads' median here, {measured:.2f}×, is above that bound: the bound takes "
               "section 3's pass, timed at another moment, as the work the threads share, each on a core of its "
               "own; some of that did not hold in these rounds (which part is not split up here)" if above else "")
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
            + ", ".join(f"{r:.2f}×" for r in ratios) + f": {verdict} ({hardware_label('cpu')})"
            + ("" if not single else
               f"\none DDP process ran at {statistics.median(rounds[1]) / statistics.median(single):.2f}× one thread's "
               "median (the same model, batch and SGD step; the process also runs DDP's hooks and gradient buckets, "
               "rank 1 waited at a barrier meanwhile, and it ran at other moments than the thread: what each adds is "
               "not split up here)"))


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
    return [f"predicted, with a toy budget of {budget:,} B per device: DataParallel's output device is full at a global "
            f"batch of {dp}, DDP at {ddp}: {_fits(ratio, margin)} ({ratio:.2f}×) in this budget; the fullest moment "
            f"there: DataParallel {when[binding['data_parallel']]}, DDP {when[binding['ddp']]}",
            f"  fixed bytes while the loss is computed: DataParallel's output device {fixed['data_parallel']['loss']:,} B "
            f"({fixed['data_parallel']['loss'] / budget:.0%} of the budget), a DDP device {fixed['ddp']['loss']:,} B "
            f"({fixed['ddp']['loss'] / budget:.0%}); the difference, {diff:,} B: DDP's all-reduce buckets, kept from "
            f"construction",
            f"  at the end of backward (no activations left): DataParallel's output device {fixed['data_parallel']['backward']:,} B "
            f"(replica 0's gradients, a flat copy and the sum that becomes .grad, beside the parameters and Adam's state), "
            f"a DDP device {fixed['ddp']['backward']:,} B",
            f"  per sample of the global batch: DataParallel's output device {per['data_parallel']:,.0f} B, a DDP device "
            f"{per['ddp']:,.0f} B ({per_ratio:.2f}×): {per_verdict}; "
            f"an output row here is {row} B ({row // 4} classes) against {acc['activation_bytes_per_sample']:,.0f} B of saved "
            f"activations",
            f"  with {big_budget / 2**30:.0f} GiB per device (a what-if budget where the fixed bytes hardly count): "
            f"DataParallel {far['data_parallel']:,}, DDP {far['ddp']:,}: {_fits(far_ratio, margin)} ({far_ratio:.2f}×)",
            f"  what-if, the same CNN on {acc['devices']} devices with {classes:,}-class output rows (per sample; a "
            f"{classes:,}-class head's own parameters would add fixed bytes, not counted): {big['data_parallel']:,.0f} B "
            f"against {big['ddp']:,.0f} B per sample ({big['data_parallel'] / big['ddp']:.1f}×); {rows_share:.0%} of "
            f"DataParallel's is the gathered outputs and the loss's saved log_softmax output on the output device"]


def forward_sentence(one_worker_seconds: dict, step_seconds: dict, margin: float = MARGIN) -> str:
    """Section 3's forward in two threads against the same forward on one thread, in words from the means (02)."""
    one, two = one_worker_seconds["forward"], step_seconds["apply"]
    r = two / one
    how = ("slower in threads" if r > 1 + margin else "faster in threads" if r < 1 - margin
           else f"within {margin:.0%}: no clear difference")
    return (f"section 3 (means of 20 passes): the forward took {1e3 * two:.1f} ms in 2 threads against {1e3 * one:.1f} ms "
            f"on one thread ({r:.2f}× as long: {how}); the backward {1e3 * step_seconds['backward']:.1f} ms on one "
            f"thread after the threads, against {1e3 * one_worker_seconds['backward']:.1f} ms after one thread's forward")


def probe_vs_cut_sentence(gil: list[dict], ratios: list[float], rows: int) -> str:
    """Why the probe at ``rows`` per thread and the global batch cut in two (``rows`` each) give different ratios (02).

    ``ratios``: the forward+backward threads' rounds against one thread on the whole batch.
    """
    row = next((r for r in gil if r["batch_per_thread"] == rows), None)
    if row is None:
        return f"the probe did not run {rows} rows per thread"
    return (f"{rows} rows per thread: the probe gave {row['speedup']:.2f}× (median of rounds), the global batch cut in "
            f"two {statistics.median(ratios):.2f}×. Not the same step: the cut batch is compared with one thread on "
            f"all {2 * rows} rows (the probe: one thread on {rows}), and its step also sums the gradients, takes the SGD "
            "step and copies the weights into the replicas on the main thread, which the probe's does not; how much "
            "each part adds is not split up here")


def probe_verdict(row: dict, margin: float = MARGIN) -> str:
    """A probe row's verdict in words: the rule decides it, the median alone does not (02)."""
    if row["side"] in ("faster", "slower"):
        return f"{row['side']} in every round"
    return (f"no clear difference: the rule needs every round more than {margin:.0%} beyond 1× on one side, and "
            f"these rounds ({row['speedup_min']:.2f}–{row['speedup_max']:.2f}×) are not, whatever the median")


def probe_peak_sentence(gil: list[dict]) -> str:
    """Where the probe's median gain was largest, and whether it kept growing with the batch (02)."""
    best = max(gil, key=lambda r: r["speedup"])
    larger = [r for r in gil if r["batch_per_thread"] > best["batch_per_thread"]]
    head = (f"the probe's median gain was largest at {best['batch_per_thread']} rows per thread "
            f"({best['speedup']:.2f}×)")
    if not larger:
        return head + ", the largest batch probed"
    return (head + "; at the larger " + ", ".join(f"{r['batch_per_thread']} ({r['speedup']:.2f}×)" for r in larger)
            + " the median was lower: here the gain did not keep growing with the batch (the probe times whole "
            "steps: it does not say why)")
