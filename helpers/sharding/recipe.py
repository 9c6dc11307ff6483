"""Sharding: the memory and communication arithmetic notebook 09 teaches, and the few lines that shard a model (09).

- :func:`memory_per_rank`: bytes of parameters, gradients and optimizer state each rank holds,
  for DDP, ZeRO-1/2/3, FSDP2 and tensor parallelism, and the layer ZeRO-3/FSDP gathers whole,
  under a named accounting: ``"fp32"``, ``"amp"`` (PyTorch's mixed precision: fp32 state) or
  ``"deepspeed"`` (the ZeRO paper's fp16 weights with fp32 master copy).
- :func:`comm_per_step` and :func:`comm_time`: bytes each rank sends per step, and the α–β
  estimate of their time on a named interconnect (:data:`INTERCONNECTS`).
- :func:`make_model`, :func:`shard_ddp`, :func:`shard_zero1`, :func:`shard_fsdp2`, :func:`shard_tp`: the
  real PyTorch calls, as a training script writes them.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from .shares import COMPUTE_BYTES, _how_split, _shapes, gathered_bytes, largest_share

__all__ = ["BYTES_PER_PARAM", "COMPUTE_BYTES", "PRECISIONS", "SHARDED", "STRATEGIES", "INTERCONNECTS", "memory_per_rank", "comm_per_step",
           "comm_time", "make_model", "model_parameters", "shard_ddp", "shard_zero1", "shard_fsdp2", "tp_plan", "shard_tp", "SHARD"]

# Bytes per parameter for (parameters, gradients, optimizer state), by accounting (the `precision` argument):
# - "fp32": plain fp32 training.
# - "amp": PyTorch's mixed precision, torch.autocast or FSDP2's MixedPrecisionPolicy: parameters, gradients and the
#   optimizer stay fp32; the layers compute on bf16/fp16 copies made per op (autocast casts the weights as each op
#   runs) or per layer (FSDP2 all-gathers a layer in param_dtype and frees it after). Same 16 B with Adam as fp32.
#   https://pytorch.org/docs/stable/amp.html, https://pytorch.org/docs/stable/distributed.fsdp.fully_shard.html
# - "deepspeed": the ZeRO paper's accounting (Rajbhandari et al. 2020, §3.1, https://arxiv.org/abs/1910.02054), that of
#   DeepSpeed's fp16 optimizer: fp16 parameters and gradients, the optimizer keeping an fp32 master copy (4 B)
#   besides Adam's two moments (8 B): 2 + 2 + 12.
BYTES_PER_PARAM = {("fp32", "adam"): (4, 4, 8), ("fp32", "sgd"): (4, 4, 0),
                   ("amp", "adam"): (4, 4, 8), ("amp", "sgd"): (4, 4, 0),
                   ("deepspeed", "adam"): (2, 2, 12), ("deepspeed", "sgd"): (2, 2, 4)}
# COMPUTE_BYTES (in .shares): bytes per element the layers compute in, what ZeRO-3/FSDP gathers whole
# (FSDP2: MixedPrecisionPolicy(param_dtype=bf16))
PRECISIONS = ("fp32", "amp", "deepspeed")
# what each strategy divides by the number of ranks N
SHARDED = {"ddp": (), "zero1": ("optim",), "zero2": ("optim", "grads"), "zero3": ("optim", "grads", "params"),
           "fsdp2": ("optim", "grads", "params"), "tp": ("optim", "grads", "params")}
STRATEGIES = tuple(SHARDED)

# α (s per message) and β (s per byte through one rank's link, i.e. 1 / bus bandwidth): ASSUMPTIONS, not
# measurements: each β a bus bandwidth assumed below the link's rated speed, each α a guess. Replace them with
# what nccl-tests or bench_collectives measures on your machines.
INTERCONNECTS = {
    "gloo, 2-core CPU (measured)": (3.3e-4, 1 / 1.15e9),  # bench_collectives on the course's reference machine
    "PCIe 4.0 x16": (1e-5, 1 / 20e9),             # assumed 20 GB/s
    "NVLink 4 (H100 SXM)": (1e-5, 1 / 400e9),     # assumed 400 GB/s; rated 900 GB/s bidirectional per GPU (nvidia.com hopper-architecture)
    "InfiniBand NDR 400 Gb/s": (2e-5, 1 / 45e9),  # assumed 45 GB/s; the name's 400 Gb/s is 50 GB/s per port
    "Ethernet 100 Gb/s": (3e-5, 1 / 11e9),        # assumed 11 GB/s; the name's 100 Gb/s is 12.5 GB/s
}


def _check(strategy: str, precision: str, optimizer: str, world_size: int) -> None:
    if strategy not in SHARDED:
        raise ValueError(f"unknown strategy {strategy!r}; choose one of {STRATEGIES}")
    if (precision, optimizer) not in BYTES_PER_PARAM:
        raise ValueError(f"unknown precision/optimizer {precision!r}/{optimizer!r}; precision names the accounting: "
                         "'fp32', 'amp' (PyTorch's autocast or FSDP2's MixedPrecisionPolicy: fp32 parameters, gradients "
                         "and optimizer state) or 'deepspeed' (fp16 parameters and gradients, fp32 master copy in the "
                         "optimizer); optimizer 'adam' or 'sgd'")
    if not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be a positive int, got {world_size!r}")


def memory_per_rank(params: int | nn.Module | list, world_size: int = 1, strategy: str = "ddp", precision: str = "fp32",
                    optimizer: str = "adam", replicated: int = 0, layer: int | nn.Module = 0) -> dict[str, int]:
    """Bytes one rank holds (the largest rank's, when they differ): parameters, gradients, optimizer state,
    the layer ZeRO-3/FSDP gathers, and their total (09).

    It counts those tensors only: not activations, DDP's communication buckets, the allocator's cache.
    ``precision`` names the accounting (:data:`BYTES_PER_PARAM`): ``"fp32"``; ``"amp"``, PyTorch's
    autocast or FSDP2 ``MixedPrecisionPolicy`` (fp32 state, bf16 compute); ``"deepspeed"``, the ZeRO
    paper's (fp16 weights and gradients, fp32 master copy in the optimizer).
    ``params``: Ψ, or the model (or its tensors' shapes) to get the largest rank's share when N
    does not divide the tensors: FSDP cuts each tensor's first dimension (``torch.chunk``: rank 0 gets
    the most), torch's ZeRO-1 hands out whole tensors, DeepSpeed's ZeRO-1/2 pads one flat buffer, its
    ZeRO-3 pads and splits each tensor apart. From Ψ alone a
    sharded part is ``ceil(bytes · Ψ / N)``: exact only when the ranks' shares come out equal.
    ``replicated``: parameters tensor parallelism leaves whole on every rank (row-wise biases).
    ``layer``: the largest unit ZeRO-3/FSDP gathers whole (its parameter count, or the module);
    ``gathered``: :func:`gathered_bytes` (FSDP2: three such layers in compute precision, one on one rank;
    ``"deepspeed"``: 4 B × the most parameters one module holds itself, as DeepSpeed's estimator counts).
    Adam's per-tensor ``step`` counters (a few bytes per tensor) are left out.
    """
    _check(strategy, precision, optimizer, world_size)
    shapes = _shapes(params)  # None when params is a count
    psi = params if shapes is None else sum(math.prod(s) for s in shapes)
    out = {}
    for part, per in zip(("params", "grads", "optim"), BYTES_PER_PARAM[(precision, optimizer)]):
        if part not in SHARDED[strategy]:
            out[part] = per * psi
        elif shapes is None:
            out[part] = math.ceil(per * (psi - replicated) / world_size) + per * replicated
        else:
            out[part] = per * largest_share(shapes, world_size, _how_split(strategy, part, precision))
    out["gathered"] = gathered_bytes(layer, world_size, precision) if strategy in ("zero3", "fsdp2") else 0
    out["total"] = out["params"] + out["grads"] + out["optim"] + out["gathered"]
    return out


def comm_per_step(params: int, world_size: int, strategy: str = "ddp", precision: str = "fp32",
                  tp_activation_bytes: int = 0, tp_blocks: int = 0, tp_input_grad: bool = False) -> dict[str, float]:
    """Bytes each rank sends per training step with ring collectives, by collective (09).

    Ring all-reduce sends ``2 (N − 1)/N`` of its message, all-gather, reduce-scatter and broadcast
    ``(N − 1)/N`` (a broadcast: on average per rank; its root sends more). Textbook numbers (ZeRO paper, §7): DDP moves 2Ψ per step (an all-reduce is a
    reduce-scatter plus an all-gather), ZeRO-1/2 2Ψ too (the paper's; DeepSpeed's ``stage_1_and_2.py``
    all-reduces the gradient buckets by default, 3Ψ), ZeRO-3/FSDP 3Ψ (parameters
    all-gathered in forward and again in backward, gradients reduce-scattered), times ``(N − 1)/N``
    and the bytes per element. PyTorch's ``ZeroRedundancyOptimizer`` ("zero1" with "fp32"/"amp") keeps
    DDP's all-reduce and broadcasts the updated fp32 parameters: 3Ψ. "zero2" is the design
    :func:`memory_per_rank` counts (whole parameters in their stored dtype, gradients and optimizer state
    sharded; no PyTorch class holds these bytes): the gradients reduce-scattered and the updated parameters
    all-gathered, each in its stored dtype, 2Ψ. Under "amp" DDP reduces fp32 gradients, FSDP2
    gathers and reduce-scatters in ``param_dtype`` (bf16). Tensor parallelism all-reduces
    activations instead: two per block (forward, and the input gradient in backward), less one when
    the first block's input is the data (``tp_input_grad=False``, the default): no gradient flows to it.
    """
    _check(strategy, precision, "adam", world_size)
    grad = BYTES_PER_PARAM[(precision, "adam")][1]  # DDP all-reduces the gradients as they are
    low = COMPUTE_BYTES[precision]                   # FSDP and DeepSpeed move parameters and gradients in it
    f = (world_size - 1) / world_size
    if strategy == "ddp":
        out = {"all_reduce": 2 * f * params * grad}
    elif strategy in ("zero1", "zero2") and precision == "deepspeed":
        out = {"reduce_scatter": f * params * low, "all_gather": f * params * low}
    elif strategy == "zero1":
        out = {"all_reduce": 2 * f * params * grad, "broadcast": f * params * 4}
    elif strategy == "zero2":  # whole stored parameters (memory_per_rank's ZeRO-2): gathered and scattered as stored
        out = {"reduce_scatter": f * params * grad, "all_gather": f * params * BYTES_PER_PARAM[(precision, "adam")][0]}
    elif strategy in ("zero3", "fsdp2"):
        out = {"all_gather": 2 * f * params * low, "reduce_scatter": f * params * low}
    else:
        calls = 2 * tp_blocks - (1 if tp_blocks and not tp_input_grad else 0)
        out = {"all_reduce": calls * 2 * f * tp_activation_bytes}
    out["total"] = sum(out.values())
    return out


def comm_time(nbytes: float, messages: int, interconnect: str | tuple[float, float]) -> float:
    """Seconds to send ``nbytes`` per rank in ``messages`` collectives: ``messages · α + nbytes · β`` (09).

    ``interconnect``: a name from :data:`INTERCONNECTS` or your own ``(α, β)``.
    """
    if isinstance(interconnect, str):
        if interconnect not in INTERCONNECTS:
            raise ValueError(f"unknown interconnect {interconnect!r}; choose from {list(INTERCONNECTS)} or pass (α, β)")
        interconnect = INTERCONNECTS[interconnect]
    alpha, beta = interconnect
    return messages * alpha + nbytes * beta


def make_model(layers: int = 8, width: int = 512, seed: int = 0) -> nn.Sequential:
    """The model notebook 09 shards: ``layers`` × Linear(width, width) with ReLU between (09).

    8 × 512 gives Ψ = 2,101,248 parameters, 16 tensors (a weight and a bias per layer).
    """
    torch.manual_seed(seed)
    mods: list[nn.Module] = []
    for i in range(layers):
        mods += [nn.Linear(width, width)] + ([nn.ReLU()] if i < layers - 1 else [])
    return nn.Sequential(*mods)


def model_parameters(layers: int = 8, width: int = 512) -> int:
    """Ψ of :func:`make_model`: ``layers · (width² + width)`` (09)."""
    return layers * (width * width + width)


def shard_ddp(model: nn.Module, mesh, lr: float = 1e-3, bucket_view: bool = True) -> tuple[nn.Module, torch.optim.Optimizer]:
    """DDP with Adam over the ranks of ``mesh``: everything replicated; with ``bucket_view`` the gradients
    are views into DDP's buckets, not a second copy (DDP's default is ``False``) (09)."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    dev = next(model.parameters()).device
    net = DDP(model, device_ids=[dev.index] if dev.type == "cuda" else None, device_mesh=mesh,
              gradient_as_bucket_view=bucket_view)
    return net, torch.optim.Adam(net.parameters(), lr=lr)


def shard_zero1(model: nn.Module, mesh, lr: float = 1e-3) -> tuple[nn.Module, torch.optim.Optimizer]:
    """ZeRO-1: DDP, with Adam's state split over the ranks by ``ZeroRedundancyOptimizer`` (09)."""
    from torch.distributed.optim import ZeroRedundancyOptimizer

    net, _ = shard_ddp(model, mesh)
    return net, ZeroRedundancyOptimizer(net.parameters(), optimizer_class=torch.optim.Adam,
                                        process_group=mesh.get_group(), lr=lr)


def shard_fsdp2(model: nn.Sequential, mesh, lr: float = 1e-3, mp_policy=None) -> tuple[nn.Module, torch.optim.Optimizer]:
    """FSDP2: ``fully_shard`` each layer, then the whole model; parameters become sharded DTensors (09).

    Each layer is its own unit: its parameters are all-gathered just before its forward (and again
    before its backward) and freed after. ``reshard_after_forward`` is left at its default, ``None``:
    ``True`` for the layers, ``False`` for the root (the whole model), which FSDP2 sets at its first
    forward (``_fully_shard.py``; ``_fsdp_state.py``, lazy init). In forward ``wait_for_unshard`` keeps
    a layer's all-gather output in ``comm_ctx.all_gather_state`` until the next layer's, and a local
    variable holds it through that layer's copy-out: three layers' bytes at once (the next layer's
    output, the parameters copied out of it, this one's output); in backward the next layer is
    gathered ahead of time (``_backward_prefetch``).
    ``mp_policy``: e.g. ``MixedPrecisionPolicy(param_dtype=torch.bfloat16)`` to compute in bf16 on
    gathered copies while the shards, gradients and Adam stay fp32.
    """
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:  # torch < 2.6
        from torch.distributed._composable.fsdp import fully_shard
    kw = {"mp_policy": mp_policy} if mp_policy is not None else {}
    for layer in model:
        if any(True for _ in layer.parameters()):
            fully_shard(layer, mesh=mesh, **kw)
    fully_shard(model, mesh=mesh, **kw)
    return model, torch.optim.Adam(model.parameters(), lr=lr)


def tp_plan(model: nn.Sequential) -> dict:
    """Tensor-parallel plan: the Linear layers in pairs, column-wise then row-wise (Megatron's MLP split) (09).

    Column-wise splits the first layer's outputs, so ReLU works on each rank's slice; row-wise
    splits the second layer's inputs, so each rank holds a partial sum: one all-reduce per pair.
    """
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    linears = [name for name, m in model.named_children() if isinstance(m, nn.Linear)]
    if len(linears) % 2:
        raise ValueError(f"tensor parallelism pairs Linear layers (up, down); this model has {len(linears)}")
    return {name: ColwiseParallel() if i % 2 == 0 else RowwiseParallel() for i, name in enumerate(linears)}


def shard_tp(model: nn.Sequential, mesh, lr: float = 1e-3) -> tuple[nn.Module, torch.optim.Optimizer]:
    """Tensor parallelism: ``parallelize_module`` with :func:`tp_plan` on a 1-D DeviceMesh (09)."""
    from torch.distributed.tensor.parallel import parallelize_module

    parallelize_module(model, mesh, tp_plan(model))
    return model, torch.optim.Adam(model.parameters(), lr=lr)


# Each strategy by name, all set up alike: ``SHARD[name](model, mesh, lr=lr)`` gives the model and its optimizer.
SHARD = {"ddp": shard_ddp, "zero1": shard_zero1, "fsdp2": shard_fsdp2, "tp": shard_tp}


# Below the recipe, so that the lines the notebook shows (show(memory_per_rank) names its file and line) stay put:
# the calculator refuses a parameter count no model has (negative, fractional, not a number) before it computes.
def _check_params(params: object, replicated: object = 0) -> None:
    import numbers

    from ..core.i18n import tr

    def whole(v: object) -> bool:
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            return False
        return v >= 0 if isinstance(v, numbers.Integral) else math.isfinite(v) and v >= 0 and float(v).is_integer()

    if not whole(params):
        raise ValueError(tr("sharding.params", "params is the number of parameters Ψ, a whole number ≥ 0, e.g. "
                            "model_parameters() or 7e9; got {got!r}", got=params))
    if not whole(replicated) or replicated > params:
        raise ValueError(tr("sharding.replicated", "replicated counts parameters left whole on every rank: from 0 to "
                            "the {params} parameters; got {got!r}", params=params, got=replicated))


def _refusing_impossible_counts(fn: Callable[..., dict]) -> Callable[..., dict]:
    import functools
    import inspect

    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def checked(*args: object, **kwargs: object) -> dict:
        given = signature.bind(*args, **kwargs).arguments
        if not isinstance(given["params"], (nn.Module, list, tuple)):  # a model or its shapes: counted from them
            _check_params(given["params"], given.get("replicated", 0))
        return fn(*args, **kwargs)

    return checked


memory_per_rank = _refusing_impossible_counts(memory_per_rank)
comm_per_step = _refusing_impossible_counts(comm_per_step)
