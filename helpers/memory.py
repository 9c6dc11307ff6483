"""Out-of-memory troubleshooting, measured the same way on every machine (06_oom_troubleshooting).

The central tool is :class:`SavedTensorTracker`: built on
``torch.autograd.graph.saved_tensors_hooks``, it sees every tensor autograd saves for the
backward pass and counts the bytes that are still held. That is the memory a training step's
graph keeps alive — the memory that leaks, and the memory the remedies save — and it can be
measured on a CPU as well as on a GPU. On a GPU the notebook also reads
``torch.cuda.memory_allocated``.
"""
from __future__ import annotations

import gc
import math
import weakref
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator

import torch
from torch import nn

from .device import gputil_gpus, nvml_gpus
from .checks import Exercise


# --- watching the device ---------------------------------------------------------------------------

def gpu_status() -> list[dict]:
    """Utilisation and memory of every GPU (NVML, else GPUtil); ``[]`` with no GPU or driver (06)."""
    return nvml_gpus() or gputil_gpus()


def gpu_status_line(step: int | None = None) -> str:
    """One line per GPU for printing inside a training loop, or a clean "no GPU" answer (06)."""
    rows = gpu_status()
    prefix = f"step {step}: " if step is not None else ""
    if not rows:
        return prefix + "no GPU (GPUtil sees none, NVML has no driver): nothing to watch"
    return "; ".join(f"{prefix}GPU {g['index']} {g['utilization_pct']:.0f}% busy, "
                     f"{g['memory_used_gb']:.2f}/{g['memory_total_gb']:.1f} GB" for g in rows)


def cuda_memory_summary() -> str:
    """``torch.cuda.memory_summary()``, or why there is none (on a CPU it raises ``KeyError``) (06)."""
    if not torch.cuda.is_available():
        return "no CUDA device: torch.cuda.memory_summary() has nothing to report (it raises KeyError here)"
    return torch.cuda.memory_summary(abbreviated=True)


def cuda_memory(tag: str = "") -> dict:
    """Allocated, reserved and peak bytes on the current GPU, with a tag (06)."""
    if not torch.cuda.is_available():
        raise RuntimeError("cuda_memory() needs a GPU; on a CPU use SavedTensorTracker instead")
    return {"tag": tag, "allocated": torch.cuda.memory_allocated(), "reserved": torch.cuda.memory_reserved(),
            "peak_allocated": torch.cuda.max_memory_allocated()}


# --- the saved-tensor tracker ------------------------------------------------------------------------

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


# --- the accumulation leak --------------------------------------------------------------------------

def small_mlp(seed: int = 0) -> nn.Module:
    """The small MLP of the leak demonstration: 64 → 256 → 256 → 10 (06)."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))


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


# --- errors, decoded ------------------------------------------------------------------------------------

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


# --- remedies ------------------------------------------------------------------------------------------

class Block(nn.Module):
    """Linear + ReLU of one width: the unit that activation checkpointing stores or recomputes (06)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.lin = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.lin(x))


def deep_mlp(blocks: int = 16, width: int = 256, seed: int = 0) -> nn.Sequential:
    """``blocks`` identical Linear+ReLU blocks (06)."""
    torch.manual_seed(seed)
    return nn.Sequential(*[Block(width) for _ in range(blocks)])


def saved_bytes(fn: Callable[[], torch.Tensor]) -> int:
    """Peak bytes of saved tensors while ``fn`` runs its forward pass (06)."""
    with SavedTensorTracker() as t:
        out = fn()
        peak = t.peak
    del out
    return peak


