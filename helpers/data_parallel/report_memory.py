"""Notebook 02's sentences on the formula's largest batches for DataParallel and DDP (02).

Split from ``report``; every sentence is said through the course's messages (``tr``).
"""
from __future__ import annotations

from ..core.i18n import tr
from .memory import largest_batches
from .speed import MARGIN

__all__ = ["memory_sentences"]


def _fits(ratio: float, margin: float) -> str:
    r = f"{ratio:.2f}"
    return (tr("02.fits_more", "DDP fits more ({ratio}×)", ratio=r) if ratio > 1 + margin else
            tr("02.fits_fewer", "DDP fits fewer ({ratio}×)", ratio=r) if ratio < 1 - margin else
            tr("02.fits_same", "about the same (within {margin}) ({ratio}×)", margin=f"{margin:.0%}", ratio=r))


def _when(moment: str) -> str:
    return (tr("02.when_loss", "while the loss is computed") if moment == "loss" else
            tr("02.when_backward", "at the end of backward"))


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
    m = f"{margin:.0%}"
    per_verdict = (tr("02.per_more", "DataParallel's output device needs more per sample")
                   if per_ratio > 1 + margin else
                   tr("02.per_less", "DataParallel's output device needs less per sample")
                   if per_ratio < 1 - margin else
                   tr("02.per_same", "about the same per sample (within {margin})", margin=m))
    diff = fixed["ddp"]["loss"] - fixed["data_parallel"]["loss"]
    big_ratio = big["data_parallel"] / big["ddp"]
    grad_row = 4 * classes  # log_softmax's backward: the outputs' gradient, one more row per sample on each design
    big_ratio_backward = ((big["data_parallel"] + grad_row) / (big["ddp"] + grad_row / acc["devices"]))
    claim = (tr("02.claim_supported", "supported") if per_ratio > 1 + margin else
             tr("02.claim_not_supported", "not supported") if per_ratio >= 1 - margin else
             tr("02.claim_contradicted", "contradicted"))
    big_claim = (tr("02.claim_supported_cap", "Supported") if big_ratio > 1 + margin else
                 tr("02.claim_not_supported_cap", "Not supported"))
    decide = (tr("02.fixed_decide", "In this budget the fixed bytes decide (per sample the two are within {margin}, "
                                    "below)",
                 margin=m) if abs(per_ratio - 1) <= margin and abs(ratio - 1) > margin else
              tr("02.in_this_budget", "In this budget"))
    return [tr("02.mem_budget", "predicted, with a toy budget of {budget} B per device (hand-picked, of the order of "
                                "this "
               "model's step): DataParallel's output device is full at a global batch of {dp}, DDP at {ddp}, by the "
               "formula's two moments (an upper bound: early in backward can hold more). {decide}: {fits}. The "
               "fuller of "
               "the two moments there: DataParallel {when_dp}, DDP {when_ddp}", budget=f"{budget:,}", dp=dp, ddp=ddp,
               decide=decide, fits=_fits(ratio, margin), when_dp=_when(binding["data_parallel"]),
               when_ddp=_when(binding["ddp"])),
            tr("02.mem_fixed", "  fixed bytes while the loss is computed: DataParallel's output device {dp} B "
                               "({dp_share} of "
               "the budget), a DDP device {ddp} B ({ddp_share}); the difference, {diff} B: DDP's all-reduce buckets, "
               "kept "
               "from construction. gradient_as_bucket_view=True makes .grad a view of them, which saves the gradients' "
               "size at the end of backward, not this extra", dp=f"{fixed['data_parallel']['loss']:,}",
               dp_share=f"{fixed['data_parallel']['loss'] / budget:.0%}", ddp=f"{fixed['ddp']['loss']:,}",
               ddp_share=f"{fixed['ddp']['loss'] / budget:.0%}", diff=f"{diff:,}"),
            tr("02.mem_end", "  at the end of backward (no activations left): DataParallel's output device {dp} B (the "
               "parameters, Adam's state, replica 0's gradients, a flat copy of them and their sum). A DDP device: "
               "{ddp} B",
               dp=f"{fixed['data_parallel']['backward']:,}", ddp=f"{fixed['ddp']['backward']:,}"),
            tr("02.mem_per_sample", "  per sample of the global batch: DataParallel's output device {dp} B, a DDP "
                                    "device "
               "{ddp} B ({ratio}×): {verdict}. An output row here is {row} B ({classes} classes); the saved "
               "activations, "
               "{act} B per sample of a device's chunk ({act_global} B per sample of the global batch on {n} devices)",
               dp=f"{per['data_parallel']:,.0f}", ddp=f"{per['ddp']:,.0f}", ratio=f"{per_ratio:.2f}",
               verdict=per_verdict,
               row=row, classes=row // 4, act=f"{acc['activation_bytes_per_sample']:,.0f}",
               act_global=f"{acc['activation_bytes_per_sample'] / acc['devices']:,.0f}", n=acc["devices"]),
            tr("02.mem_big_budget", "  with {gib} GiB per device (a what-if budget where the fixed bytes hardly "
                                    "count): "
               "DataParallel {dp}, DDP {ddp}: {fits}", gib=f"{big_budget / 2**30:.0f}", dp=f"{far['data_parallel']:,}",
               ddp=f"{far['ddp']:,}", fits=_fits(far_ratio, margin)),
            tr("02.mem_what_if", "  what-if, the same CNN on {n} devices with {classes}-class output rows, per "
                                 "sample: {dp} B "
               "against {ddp} B ({ratio}×). {share} of DataParallel's is the gathered outputs and the loss's saved "
               "log_softmax output on the output device. Not counted: the outputs' gradient, one more such row per "
               "sample, which log_softmax's backward adds (on a DDP device for its chunk); with it the ratio would be "
               "{with_grad}×. Nor a {classes}-class head's own parameters (fixed bytes)", n=acc["devices"],
               classes=f"{classes:,}", dp=f"{big['data_parallel']:,.0f}", ddp=f"{big['ddp']:,.0f}",
               ratio=f"{big_ratio:.1f}", share=f"{rows_share:.0%}", with_grad=f"{big_ratio_backward:.1f}"),
            tr("02.mem_claim", "the lecture's claim, that the output device forces a smaller batch than DDP: {claim} "
                               "here for "
               "this model's {classes} classes (per sample {per_ratio}×; the toy budget's {ratio}× is set by the fixed "
               "bytes). {big_claim} in the {big_classes}-class what-if, where DataParallel's output device needs "
               "{big_ratio}× a DDP device's bytes per sample", claim=claim, classes=row // 4,
               per_ratio=f"{per_ratio:.2f}", ratio=f"{ratio:.2f}", big_claim=big_claim, big_classes=f"{classes:,}",
               big_ratio=f"{big_ratio:.1f}")]
