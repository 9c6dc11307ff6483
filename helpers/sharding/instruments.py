"""Sharding, measured: exact bytes of training state each rank holds, the collectives each step sends, step times (09).

The instruments of notebook 09: they train the recipe's strategies (DDP, ZeRO-1, FSDP2, tensor
parallelism) on real processes, count the bytes of parameters, gradients and optimizer state a
rank holds (a DTensor's local shard, a ZeRO partition's state), record each collective with its
payload (:class:`CollectiveBytes`) and time the steps.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Callable

import torch
import torch.distributed as dist
from torch import nn
try:
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor.debug import CommDebugMode
except ImportError:  # torch < 2.5: DTensor's namespace was private (pytorch/pytorch#133881)
    from torch.distributed._tensor import DTensor
    from torch.distributed._tensor.debug import CommDebugMode
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode

from ..core.measure import fit_alpha_beta
from ..launching.ranks import local_device
from ..launching.timing import slowest_seconds_per_call
from .recipe import make_model

__all__ = ["FAMILY", "WIRE_FACTOR", "CollectiveBytes", "local_tensor", "rank_bytes", "ddp_bucket_bytes", "GatheredPeak",
           "synthetic_regression", "train_step", "reference_parameters", "full_parameters", "fit_link", "comm_seconds",
           "plain_rest", "best_time"]

# Each collective op the dispatcher sees (c10d's and the functional ones), by the collective it is:
FAMILY = {"allreduce_": "all_reduce", "all_reduce": "all_reduce", "_allgather_base_": "all_gather",
          "allgather_": "all_gather", "all_gather_into_tensor": "all_gather", "_reduce_scatter_base_": "reduce_scatter",
          "reduce_scatter_": "reduce_scatter", "reduce_scatter_tensor": "reduce_scatter", "broadcast_": "broadcast"}
# and the share of its payload a rank sends with ring algorithms, times (N - 1)/N: on average per rank
# (every rank sends it in a ring all-reduce, all-gather or reduce-scatter; a broadcast's root sends more)
WIRE_FACTOR = {"all_reduce": 2, "all_gather": 1, "reduce_scatter": 1, "broadcast": 1}


class CollectiveBytes(CommDebugMode):
    """``CommDebugMode`` that also adds up each collective's payload in bytes, and the bytes a rank sends (09).

    The payload is the largest tensor the collective touches (the whole message: an all-gather's
    output, a reduce-scatter's input); ``wire`` applies :data:`WIRE_FACTOR` · (N − 1)/N, on average per rank. It sees
    DDP's bucket all-reduces, ZeRO's broadcasts, FSDP2's all-gathers and reduce-scatters, and
    DTensor's collectives (``get_comm_counts()`` still works).
    """

    def __init__(self) -> None:
        super().__init__()
        self.calls: dict[str, int] = defaultdict(int)
        self.payload: dict[str, int] = defaultdict(int)
        self.wire = 0.0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001 (the dispatcher's signature)
        out = super().__torch_dispatch__(func, types, args, kwargs)
        if out is NotImplemented or isinstance(func, torch._ops.HigherOrderOperator):
            return out
        name = str(func._overloadpacket).split(".")[-1]
        if name in FAMILY:
            leaves = torch.utils._pytree.tree_leaves((args, kwargs))
            nbytes = max((t.numel() * t.element_size() for t in leaves if isinstance(t, torch.Tensor)), default=0)
            n = dist.get_world_size()
            self.calls[name] += 1
            self.payload[name] += nbytes
            self.wire += WIRE_FACTOR[FAMILY[name]] * (n - 1) / n * nbytes
        return out

    def summary(self) -> dict:
        """Calls and payload bytes by collective, and the bytes a rank sends on average (09)."""
        return {"calls": dict(self.calls), "payload": dict(self.payload), "wire_bytes": self.wire,
                "messages": sum(self.calls.values())}


def local_tensor(t: torch.Tensor) -> torch.Tensor:
    """What this rank really holds of ``t``: a DTensor's local shard, a plain tensor itself (09)."""
    return t.to_local() if isinstance(t, DTensor) else t


def _nbytes(tensors) -> int:
    return sum(local_tensor(t).numel() * local_tensor(t).element_size() for t in tensors)


def rank_bytes(model: nn.Module, opt: torch.optim.Optimizer) -> dict[str, int]:
    """Bytes of the parameter, gradient and optimizer-state tensors this rank holds, and Adam's scalar step counters (09).

    For ZeRO-1 the state is that of this rank's partition (``opt.optim``); for DTensors the local shard.
    Nothing else: not activations, DDP's buckets (see :func:`ddp_bucket_bytes`), FSDP's gathered
    parameters (see :class:`GatheredPeak`), the allocator's cache.
    """
    state = getattr(opt, "optim", opt).state  # ZeroRedundancyOptimizer wraps the local optimizer
    tensors = [v for s in state.values() for v in s.values() if isinstance(v, torch.Tensor)]
    return {"params": _nbytes(model.parameters()),
            "grads": _nbytes(p.grad for p in model.parameters() if p.grad is not None),
            "optim": _nbytes(t for t in tensors if t.dim() > 0),
            "optim_scalars": _nbytes(t for t in tensors if t.dim() == 0)}


def ddp_bucket_bytes(net: nn.Module) -> dict[str, int]:
    """Bytes of DDP's gradient buckets, as DDP reports them (``_get_ddp_logging_data``), how many storages the
    gradients live in, and whether those are the buckets (``gradient_as_bucket_view=True``) (09)."""
    data = net._get_ddp_logging_data()
    sizes = data.get("rebuilt_bucket_sizes") or data.get("bucket_sizes") or ""
    bucket = sum(int(x) for x in str(sizes).split(",") if x.strip())
    storages = {p.grad.untyped_storage().data_ptr(): p.grad.untyped_storage().nbytes()
                for p in net.module.parameters() if p.grad is not None}
    return {"buckets": bucket, "grad_storages": len(storages), "grads_are_buckets": bool(data.get("gradient_as_bucket_view"))
            and sum(storages.values()) == bucket}


def _unsharded_storages(model: nn.Module) -> dict[int, int]:
    """Storages (address: bytes) of the whole parameters FSDP2's layers hold now (``_unsharded_param``; 0 B once freed)."""
    seen: dict[int, int] = {}
    for m in model.modules():
        state = m._get_fsdp_state() if hasattr(m, "_get_fsdp_state") else None
        group = getattr(state, "_fsdp_param_group", None)
        for fp in getattr(group, "fsdp_params", ()):
            t = getattr(fp, "_unsharded_param", None)
            if t is not None:
                st = t.untyped_storage()
                seen[st.data_ptr()] = st.nbytes()
    return seen


class GatheredPeak(TorchDispatchMode):
    """The most bytes of gathered (whole) FSDP2 parameters the process holds at once, after every op of a step (09).

    All those Python and the dispatcher can see, whoever keeps them: every all-gather output, watched
    through a weak reference to its storage from the moment ``torch.ops.fsdp.all_gather_copy_in``
    returns it (its second output) until the last reference goes, wherever that reference is: FSDP2's
    objects or a local variable, as the previous layer's output that ``wait_for_unshard`` holds through
    the next layer's copy-out; and the layers' whole parameters (``_unsharded_param``), each storage
    counted once. ``peak`` stays 0 where those internals are not there (another torch version, or no
    FSDP2). Not seen: buffers a collective allocates inside its C++ call (gloo's all-gather gathers into
    a whole-size flat tensor of its own).
    """

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model, self.peak = model, 0
        self._outputs: list[tuple[StorageWeakRef, int, int]] = []   # (weak ref, address, bytes) of all-gather outputs

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001 (the dispatcher's signature)
        out = func(*args, **(kwargs or {}))
        try:
            if str(func) == "fsdp.all_gather_copy_in.default":          # returns (this rank's slice, the whole output)
                st = out[1].untyped_storage()
                self._outputs.append((StorageWeakRef(st), st.data_ptr(), st.nbytes()))
            self._outputs = [o for o in self._outputs if not o[0].expired()]
            held = {ptr: n for _, ptr, n in self._outputs}
            held.update(_unsharded_storages(self.model))
            self.peak = max(self.peak, sum(n for ptr, n in held.items() if ptr))
        except (AttributeError, RuntimeError, IndexError, TypeError):
            pass
        return out


def synthetic_regression(batch: int, width: int = 512, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A fixed random batch of inputs and regression targets (09)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, width, generator=g), torch.randn(batch, width, generator=g)


def train_step(net: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor, amp: bool = False) -> None:
    """One Adam step on the mean squared error; ``amp``: the forward under ``torch.autocast`` in bf16, the loss in fp32 (09)."""
    opt.zero_grad(set_to_none=True)
    with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=amp):
        out = net(x)
    nn.functional.mse_loss(out.float(), y).backward()
    opt.step()


def reference_parameters(layers: int, width: int, batch: int, steps: int, lr: float, amp: bool = False,
                         device: str | torch.device = "cpu") -> list[torch.Tensor]:
    """The unsharded model's parameters after ``steps`` Adam steps on the whole batch, in one process (09).

    ``device``: where to train it: the kind of device the ranks it is compared with computed on. A
    GPU's matrix products round differently from a CPU's, and Adam's first steps move a weight by
    about ``lr`` whatever its gradient's size, so a gradient near zero whose sign the rounding flips
    moves that weight the other way: a GPU rank compared with a CPU reference differed by 2.8e-4 on an
    H100 (tests/gpu/recorded/2026-11-26-h100), against < 1e-5 for CPU ranks against a CPU reference and,
    once compared with one process on the GPU, < 1e-5 there too (tests/gpu/recorded/2026-11-27-h100).
    """
    dev = torch.device(device)
    model = make_model(layers, width).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    x, y = (t.to(dev) for t in synthetic_regression(batch, width))
    for _ in range(steps):
        train_step(model, opt, x, y, amp)
    return [p.detach().cpu().clone() for p in model.parameters()]


def full_parameters(model: nn.Module) -> list[torch.Tensor]:
    """Every parameter whole on the CPU: DTensors gathered with ``full_tensor()`` (a collective: all ranks call it) (09)."""
    return [(p.full_tensor() if isinstance(p, DTensor) else p).detach().cpu().clone() for p in model.parameters()]


def plain_rest(s: str, compute: dict) -> float:
    """A plain model's training step less its forward and backward and Adam's step timed apart (09).

    Measured on this world size's ranks at once, on the batch the strategy trains on: the rank's share
    for the data-parallel strategies, the whole batch for tensor parallelism. No strategy is involved.
    """
    if s == "tp":
        return compute["plain_full_s"] - compute["fb_full_s"] - compute["adam_s"]
    return compute["plain_local_s"] - compute["fb_local_s"] - compute["adam_s"]


def best_time(fn: Callable[[], object], repeats: int, inner: int = 1, spread: list | None = None) -> float:
    """Best over ``repeats`` of the slowest rank's seconds per call of ``fn`` (one warm-up call first) (09).

    ``spread``: a list to which the repeats' spread (slowest less best, seconds) is appended: the noise a
    difference of such timings carries. Each repeat is :func:`helpers.launching.timing.slowest_seconds_per_call`."""
    fn()
    dev = local_device()
    times = [slowest_seconds_per_call(fn, inner, dev) for _ in range(repeats)]
    if spread is not None:
        spread.append(max(times) - min(times) if times else 0.0)
    return min(times) if times else float("inf")


def _timed_op(op: str, size: int, n: int) -> Callable[[], object]:
    """One collective of ``size`` bytes (the whole message) on this process group, ready to time."""
    dev = local_device()
    whole, part = torch.ones(size // 4, device=dev), torch.ones(size // 4 // n, device=dev)
    return {"all_reduce": lambda: dist.all_reduce(whole),
            "all_gather": lambda: dist.all_gather_into_tensor(whole, part),
            "reduce_scatter": lambda: dist.reduce_scatter_tensor(part, whole),
            "broadcast": lambda: dist.broadcast(whole, 0)}[op]


def fit_link(sizes: tuple[int, ...] = (2**12, 2**16, 2**20, 2**22), repeats: int = 3) -> dict[str, tuple[float, float]]:
    """α (s per call) and β (s per byte a rank sends) of each collective on this process group (09).

    Each is timed on its own: gloo's reduce-scatter, for one, costs more per byte than its
    all-reduce. A rank sends :data:`WIRE_FACTOR` · (N − 1)/N of the message on average; the line is fitted by
    least squares on relative errors. ``{}`` on one rank, where collectives move nothing.
    """
    n = dist.get_world_size()
    if n == 1:
        return {}
    out = {}
    for op in WIRE_FACTOR:
        factor = WIRE_FACTOR[op] * (n - 1) / n
        secs = [best_time(_timed_op(op, size, n), repeats, inner=3) for size in sizes]
        out[op] = fit_alpha_beta([factor * size for size in sizes], secs)
    return out


def comm_seconds(comm: dict, link: dict[str, tuple[float, float]], world_size: int) -> float:
    """The α–β time of one step's collectives (:meth:`CollectiveBytes.summary`), each with its own α and β (09)."""
    total = 0.0
    for name, calls in comm["calls"].items():
        alpha, beta = link.get(FAMILY[name], (0.0, 0.0))
        wire = WIRE_FACTOR[FAMILY[name]] * (world_size - 1) / world_size * comm["payload"][name]
        total += calls * alpha + wire * beta
    return total