def remedies(blocks: int = 16, width: int = 256, batch: int = 512, device: str | torch.device = "cpu") -> dict:
    """Saved-activation bytes of one forward: plain, no_grad, inference_mode, 16-bit autocast, checkpointing (06)."""
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
    out["checkpoint_blocks"] = blocks
    out["checkpoint_segments"] = segments
    out["autocast_dtype"] = str(dtype16).replace("torch.", "")
    # In block-activations A (batch × width floats): plain keeps the input and every block's output,
    # blocks + 1; checkpoint_sequential keeps every segment's input and runs the last segment
    # normally, keeping its blocks' outputs too: segments + blocks / segments, i.e. 2√n for √n segments.
    activation = batch * width * x.element_size()
    out["activation_bytes"] = activation
    out["plain_expected"] = (blocks + 1) * activation
    out["checkpoint_expected"] = int((segments + blocks / segments) * activation)
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
    with SavedTensorTracker() as t:
        for xb, yb in zip(x.chunk(steps), y.chunk(steps)):
            (nn.functional.cross_entropy(model(xb), yb) / steps).backward()  # / steps: the mean over the batch
        acc_peak = t.peak
    acc = grads()
    return {"max_abs_diff": max((a - b).abs().max().item() for a, b in zip(big, acc)),
            "peak_big_batch": big_peak, "peak_accumulated": acc_peak, "steps": steps}


# --- finding the largest batch that fits ---------------------------------------------------------------

def is_oom(err: BaseException) -> bool:
    """Whether an exception is an out-of-memory error (CUDA's, MPS's, or the CPU budget's) (06)."""
    if isinstance(err, (BudgetExceeded, torch.cuda.OutOfMemoryError)):
        return True
    return isinstance(err, RuntimeError) and "out of memory" in str(err)


@dataclass
class BatchSearch:
    """The result of :func:`find_largest_batch`: the batch found and every size tried."""

    batch_size: int
    tried: list[tuple[int, bool]] = field(default_factory=list)  # (size, fitted)


