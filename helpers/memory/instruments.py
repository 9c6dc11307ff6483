"""Out-of-memory troubleshooting, measured the same way on every machine (06).

Memory is read from the GPU when there is one (``torch.cuda.memory_allocated`` and friends,
NVML/GPUtil), and everywhere with ``helpers.core.saved.SavedTensorTracker``: the bytes autograd
keeps for the backward pass, which are what leaks and what the remedies save.
"""
from __future__ import annotations

import gc
import math
from contextlib import contextmanager
from typing import Callable, Iterator

import torch
from torch import nn

from ..core.device import gpu_probe
from ..core.i18n import tr
from ..core.saved import SavedTensorTracker
from .precision import saved_split
from .recipe import deep_mlp, small_mlp

__all__ = ["gpu_status", "gpu_status_line", "cuda_memory_summary", "cuda_memory", "allocation_walkthrough",
           "leak_curve", "leak_breakdown", "saved_bytes", "remedies", "half_vs_autocast", "accumulation_check",
           "label_out_of_range_error", "mismatched_model"]


def gpu_status() -> list[dict]:
    """Utilisation and memory of every GPU (NVML, else GPUtil); ``[]`` with no GPU or driver (06)."""
    return gpu_probe()[0]


def gpu_status_line(step: int | None = None) -> str:
    """One line per GPU for printing inside a training loop, or a clean "no GPU" answer (06)."""
    rows = gpu_status()
    if not rows and step is None:
        return tr("memory.no_gpu_to_watch", "no NVIDIA GPU to watch (GPUtil sees none, and NVML does not start: no NVIDIA "
                  "driver or NVML library)")
    if not rows:
        return tr("memory.no_gpu_to_watch_at", "step {step}: no NVIDIA GPU to watch (GPUtil sees none, and NVML does not "
                  "start: no NVIDIA driver or NVML library)", step=step)
    gib = 1e9 / 2**30   # gpu_probe's rows are in GB (10**9 B); printed in GiB (2**30 B), as section 2 prints MiB
    said = [dict(index=g["index"], util=f"{g['utilization_pct']:.0f}", used=f"{g['memory_used_gb'] * gib:.2f}",
                 total=f"{g['memory_total_gb'] * gib:.1f}") for g in rows]
    return "; ".join(tr("memory.gpu_line", "GPU {index} {util}% GPU-Util, {used}/{total} GiB used", **f) if step is None
                     else tr("memory.gpu_line_at", "step {step}: GPU {index} {util}% GPU-Util, {used}/{total} GiB used",
                             step=step, **f) for f in said)


def cuda_memory_summary() -> str:
    """``torch.cuda.memory_summary()``, or what it raised while CUDA is not initialised (06).

    ``memory_summary`` reads ``memory_stats()``, which is ``{}`` until CUDA is initialised
    (``memory_stats_as_nested_dict`` in torch/cuda/memory.py), so its first lookup raises KeyError. Where MPS is
    available it raises AttributeError before that (``torch.mps`` has no ``current_device``): said without "so".
    """
    try:
        return torch.cuda.memory_summary(abbreviated=True)
    except Exception as e:
        if torch.cuda.is_initialized():
            return f"torch.cuda.memory_summary() raised {type(e).__name__}: {e}"
        said = dict(stats=dict(torch.cuda.memory_stats()), error=f"{type(e).__name__}: {e}")
        if isinstance(e, KeyError):   # the empty dict's first lookup; else it failed before
            return (tr("memory.summary_no_cuda", "CUDA not initialised (no CUDA device here, so it never is): "
                       "torch.cuda.memory_stats() is {stats}, so torch.cuda.memory_summary() raised {error}", **said)
                    if not torch.cuda.is_available() else
                    tr("memory.summary_not_init", "CUDA not initialised: torch.cuda.memory_stats() is {stats}, so "
                       "torch.cuda.memory_summary() raised {error}", **said))
        return (tr("memory.summary_no_cuda_and", "CUDA not initialised (no CUDA device here, so it never is): "
                   "torch.cuda.memory_stats() is {stats}, and torch.cuda.memory_summary() raised {error}", **said)
                if not torch.cuda.is_available() else
                tr("memory.summary_not_init_and", "CUDA not initialised: torch.cuda.memory_stats() is {stats}, and "
                   "torch.cuda.memory_summary() raised {error}", **said))


def cuda_memory(tag: str = "") -> dict:
    """Allocated, reserved and peak bytes on the current GPU, with a tag (06)."""
    if not torch.cuda.is_available():
        raise RuntimeError("cuda_memory() needs a GPU; on a CPU use SavedTensorTracker instead")
    return {"tag": tag, "allocated": torch.cuda.memory_allocated(), "reserved": torch.cuda.memory_reserved(),
            "peak_allocated": torch.cuda.max_memory_allocated()}


