"""``nn.DataParallel`` and the four steps inside it: the code notebook 02 teaches (its recipe).

``nn.DataParallel`` runs one training step as: **scatter** the batch over the devices,
**replicate** the model onto each, **parallel_apply** the replicas in Python threads, **gather**
the outputs onto the output device; then the loss there, and backward through the replicas,
which sums the gradients onto the original model. :func:`four_steps_gpu` calls those four
``torch.nn.parallel`` primitives one by one; they need CUDA and two GPUs.
"""
from __future__ import annotations

from contextlib import nullcontext

import torch
from torch import nn

from ..core.device import gpu_count

__all__ = ["wrap_data_parallel", "four_steps_gpu"]


def wrap_data_parallel(model: nn.Module) -> nn.DataParallel:
    """``nn.DataParallel(model)`` on the GPUs there are; on a CPU it is a pass-through, ``device_ids == []`` (02)."""
    if gpu_count():
        model = model.to("cuda:0")
    return nn.DataParallel(model)


def four_steps_gpu(model: nn.Module, x: torch.Tensor, y: torch.Tensor, device_ids: list[int], record=None) -> dict:
    """One step with ``torch.nn.parallel``'s scatter/replicate/parallel_apply/gather (02, ≥ 2 GPUs).

    ``record`` (optional) is called as ``record(times, name)`` around each step and gives a ``with``
    block; the instruments pass ``helpers.data_parallel.timing.timing``, which adds the step's
    seconds to ``times[name]``. Without it ``times`` stays empty.
    """
    from torch.nn.parallel import gather, parallel_apply, replicate, scatter

    record = record or (lambda times, name: nullcontext())
    times: dict[str, float] = {}
    out_dev = device_ids[0]
    for d in device_ids:  # with no argument it resets only the current device
        torch.cuda.reset_peak_memory_stats(d)
    with record(times, "scatter"):
        inputs = scatter(x, device_ids)
    with record(times, "replicate"):
        replicas = replicate(model, device_ids[:len(inputs)])
    with record(times, "apply"):
        outputs = parallel_apply(replicas, [(i,) for i in inputs], None, device_ids[:len(replicas)])  # each thread on its GPU
    with record(times, "gather"):
        out = gather(outputs, out_dev)
    loss = nn.functional.cross_entropy(out, y.to(out_dev))
    with record(times, "backward"):
        loss.backward()
    peaks = {f"cuda:{d}": torch.cuda.max_memory_allocated(d) for d in device_ids}
    return {"path": f"torch.nn.parallel on {len(device_ids)} GPUs", "times": times, "loss": loss.item(),
            "peak_bytes": peaks}