def find_largest_batch(step: Callable[[int], object], start: int = 4096, minimum: int = 1,
                       refine: bool = True) -> BatchSearch:
    """Largest batch size for which ``step(batch_size)`` runs without running out of memory (06).

    Halves from ``start`` until a step fits (like Accelerate's ``find_executable_batch_size``),
    then, with ``refine``, bisects between the last size that failed and the first that fitted.
    Memory is freed *outside* the ``except`` block: inside it, the traceback still references
    the failed step's tensors.
    """
    if not isinstance(start, int) or start < 1 or not isinstance(minimum, int) or minimum < 1:
        raise ValueError(f"start and minimum must be positive ints, got start={start!r}, minimum={minimum!r}")
    tried: list[tuple[int, bool]] = []

    def fits(bs: int) -> bool:
        failed = False
        try:
            step(bs)
        except Exception as e:  # only OOMs are retried; anything else is a real bug
            if not is_oom(e):
                raise
            failed = True
        if failed:  # outside the except block, so the failed step's frames can be freed
            gc.collect()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        tried.append((bs, not failed))
        return not failed

    bs = start
    while not fits(bs):
        if bs <= minimum:
            raise RuntimeError(f"even batch size {minimum} does not fit; make the model smaller or free memory")
        bs = max(minimum, bs // 2)
    good, bad = bs, (bs * 2 if bs < start else None)
    if refine and bad is not None:
        while bad - good > max(1, good // 64):  # within ~1.5 %
            mid = (good + bad) // 2
            if fits(mid):
                good = mid
            else:
                bad = mid
    return BatchSearch(good, tried)


def training_step_under_budget(budget_bytes: int, width: int = 256, blocks: int = 4) -> Callable[[int], None]:
    """A training step of a deep MLP whose saved tensors must stay under ``budget_bytes`` (06, CPU path)."""
    model = deep_mlp(blocks, width)

    def step(batch_size: int) -> None:
        x = torch.randn(batch_size, width)
        with SavedTensorTracker(budget_bytes):
            loss = model(x).square().mean()
        loss.backward()
        model.zero_grad(set_to_none=True)

    return step


def training_step_on_gpu(width: int = 4096, blocks: int = 8) -> Callable[[int], None]:
    """A real training step on the GPU, for the search under a memory fraction (06, GPU path)."""
    model = deep_mlp(blocks, width).cuda()

    def step(batch_size: int) -> None:
        x = torch.randn(batch_size, width, device="cuda")
        model(x).square().mean().backward()
        model.zero_grad(set_to_none=True)
        torch.cuda.synchronize()

    return step


# --- plots --------------------------------------------------------------------------------------------

def plot_leak(bug: dict, fix: dict, label: str = ""):
    """Bytes held by autograd after each iteration, for the bug and the fix (06)."""
    import matplotlib.pyplot as plt

    from .plots import finish

    fig, ax = plt.subplots(figsize=(6.5, 3.4))
    it = range(1, len(bug["held_bytes"]) + 1)
    ax.plot(it, [b / 1e6 for b in bug["held_bytes"]], "o-", color="C3", label="total += loss  (bug)")
    ax.plot(it, [b / 1e6 for b in fix["held_bytes"]], "s-", color="C2", label="total += loss.item()  (fix)")
    ax.set(xlabel="iteration", ylabel="MB held by autograd's saved tensors", title="the accumulation leak")
    ax.grid(alpha=0.3)
    ax.legend()
    if label:
        fig.suptitle(label, fontsize=9)
    fig.tight_layout()
    return finish(fig)


def plot_remedies(rem: dict, label: str = ""):
    """Saved bytes of one forward under each remedy, as bars (06)."""
    import matplotlib.pyplot as plt

    from .plots import finish

    names = ["plain", "autocast", "checkpoint", "no_grad", "inference_mode"]
    fig, ax = plt.subplots(figsize=(7, 3.2))
    bars = ax.bar(names, [rem[n] / 1e6 for n in names], color=["C0", "C1", "C4", "C2", "C2"])
    for b, n in zip(bars, names):
        ax.text(b.get_x() + b.get_width() / 2, b.get_height(), f"{rem[n] / rem['plain']:.0%}", ha="center", va="bottom",
                fontsize=8)
    ax.set(ylabel="MB saved for backward", title=f"one forward of {rem['checkpoint_blocks']} blocks: what each remedy keeps")
    ax.grid(alpha=0.3, axis="y")
    if label:
        fig.suptitle(label, fontsize=9)
    fig.tight_layout()
    return finish(fig)


def plot_batch_search(search: BatchSearch, label: str = ""):
    """The batch sizes tried, in order, green when they fitted and red when they ran out (06)."""
    import matplotlib.pyplot as plt

    from .plots import finish

    fig, ax = plt.subplots(figsize=(6.5, 3.2))
    for i, (bs, ok) in enumerate(search.tried):
        ax.scatter(i + 1, bs, color="C2" if ok else "C3", zorder=3)
    ax.plot(range(1, len(search.tried) + 1), [b for b, _ in search.tried], color="gray", lw=0.8)
    ax.axhline(search.batch_size, color="C2", ls=":", label=f"largest that fits: {search.batch_size}")
    ax.set(xlabel="attempt", ylabel="batch size", yscale="log", title="finding the largest batch (red: out of memory)")
    ax.grid(alpha=0.3)
    ax.legend()
    if label:
        fig.suptitle(label, fontsize=9)
    fig.tight_layout()
    return finish(fig)


def _leak_batch128() -> int:
    return leak_curve(False, iterations=3, batch=128)["bytes_per_iter"]


EXERCISES = [
    Exercise("06.leak_batch128", "int", compute=_leak_batch128,
             hint="List the tensors each iteration saves (input, both ReLU outputs, the log-softmax, the targets, "
                  "one scalar): which of them grow with the batch, and by how many bytes per sample?",
             why="The leak grows linearly with the batch: a bigger batch hits the wall sooner."),
    Exercise("06.checkpoint_n64", "int", digest="a832cc9d987dc6b16f7ad3788848204ecf9ae7619c190257e8d29acf4f15972a",
             hint="With s segments you keep each segment's input, plus the outputs of the one segment being "
                  "recomputed.",
             why="√n segments keep O(√n) activations instead of n: memory for one extra forward."),
    Exercise("06.fp16_bytes", "int", digest="bdf13d280865baba92e50868439e33ab355a535ca70ddc3f170aabd3f2c66ced",
             hint="How many bytes does one float16 number take?",
             why="Half of float32: 16-bit halves activations and weights alike."),
]