def allocation_walkthrough(megabytes: int = 256) -> list[dict]:
    """On a GPU: allocated/reserved/peak after allocating, after ``del``, after ``empty_cache`` (06)."""
    torch.cuda.reset_peak_memory_stats()
    rows = [cuda_memory("start")]
    x = torch.empty(megabytes * 2**20 // 4, device="cuda")
    rows.append(cuda_memory(f"after allocating {megabytes} MB"))
    del x
    rows.append(cuda_memory("after del x"))
    torch.cuda.empty_cache()
    rows.append(cuda_memory("after torch.cuda.empty_cache()"))
    return rows


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Python's cycle collector off for a measurement, back to its old state after."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def leak_curve(fixed: bool, iterations: int = 20, batch: int = 64, device: str | torch.device = "cpu") -> dict:
    """Run an evaluation loop that sums the loss; return the bytes held after each iteration (06).

    The bug: ``total += loss`` keeps each iteration's graph, with its saved activations, alive.
    The fix: ``total += loss.item()`` keeps a Python float. (``torch.no_grad()`` avoids the graph.)
    """
    device = torch.device(device)
    model = small_mlp().to(device)
    g = torch.Generator().manual_seed(0)
    held, cuda_alloc = [], []
    total: float | torch.Tensor = 0.0
    gc.collect()  # garbage of earlier work must not be freed during the measurement and look like a fix
    with _gc_paused(), SavedTensorTracker() as tracker:
        for i in range(iterations):
            x, y = torch.rand(batch, 64, generator=g).to(device), torch.randint(0, 10, (batch,), generator=g).to(device)
            loss = nn.functional.cross_entropy(model(x), y)
            total = total + (loss.item() if fixed else loss)
            del loss
            held.append(tracker.live_bytes())
            if device.type == "cuda":
                cuda_alloc.append(torch.cuda.memory_allocated(device))
    growth = [b - a for a, b in zip(held, held[1:])]
    return {"fixed": fixed, "held_bytes": held, "bytes_per_iter": growth[-1] if growth else 0,
            "constant_growth": len(set(growth)) <= 1, "cuda_allocated": cuda_alloc,
            "total_loss": float(total.detach() if torch.is_tensor(total) else total)}


def leak_breakdown(batch: int = 64, classes: int = 10, features: int = 64, hidden: int = 256,
                   block: int = 512) -> dict:
    """What one iteration of the leak keeps, tensor by tensor, from the shapes alone (06).

    ``cross_entropy`` is ``log_softmax`` then ``nll_loss``; the latter saves the log-softmax, the
    targets and a one-element ``total_weight`` (its ``grad_fn._saved_total_weight``), not the loss.

    ``rounded`` is each tensor rounded up to a multiple of ``block`` bytes, as CUDA's caching allocator
    rounds every request with its default settings (``round_size``; ``kMinBlockSize = 512`` in
    ``c10/core/AllocatorConfig.h``); a tensor of 1 MiB or less gets a block of exactly that size.
    """
    parts = {"input (float32)": batch * features * 4, "ReLU output 1 (float32)": batch * hidden * 4,
             "ReLU output 2 (float32)": batch * hidden * 4, "log-softmax (float32)": batch * classes * 4,
             "targets (int64)": batch * 8, "nll_loss's total_weight (float32)": 4}
    return {"parts": parts, "total": sum(parts.values()),
            "rounded": sum(-(-b // block) * block for b in parts.values()), "block": block}


def saved_bytes(fn: Callable[[], torch.Tensor]) -> int:
    """Peak bytes of saved tensors while ``fn`` runs its forward pass (06)."""
    with SavedTensorTracker() as t:
        out = fn()
        peak = t.peak
    del out
    return peak


def remedies(blocks: int = 16, width: int = 256, batch: int = 512, device: str | torch.device = "cpu") -> dict:
    """Saved-activation bytes of one forward: plain, no_grad, inference_mode, 16-bit autocast, checkpointing (06).

    Autocast runs in bfloat16 wherever the device supports it, on CUDA too (where autocast's default
    is float16), else float16; ``autocast_dtype`` names the type used.
    """
    from torch.utils.checkpoint import checkpoint_sequential

    device = torch.device(device)
    model = deep_mlp(blocks, width).to(device)
    x = torch.randn(batch, width, device=device)
    segments = max(1, round(math.sqrt(blocks)))
    dtype16 = torch.bfloat16 if device.type == "cpu" else (torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16)

    def plain() -> torch.Tensor:
        return model(x)

    def no_grad() -> torch.Tensor:
        with torch.no_grad():
            return model(x)

    def inference() -> torch.Tensor:
        with torch.inference_mode():
            return model(x)

    def autocast() -> torch.Tensor:
        with torch.autocast(device.type, dtype=dtype16):
            return model(x)

    def checkpointed() -> torch.Tensor:
        return checkpoint_sequential(model, segments, x, use_reentrant=False)

    out = {name: saved_bytes(f) for name, f in
           (("plain", plain), ("no_grad", no_grad), ("inference_mode", inference), ("autocast", autocast),
            ("checkpoint", checkpointed))}
    split = saved_split(autocast)
    out["autocast_activations"], out["autocast_weight_casts"] = split["activations"], split["weight_casts"]
    out["blocks"], out["width"], out["batch"] = blocks, width, batch
    out["checkpoint_blocks"] = blocks
    out["checkpoint_segments"] = segments
    out["autocast_dtype"] = str(dtype16).replace("torch.", "")
    # In block-activations A (batch × width floats): plain keeps the input and every block's output,
    # blocks + 1; checkpoint_sequential's count is derived in notebook 06 (exercise 2), from its docstring.
    activation = batch * width * x.element_size()
    out["activation_bytes"] = activation
    out["plain_expected"] = (blocks + 1) * activation
    out["checkpoint_expected"] = int((segments + blocks / segments) * activation)
    return out


def half_vs_autocast(blocks: int = 8, width: int = 256, batch: int = 256) -> dict:
    """Bytes of weights and of saved activations: fp32, ``.half()`` (everything fp16) and fp16 autocast (06).

    ``.half()`` halves the weights and the activations but leaves no fp32 copy to update;
    autocast keeps fp32 weights (and makes fp16 copies of them for the matmuls) and saves fp16
    activations for the layers it runs in fp16.
    """
    model = deep_mlp(blocks, width)
    x = torch.randn(batch, width)
    half = deep_mlp(blocks, width).half()
    out = {"params_fp32": sum(p.numel() * p.element_size() for p in model.parameters()),   # measured, each
           "params_half": sum(p.numel() * p.element_size() for p in half.parameters()),
           "saved_fp32": saved_bytes(lambda: model(x))}
    out["saved_half"] = saved_bytes(lambda: half(x.half()))
    with torch.autocast("cpu", dtype=torch.float16):
        split = saved_split(lambda: model(x))
    out["saved_autocast"] = split["total"]
    out["autocast_activations"], out["autocast_weight_casts"] = split["activations"], split["weight_casts"]
    out["weight_bytes_fp16"] = width * width * 2  # one block's weight as a 16-bit copy
    try:  # GradScaler refuses fp16 gradients: the update must happen in fp32
        scaler, opt = torch.amp.GradScaler("cpu"), torch.optim.SGD(half.parameters(), lr=0.1)
        scaler.scale(half(x.half()).float().mean()).backward()
        scaler.unscale_(opt)
        out["half_gradscaler_error"] = ""
    except ValueError as e:
        out["half_gradscaler_error"] = str(e)
    return out


def accumulation_check(batch: int = 256, steps: int = 4, width: int = 256) -> dict:
    """Gradient accumulation over ``steps`` micro-batches vs one big batch: same gradient, less held (06)."""
    model = deep_mlp(4, width)
    x = torch.randn(batch, width)
    y = torch.randint(0, width, (batch,))

    def grads() -> list[torch.Tensor]:
        out = [p.grad.clone() for p in model.parameters()]
        model.zero_grad(set_to_none=True)
        return out

    with SavedTensorTracker() as t:
        nn.functional.cross_entropy(model(x), y).backward()
        big_peak = t.peak
    big = grads()
    # each micro-batch its own tensors, as a loader delivers them (a view from .chunk() would make the
    # tracker count the whole batch's storage behind it)
    micro = [(xb.clone(), yb.clone()) for xb, yb in zip(x.chunk(steps), y.chunk(steps))]
    with SavedTensorTracker() as t:
        for xb, yb in micro:
            (nn.functional.cross_entropy(model(xb), yb) / steps).backward()  # / steps: the mean over the batch
        acc_peak = t.peak
    acc = grads()
    return {"max_abs_diff": max((a - b).abs().max().item() for a, b in zip(big, acc)),
            "peak_big_batch": big_peak, "peak_accumulated": acc_peak, "steps": steps}


def label_out_of_range_error() -> str:
    """The message a label of 10 for 10 classes gives on the CPU, where it is readable (06)."""
    logits, labels = torch.randn(4, 10), torch.tensor([1, 2, 10, 3])
    try:
        nn.functional.cross_entropy(logits, labels)
    except IndexError as e:
        return f"IndexError: {e}"
    raise AssertionError("expected an IndexError for label 10 with 10 classes")


def mismatched_model() -> nn.Module:
    """A CNN whose head expects the wrong number of features: the classic shape error (06)."""
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(8 * 8 * 8, 10))  # wrong: after the pool the image is 4×4, not 8×8
