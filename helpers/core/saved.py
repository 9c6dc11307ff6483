"""What autograd keeps for the backward pass, counted: the course's memory instrument (02, 06).

:class:`SavedTensorTracker`, built on ``torch.autograd.graph.saved_tensors_hooks``, sees every
tensor autograd saves for backward and counts the bytes still held. That is the memory a training
step's graph keeps alive — the memory that leaks, and the memory the remedies save — and it can be
measured on a CPU as well as on a GPU.
"""
from __future__ import annotations

import weakref

import torch
from torch import nn


class BudgetExceeded(RuntimeError):
    """Raised by a :class:`SavedTensorTracker` with a budget: the CPU stand-in for CUDA's OOM (06)."""


class _Saved:
    __slots__ = ("tensor", "__weakref__")

    def __init__(self, tensor: torch.Tensor) -> None:
        self.tensor = tensor


def _is_parameter(t: torch.Tensor) -> bool:
    """A parameter, or a view of one (``weight.t()`` as Linear saves it): memory that exists anyway."""
    if isinstance(t, nn.Parameter) or (t.is_leaf and t.requires_grad):
        return True
    base = t._base
    return base is not None and (isinstance(base, nn.Parameter) or (base.is_leaf and base.requires_grad))


class SavedTensorTracker:
    """Count the bytes autograd keeps for backward while it is active: live now, and at peak (06).

    Parameters saved by a layer (its weights) are not counted: they exist anyway. A tensor
    saved twice (or as two views of one storage) is counted once. With ``budget_bytes``, a
    save that would take the live total over the budget raises :class:`BudgetExceeded` —
    a memory *budget* to practise on, not the machine's memory.
    """

    def __init__(self, budget_bytes: int | None = None) -> None:
        if budget_bytes is not None and (not isinstance(budget_bytes, int) or budget_bytes <= 0):
            raise ValueError(f"budget_bytes must be a positive int or None, got {budget_bytes!r}")
        self.budget = budget_bytes
        self._saved: weakref.WeakSet[_Saved] = weakref.WeakSet()
        self.peak = 0
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)

    def _pack(self, t: torch.Tensor):
        if _is_parameter(t):
            return t
        obj = _Saved(t.detach())  # detached: holding t itself would tie a cycle back to its grad_fn
        self._saved.add(obj)
        live = self.live_bytes()
        if self.budget is not None and live > self.budget:
            self._saved.discard(obj)
            raise BudgetExceeded(f"out of memory (budget): autograd would hold {live:,} B of saved tensors, "
                                 f"over the budget of {self.budget:,} B")
        self.peak = max(self.peak, live)
        return obj

    @staticmethod
    def _unpack(obj):
        return obj.tensor if isinstance(obj, _Saved) else obj

    def live_bytes(self) -> int:
        """Bytes of saved tensors still held by some graph (each storage once)."""
        seen: dict[int, int] = {}
        for obj in list(self._saved):
            st = obj.tensor.untyped_storage()
            seen[st.data_ptr()] = st.nbytes()
        return sum(seen.values())

    def reset_peak(self) -> None:
        self.peak = self.live_bytes()

    def __enter__(self) -> "SavedTensorTracker":
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._hooks.__exit__(*exc)
