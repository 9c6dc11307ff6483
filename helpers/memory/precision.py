"""16-bit training measured: autocast's weight copies apart from activations, and GradScaler (06).

What float16 does to small gradients and to large ones, with the loss computed in float32 as
PyTorch's AMP recipe does, and bfloat16 beside it.
"""
from __future__ import annotations

import weakref
from typing import Callable

import torch
from torch import nn

from ..core.saved import SavedTensorTracker, _Saved

__all__ = ["CastSplitTracker", "saved_split", "underflow_demo", "big_gradient_problem", "largest_gradient"]


class CastSplitTracker(SavedTensorTracker):
    """A :class:`SavedTensorTracker` that tells activations from autocast's 16-bit weight copies (06).

    Under autocast a Linear's matmul saves the 16-bit copy of its weight (``weight.to(float16)``,
    a ``ToCopyBackward`` node whose input is a parameter) for the backward: memory that scales
    with the model, not with the batch. ``cast_bytes()`` counts those copies; the rest are
    activations (``activation_bytes()``).
    """

    def __init__(self, budget_bytes: int | None = None) -> None:
        super().__init__(budget_bytes)
        self._casts: "weakref.WeakSet[_Saved]" = weakref.WeakSet()

    @staticmethod
    def _is_weight_cast(t: torch.Tensor) -> bool:
        src = t._base if t._base is not None else t
        node = src.grad_fn
        if node is None or not type(node).__name__.startswith("ToCopyBackward"):
            return False
        nxt = node.next_functions[0][0] if node.next_functions else None
        return isinstance(getattr(nxt, "variable", None), nn.Parameter)

    def _pack(self, t: torch.Tensor):
        cast = self._is_weight_cast(t)
        obj = super()._pack(t)
        if cast and isinstance(obj, _Saved):
            self._casts.add(obj)
        return obj

    def cast_bytes(self) -> int:
        """Bytes of 16-bit weight copies still saved (each storage once)."""
        return sum({o.tensor.untyped_storage().data_ptr(): o.tensor.untyped_storage().nbytes()
                    for o in list(self._casts)}.values())

    def activation_bytes(self) -> int:
        """Bytes of everything else still saved: the activations."""
        return self.live_bytes() - self.cast_bytes()


def saved_split(fn: Callable[[], torch.Tensor]) -> dict:
    """Bytes saved for backward by ``fn``'s forward, activations apart from 16-bit weight copies (06)."""
    with CastSplitTracker() as t:
        out = fn()
        split = {"activations": t.activation_bytes(), "weight_casts": t.cast_bytes(), "total": t.live_bytes(),
                 "peak": t.peak}
    del out
    return split


def _tiny_regressor(seed: int = 0) -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1)), torch.randn(8, 16)


def underflow_demo(tiny: float = 1e-6) -> dict:
    """Small gradients in 16-bit, with the loss computed in float32 (a mean of ``out.float()``) (06).

    A small MLP whose float32 loss is multiplied by ``tiny`` (small gradients, as late in
    training). The first layer's weight gradient: in float32; under float16 autocast without
    scaling (the backward runs in float16 and the smallest values flush to zero); under float16
    autocast with ``GradScaler`` (loss scaled by 2**16, gradients unscaled in float32); and under
    bfloat16 autocast without any scaler (bfloat16 has float32's exponent range).
    """
    model, x = _tiny_regressor()

    def grad(dtype: torch.dtype | None, scaler: torch.amp.GradScaler | None = None) -> torch.Tensor:
        model.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=dtype or torch.float16, enabled=dtype is not None):
            out = model(x)
        loss = out.float().mean() * tiny  # the loss in float32, outside autocast
        (scaler.scale(loss) if scaler else loss).backward()
        if scaler:  # what scaler.step(opt) does first: divide the gradients by the scale, in float32
            scaler.unscale_(torch.optim.SGD(model.parameters(), lr=0.0))
        return model[0].weight.grad.detach().clone()

    ref = grad(None)
    scaler = torch.amp.GradScaler("cpu")
    runs = {"fp16": grad(torch.float16), "fp16_scaled": grad(torch.float16, scaler), "bf16": grad(torch.bfloat16)}
    nonzero = lambda g: float((g != 0).float().mean())  # noqa: E731
    rel = lambda g: float((g - ref).abs().max() / ref.abs().max())  # noqa: E731
    return {"tiny": tiny, "scale": scaler.get_scale(), "fp32_nonzero": nonzero(ref),
            **{f"{k}_nonzero": nonzero(g) for k, g in runs.items()},
            **{f"{k}_rel_error": rel(g) for k, g in runs.items()}}


def big_gradient_problem(target: float = 100.0, seed: int = 0) -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    """A regression whose targets (``target``, all equal) are far from the untrained outputs: large gradients (06).

    Scaled by GradScaler's first scale, 2**16, such gradients exceed float16's largest number,
    65,504: the overflow the scaler is built to detect.
    """
    model, x = _tiny_regressor(seed)
    return model, x, torch.full((x.shape[0], 1), target)


def largest_gradient(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """The largest |gradient| of any parameter for an MSE loss, in float32 (06)."""
    model.zero_grad(set_to_none=True)
    nn.functional.mse_loss(model(x), y).backward()
    big = max(p.grad.abs().max().item() for p in model.parameters())
    model.zero_grad(set_to_none=True)
    return big
