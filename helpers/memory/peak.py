"""The peak of a training step, forward and backward, on any machine (06).

:class:`SavedTensorTracker` counts what autograd keeps for the backward: the memory left after the
forward. The backward needs more at its peak: the weights' gradients, temporaries, and what
activation checkpointing recomputes. :class:`HeldBytes` counts every tensor made while it is
active, until it is freed, so it sees those too.
"""
from __future__ import annotations

import math
import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from .recipe import deep_mlp

__all__ = ["HeldBytes", "step_peaks"]


class HeldBytes(TorchDispatchMode):
    """Bytes of the tensors made while it is active and not yet freed: ``now``, and ``peak`` (06).

    Every op's outputs count, once per storage, until the storage is freed: in a training step the
    saved activations, the gradients, the temporaries, and what checkpointing recomputes. Tensors
    made before (weights, the input) do not count, nor outputs sharing an input's storage (views,
    in-place results).
    """

    def __init__(self) -> None:
        super().__init__()
        self.live: dict[int, int] = {}
        self.now = self.peak = 0

    def _freed(self, key: int) -> None:
        self.now -= self.live.pop(key, 0)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001 (the dispatcher's signature)
        out = func(*args, **(kwargs or {}))
        inputs = {t.untyped_storage().data_ptr() for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor):
                st = t.untyped_storage()
                key = st.data_ptr()
                if key and key not in self.live and key not in inputs:
                    self.live[key] = st.nbytes()
                    self.now += st.nbytes()
                    weakref.finalize(st, self._freed, key)  # called when the storage is freed
        self.peak = max(self.peak, self.now)
        return out


def step_peaks(blocks: int = 16, width: int = 256, batch: int = 512) -> dict:
    """One forward and backward of :func:`remedies`' model, plain, under bfloat16 autocast and with
    ``checkpoint_sequential`` in √blocks segments: bytes held besides the weights (the input
    included) after the forward, at the forward's peak and at the step's peak, and the weights'
    gradients, the bytes left once the output is dropped (06)."""
    from torch.utils.checkpoint import checkpoint_sequential

    model, x = deep_mlp(blocks, width), torch.randn(batch, width)
    segments = max(1, round(math.sqrt(blocks)))

    def autocast() -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return model(x)

    forwards = {"plain": lambda: model(x), "autocast": autocast,
                "checkpoint": lambda: checkpoint_sequential(model, segments, x, use_reentrant=False)}
    res: dict = {"input_bytes": x.nbytes, "grad_bytes": sum(p.numel() * 4 for p in model.parameters())}
    for name, forward in forwards.items():
        model.zero_grad(set_to_none=True)
        with HeldBytes() as held:
            y = forward()
            after_forward, forward_peak = held.now, held.peak
            y.sum().backward()
            del y
        res[name] = {"after_forward": after_forward + x.nbytes, "forward_peak": forward_peak + x.nbytes,
                     "peak": held.peak + x.nbytes, "left": held.now}
    model.zero_grad(set_to_none=True)
    return res
