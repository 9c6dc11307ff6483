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
    saved twice (or as two views of one storage) is counted once. With ``views="span"`` a saved
    view counts only the bytes it spans in its storage, not its base's whole storage (02: a chunk
    ``x[:128]`` of a batch the caller holds anyway); the default ``"storage"`` counts whole
    storages. With ``budget_bytes``, a save that would take the live total over the budget
    raises :class:`BudgetExceeded` — a memory *budget* to practise on, not the machine's memory.
    """

    def __init__(self, budget_bytes: int | None = None, views: str = "storage") -> None:
        if budget_bytes is not None and (not isinstance(budget_bytes, int) or budget_bytes <= 0):
            raise ValueError(f"budget_bytes must be a positive int or None, got {budget_bytes!r}")
        if views not in ("storage", "span"):
            raise ValueError(f'views must be "storage" or "span", got {views!r}')
        self.budget, self.views = budget_bytes, views
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
        """Bytes of saved tensors still held by some graph: each storage once (``views="storage"``), or
        per storage the union of the bytes the saved tensors span (``views="span"``: a chunk ``x[:128]``
        counts its own rows, not the whole batch it is a view of)."""
        if self.views == "storage":
            seen: dict[int, int] = {}
            for obj in list(self._saved):
                st = obj.tensor.untyped_storage()
                seen[st.data_ptr()] = st.nbytes()
            return sum(seen.values())
        spans: dict[int, list[tuple[int, int]]] = {}
        for obj in list(self._saved):
            t = obj.tensor
            if t.numel() == 0:
                continue
            size = t.element_size()
            start = (t.storage_offset() + sum((n - 1) * s for n, s in zip(t.shape, t.stride()) if s < 0)) * size
            end = (t.storage_offset() + 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride()) if s > 0)) * size
            spans.setdefault(t.untyped_storage().data_ptr(), []).append((start, end))
        total = 0
        for ranges in spans.values():  # the union of each storage's spans
            reach = -1
            for start, end in sorted(ranges):
                total += max(0, end - max(start, reach))
                reach = max(reach, end)
        return total

    def reset_peak(self) -> None:
        self.peak = self.live_bytes()

    def __enter__(self) -> "SavedTensorTracker":
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._hooks.__exit__(*exc)
