"""What each device holds at the moments of a DataParallel or DDP step: a formula from counted and measured bytes (02).

A device needs room for its peak, the largest total over a step's moments, not the sum of all a
step allocates. :func:`output_device_accounting` measures and counts the inputs on a CPU;
:func:`peak_moments` gives each design's bytes while the loss is computed and at the end of
backward; :func:`largest_batches` the largest global batch at which every moment fits a budget.
"""
from __future__ import annotations

import torch
from torch import nn

from ..core.saved import SavedTensorTracker

__all__ = ["output_device_accounting", "largest_batches", "peak_moments", "COALESCE_BYTES", "largest_coalesced_buffer"]


def output_device_accounting(model: nn.Module, x: torch.Tensor, out: torch.Tensor, n: int,
                             optimizer_bytes: int = 0) -> dict:
    """Predicted bytes DataParallel holds on each of ``n`` devices at two moments of a step, device 0 the output device (02).

    A formula, not a measurement of memory: on a CPU the "devices" share one RAM. Its inputs are
    measured or counted: the parameter bytes (counted), the activations one replica saves for
    backward (measured on one chunk with ``SavedTensorTracker``; the chunk's input among them), the
    loss's saved tensors (measured), the input and output sizes, and ``optimizer_bytes`` (Adam's
    state, counted after a real ``step``). A device's peak is the larger of the two moments' totals,
    not their sum: what lives at one moment is freed before the other.

    ``per_device_bytes``, while the loss is computed (``.grad`` is None: ``zero_grad()`` before the
    forward): every device holds its replica's parameters and saved activations; the replicas'
    outputs are freed (``Gather`` saves only their sizes). The output device also holds the rest
    of the input batch (moved there before scatter), the gathered outputs (the loss's input), the
    loss's saved tensors, the loss and the optimizer's state. ``reduction_bytes``, at the end of
    backward, when ``Broadcast.backward`` sums the replicas' gradients (every saved activation
    freed by then): each device its replica's gradients and a flat copy of the largest buffer; the
    output device also the parameters, the sum that becomes ``.grad``, the optimizer's state and
    the loss. The sum is ``comm.reduce_add``'s path with NCCL (one new tensor on the output
    device); without NCCL it also copies each other device's buffer there before adding it, a
    temporary this formula does not count.
    """
    batch = x.shape[0]
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    with SavedTensorTracker(views="span") as t:  # the chunk is a view of the batch: count its rows, not the batch's
        probe = model(x[:batch // n])
        act = t.peak
    del probe
    # the chunk's input is among the saved tensors (the first convolution saves it), so it is in ``act``
    row = out[0].numel() * out.element_size()
    # cross_entropy = log_softmax + nll_loss: log_softmax saves its output (the logits' shape) for backward, nll_loss
    # the targets and a scalar total weight: measured on the whole batch's outputs, where DataParallel's loss runs
    with SavedTensorTracker() as t:
        nn.functional.cross_entropy(out.detach().requires_grad_(), torch.zeros(batch, dtype=torch.long))
        loss_saved = t.peak
    rest_of_input = (batch - batch // n) * x[0].numel() * x.element_size()  # the whole batch is moved there first
    flat = largest_coalesced_buffer(model.parameters())
    per_device = [param_bytes + act for _ in range(n)]
    extra = batch * row + loss_saved + 4 + optimizer_bytes + rest_of_input  # gathered outputs, loss's saved, loss
    per_device[0] += extra
    reduction = [param_bytes + flat for _ in range(n)]  # a replica's gradients and one flat buffer of them
    reduction[0] += 2 * param_bytes + optimizer_bytes + 4  # the parameters, the sum (.grad), Adam's state, the loss
    return {"per_device_bytes": [int(b) for b in per_device], "output_device_extra_bytes": int(extra),
            "reduction_bytes": [int(b) for b in reduction],
            "output_device_share": per_device[0] / sum(per_device), "param_bytes": param_bytes,
            "optimizer_bytes": optimizer_bytes, "saved_activation_bytes_per_chunk": act,
            "activation_bytes_per_sample": act / (batch // n), "output_row_bytes": row, "devices": n,
            "input_bytes_per_sample": x[0].numel() * x.element_size(), "loss_saved_bytes": loss_saved,
            "coalesced_buffer_bytes": flat}


COALESCE_BYTES = 10 * 2**20  # comm.reduce_add_coalesced's default buffer_size


def largest_coalesced_buffer(tensors, limit: int = COALESCE_BYTES) -> int:
    """Bytes of the largest flat buffer ``comm.reduce_add_coalesced`` makes of ``tensors`` (02).

    It groups them with ``torch._utils._take_tensors``: tensors in order until the next would pass
    ``limit``; a tensor larger than ``limit`` gets a buffer of its own.
    """
    from torch._utils import _take_tensors

    return max((sum(t.numel() * t.element_size() for t in chunk) for chunk in _take_tensors(list(tensors), limit)),
               default=0)


def peak_moments(acc: dict, out_row_bytes: int | None = None) -> dict:
    """Each design's bytes at the two moments of a step, as ``(fixed, per sample of the global batch)`` (02).

    ``loss``: while the loss is computed (``zero_grad()`` ran before the forward, so ``.grad`` is
    None). DataParallel's output device holds the parameters, Adam's state, the loss (and the
    loss's scalar total weight); per sample, its chunk's share of the saved activations (the
    chunk's input among them), the rest of the batch, the gathered output row (the loss's input),
    the loss's saved ``log_softmax`` output row and an int64 target; the replicas' outputs are
    freed when DataParallel's forward returns (``Gather`` saves only sizes). A DDP device holds the
    same fixed bytes plus its all-reduce buckets, allocated when DDP is built and kept (a copy of
    the gradients' size with the default ``gradient_as_bucket_view=False``); per sample of the
    global batch, ``1/n`` of its activations, output row, ``log_softmax`` row and target.
    ``backward``: at the end of backward, no activations left. DataParallel's output device, at
    the peak of the reduction: the parameters, replica 0's gradients, one flat copy of the largest
    buffer (``comm.reduce_add_coalesced``) and the sum that becomes ``.grad`` (``comm.reduce_add``
    with NCCL; without it, a temporary copy of another device's buffer too, not counted), Adam's
    state, the loss; a DDP device: the parameters, ``.grad``, the buckets, Adam's state, the loss.
    ``out_row_bytes``: a what-if output row size (another number of classes; only the rows change).
    Neither counts the activations' gradients, nor the gradients that build up during backward
    while the saved activations are freed.
    """
    n, p = acc["devices"], acc["param_bytes"]
    opt = acc.get("optimizer_bytes", 0) + 4  # + the loss
    x_row, a = acc.get("input_bytes_per_sample", 0), acc["activation_bytes_per_sample"]
    row = acc["output_row_bytes"] if out_row_bytes is None else out_row_bytes
    flat = acc.get("coalesced_buffer_bytes", min(p, COALESCE_BYTES))
    return {"data_parallel": {"loss": (p + opt + 4, a / n + x_row * (1 - 1 / n) + 2 * row + 8),
                              "backward": (3 * p + flat + opt, 0.0)},
            "ddp": {"loss": (2 * p + opt + 4, (a + 2 * row + 8) / n), "backward": (3 * p + opt, 0.0)}}


def largest_batches(budget_bytes: int, acc: dict, out_row_bytes: int | None = None) -> dict:
    """Predicted largest global batch when every device has ``budget_bytes``, from :func:`peak_moments` (02).

    A design's peak is the larger of its moments' totals, not their sum: the batch is the largest
    one at which every moment fits. ``per_sample``: each design's bytes per sample of the global
    batch (at the loss, the only moment with any); ``fixed``: each moment's fixed bytes;
    ``binding``: the moment that is fullest at that batch.
    """
    moments = peak_moments(acc, out_row_bytes)
    out, binding = {}, {}
    for k, ms in moments.items():
        if any(f > budget_bytes for f, _ in ms.values()):
            out[k] = 0
        else:
            out[k] = min(int((budget_bytes - f) / per) for f, per in ms.values() if per > 0)
        binding[k] = max(ms, key=lambda m: ms[m][0] + ms[m][1] * out[k])
    return {**out, "per_sample": {k: ms["loss"][1] for k, ms in moments.items()},
            "fixed": {k: {m: f for m, (f, _) in ms.items()} for k, ms in moments.items()}, "binding": binding}
