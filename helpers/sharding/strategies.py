"""Each sharding strategy trained on N ranks: bytes per rank, collectives, step time, against the calculator (09).

:func:`run_sharding` trains DDP, ZeRO-1, FSDP2 and tensor parallelism on the same model and data,
and sets what each rank measured beside :func:`~helpers.sharding.recipe.memory_per_rank`'s and
:func:`~helpers.sharding.recipe.comm_time`'s predictions. :func:`run_tp_block` checks one
tensor-parallel MLP block against the unsplit one.
"""
from __future__ import annotations

import math
import os
import warnings
from typing import Sequence

import torch
from torch import nn
from torch.distributed.device_mesh import init_device_mesh

from ..core.i18n import tr
from ..core.measure import max_abs_diff
from ..launching.launcher import launch
from ..launching.ranks import choose_backend, local_device
from .instruments import (CollectiveBytes, GatheredPeak, best_time, comm_seconds, ddp_bucket_bytes, fit_link,
                          full_parameters, local_tensor, plain_rest, rank_bytes, reference_parameters, synthetic_regression, train_step)
from .recipe import SHARD, make_model, memory_per_rank, model_parameters, shard_ddp, shard_tp

__all__ = ["sharding_worker", "run_sharding", "tp_block_worker", "run_tp_block"]


def _compute_times(layers: int, width: int, xs: torch.Tensor, ys: torch.Tensor, x: torch.Tensor, repeats: int) -> dict:
    """Seconds of the work no strategy changes, timed on every rank at once (so contention is included): the plain
    model's forward and backward (on the rank's share and on the whole batch), Adam's step, and the plain model's
    whole training step (``train_step``, no wrapper) on the share and on the whole batch."""
    model = make_model(layers, width).to(xs.device)
    opt = torch.optim.Adam(model.parameters())
    y = ys.new_zeros(x.shape)

    def fb(inp: torch.Tensor, target: torch.Tensor) -> None:
        model.zero_grad(set_to_none=True)
        nn.functional.mse_loss(model(inp), target).backward()

    sp = {k: [] for k in ("fb_local", "fb_full", "adam", "plain_local", "plain_full")}  # each timing's spread
    out = {"fb_local_s": best_time(lambda: fb(xs, ys), repeats, spread=sp["fb_local"]),
           "fb_full_s": best_time(lambda: fb(x, y), repeats, spread=sp["fb_full"])}
    out["adam_s"] = best_time(opt.step, repeats, spread=sp["adam"])
    out["plain_local_s"] = best_time(lambda: train_step(model, opt, xs, ys), repeats, spread=sp["plain_local"])
    out["plain_full_s"] = (out["plain_local_s"] if x.shape == xs.shape
                           else best_time(lambda: train_step(model, opt, x, y), repeats, spread=sp["plain_full"]))
    out["spread_s"] = {k: (v or sp["plain_local"])[0] for k, v in sp.items()}  # plain_full is plain_local if untimed
    return out


def _bf16_policy() -> dict:
    """FSDP2's own mixed precision: compute in bf16 on the gathered copies (``shard_fsdp2``'s ``mp_policy``)."""
    try:
        from torch.distributed.fsdp import MixedPrecisionPolicy
    except ImportError:  # torch < 2.6, as shard_fsdp2's fully_shard
        from torch.distributed._composable.fsdp import MixedPrecisionPolicy
    return {"mp_policy": MixedPrecisionPolicy(param_dtype=torch.bfloat16)}


def sharding_worker(rank: int, world_size: int, strategies: Sequence[str], layers: int, width: int, batch: int,
                    steps: int, repeats: int, lr: float, precision: str = "fp32") -> dict:
    """Train each strategy ``steps`` Adam steps; bytes held, collectives of the last step, full parameters, timing (09).

    Data-parallel strategies (DDP, ZeRO-1, FSDP2) train on this rank's share of the batch; tensor
    parallelism on the whole batch (its ranks split the layers, not the data). ``precision="amp"``:
    the forward under ``torch.autocast`` (bf16), FSDP2 with ``MixedPrecisionPolicy(param_dtype=bf16)``.
    With ``repeats`` > 0 the step is timed, and so are the link (α, β) and the compute no strategy changes.
    """
    # torch's own internals warn here, not our code: FSDP2 calling the collectives it deprecated, and a view
    # returned by the Sequential (harmless: nothing modifies it in place). Keep the notebook's output readable.
    warnings.filterwarnings("ignore", message=r".*is deprecated\. Please use `torch\.distributed\.", category=FutureWarning)
    warnings.filterwarnings("ignore", message=r"FSDP2-wrapped module .* returned a view tensor")
    dev = local_device()
    mesh = init_device_mesh(dev.type, (world_size,))
    x, y = (t.to(dev) for t in synthetic_regression(batch, width))
    share = batch // world_size
    xs, ys = x[rank * share:(rank + 1) * share], y[rank * share:(rank + 1) * share]
    amp = precision == "amp"
    out: dict = {"strategies": {}}
    if repeats:
        out["link"] = fit_link(repeats=repeats)
        out["compute"] = _compute_times(layers, width, xs, ys, x, repeats)
    for s in strategies:
        model = make_model(layers, width).to(dev)
        net, opt = SHARD[s](model, mesh, lr=lr, **(_bf16_policy() if amp and s == "fsdp2" else {}))
        xb, yb = (x, y) if s == "tp" else (xs, ys)
        autocast = amp and s != "fsdp2"  # FSDP2 casts by its policy
        for _ in range(steps - 1):
            train_step(net, opt, xb, yb, autocast)
        with CollectiveBytes() as counter, GatheredPeak(model) as gathered:
            train_step(net, opt, xb, yb, autocast)
        held = rank_bytes(model, opt)
        held["gathered"] = gathered.peak if s == "fsdp2" else 0
        row = {"measured_bytes": held, "comm": counter.summary(), "params": full_parameters(model)}
        if s in ("ddp", "zero1"):
            row["ddp_buckets"] = ddp_bucket_bytes(net)
        if s == "ddp":  # and with DDP's default, gradient_as_bucket_view=False: the gradients apart from the buckets
            dnet, dopt = shard_ddp(make_model(layers, width).to(dev), mesh, lr=lr, bucket_view=False)
            for _ in range(2):
                train_step(dnet, dopt, xb, yb, autocast)
            row["ddp_buckets_default"] = ddp_bucket_bytes(dnet) | {"grads": rank_bytes(dnet.module, dopt)["grads"]}
        if repeats:
            row["step_s"] = best_time(lambda: train_step(net, opt, xb, yb, autocast), repeats, spread=(spread := []))
            row["step_spread_s"] = spread[0]
        out["strategies"][s] = row
    return out


def _predicted_parts(s: str, n: int, compute: dict, comm: dict, link: dict, own: float) -> dict[str, float]:
    """The step's parts, timed or modelled from timings; no overlap assumed: the step is their sum (09).

    ``own``: what the strategy's wrapper adds to a plain step on one process (its step there less the
    plain model's ``train_step``), carried over to N; ``plain rest``: :func:`plain_rest` on these N ranks
    (a negative one counted as 0, like ``own``); ``compute``: the plain forward and backward (TP: the
    whole batch's ÷ N); ``adam``: Adam's step on the whole model, ÷ N when sharded; ``comm``: α–β per collective.
    """
    fb = compute["fb_full_s"] / n if s == "tp" else compute["fb_local_s"]
    adam = compute["adam_s"] / (1 if s == "ddp" else n)
    return {"own": own, "plain rest": max(0.0, plain_rest(s, compute)), "compute": fb, "adam": adam,
            "comm": comm_seconds(comm, link, n)}


def _parallel_slots() -> int:
    """How many ranks can run at once here: GPUs under nccl, else cores."""
    return torch.cuda.device_count() if torch.cuda.device_count() > 1 else (os.cpu_count() or 1)


def _count(name: str, value: object, least: int, what: str) -> None:
    """Refuse ``value`` unless it is an int of at least ``least``."""
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise ValueError(tr("sharding.count", "{name} must be an int of at least {least} ({what}); got {got!r}",
                            name=name, least=least, what=what, got=value))


def _as_tuple(values: object) -> tuple | None:
    try:
        return tuple(values)
    except TypeError:
        return None


def _checked(world_sizes: Sequence[int] | int, strategies: Sequence[str] | str, layers: int, width: int, batch: int,
             steps: int, repeats: int, lr: float) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """:func:`run_sharding`'s world sizes and strategies as tuples, every argument checked before a process starts."""
    sizes = (world_sizes,) if isinstance(world_sizes, int) and not isinstance(world_sizes, bool) else world_sizes
    names = (strategies,) if isinstance(strategies, str) else strategies
    sizes, names = _as_tuple(sizes), _as_tuple(names)
    if (sizes is None or not sizes
            or any(not isinstance(n, int) or isinstance(n, bool) or n < 1 for n in sizes)):
        raise ValueError(tr("sharding.world_sizes", "world_sizes needs at least one positive int (a number of "
                            "processes), e.g. (1, 2, 4), or one int such as 2; got {got!r}", got=world_sizes))
    runnable = ", ".join(repr(s) for s in SHARD)
    if names is None or not names:
        raise ValueError(tr("sharding.no_strategy", "strategies needs at least one of {runnable}, e.g. "
                            "strategies=('ddp', 'fsdp2') or one name such as 'tp'; got {got!r}",
                            runnable=runnable, got=strategies))
    for s in names:
        if not isinstance(s, str) or s not in SHARD:
            raise ValueError(tr("sharding.unknown_strategy", "run_sharding cannot train {name!r}: it trains {runnable}. "
                                "ZeRO-2 and ZeRO-3 are in the calculator only (memory_per_rank, comm_per_step): torch "
                                "has no optimizer of its own for them, and 'fsdp2' shards parameters, gradients and "
                                "optimizer state as ZeRO-3 does", name=s, runnable=runnable))
    for name, value, least, what in (("layers", layers, 1, "Linear layers of the model"),
                                     ("width", width, 1, "features of each layer"), ("batch", batch, 1, "samples"),
                                     ("steps", steps, 1, "Adam steps per strategy; the last one is measured"),
                                     ("repeats", repeats, 0, "timed repeats; 0 times nothing")):
        _count(name, value, least, what)
    if not isinstance(lr, (int, float)) or isinstance(lr, bool) or not 0 < lr < math.inf:
        raise ValueError(tr("sharding.lr", "lr must be a positive, finite number, got {got!r}; try 1e-3", got=lr))
    if "tp" in names:
        if layers % 2:
            raise ValueError(tr("sharding.tp_layers", "tensor parallelism pairs the Linear layers (column-wise, then "
                                "row-wise), so layers must be even; got layers={layers}", layers=layers))
        for n in sizes:
            if width % n:
                works = ", ".join(str(d) for d in range(1, min(width, 16) + 1) if width % d == 0)
                raise ValueError(tr("sharding.tp_split", "tensor parallelism cannot run on {n} ranks: each layer's "
                                    "{width} features must divide evenly over the ranks. Choose world sizes that "
                                    "divide {width} ({works}, …), or leave 'tp' out of strategies for {n} ranks",
                                    width=width, n=n, works=works))
    for n in sizes:
        if batch % n:
            step = math.lcm(*sizes)
            raise ValueError(tr("sharding.batch_split", "batch ({batch}) must divide evenly over {n} processes; take a "
                                "batch every world size divides, e.g. batch={fix}", batch=batch, n=n,
                                fix=-(-batch // step) * step))
    return sizes, names


def run_sharding(world_sizes: Sequence[int] | int = (1, 2, 4),
                 strategies: Sequence[str] | str = ("ddp", "zero1", "fsdp2", "tp"),
                 layers: int = 8, width: int = 512, batch: int = 256, steps: int = 3, repeats: int = 0, lr: float = 1e-3,
                 timeout: float = 240, precision: str = "fp32") -> list[dict]:
    """Every strategy on every world size: the largest rank's bytes against the calculator, parameters against unsharded (09).

    ``world_sizes``: a tuple of process counts, or one int; ``strategies``: names from ``"ddp"``,
    ``"zero1"``, ``"fsdp2"``, ``"tp"`` (a tuple, or one name); ``precision``: ``"fp32"`` or ``"amp"``
    (PyTorch's mixed precision: autocast in bf16, FSDP2's ``MixedPrecisionPolicy``). Every argument
    is checked before a process starts. The last of ``steps`` is measured (DDP rebuilds its buckets
    once, in the second step). Rows: strategy, world_size, batch, width, measured_bytes (for each part the largest
    rank's: params, grads, optim, FSDP2's peak of gathered parameters the process holds), predicted_bytes (the calculator
    given the model's shapes), bytes_equal_on_all_ranks, max_abs_diff_vs_unsharded (one process, whole
    batch, same steps and precision, on the ranks' kind of device: a GPU under nccl, else the CPU), collectives of one step (calls, payload, wire bytes), DDP's
    buckets (ddp, zero1) and, with ``repeats`` > 0, step_s, predicted_step_s and its predicted_parts
    (:func:`_predicted_parts`), compute (the plain model's times here; ``spread_s``: each one's spread over its
    repeats), step_spread_s, plain_rest_raw_s (:func:`plain_rest`) and, from one process, own_raw_s (the step less the
    plain model's there, before a negative one is set to 0) and own_noise_s (those two timings' spreads added).
    The prediction for N > 1 carries over that one-process ``own``, so give ``world_sizes`` starting with 1 to
    include it. World sizes with more ranks than cores (or GPUs) are not timed: ranks would share them.
    """
    world_sizes, strategies = _checked(world_sizes, strategies, layers, width, batch, steps, repeats, lr)
    if precision not in ("fp32", "amp"):
        raise ValueError(f"run_sharding trains in precision 'fp32' or 'amp' (PyTorch's mixed precision); got {precision!r}. "
                         "'deepspeed' is an accounting of the calculator only")
    psi = model_parameters(layers, width)
    model = make_model(layers, width)
    refs = {}  # one reference per kind of device the ranks compute on: "cuda" under nccl, "cpu" under gloo
    parts = ("params", "grads", "optim", "gathered")
    rows, own, raw, noise = [], {}, {}, {}
    for n in world_sizes:
        timed = repeats if n <= _parallel_slots() else 0  # more processes than cores: timings say nothing
        res = launch(sharding_worker, n, args=(tuple(strategies), layers, width, batch, steps, timed, lr, precision),
                     timeout=timeout, verbose=False)
        r0 = res[0]
        dev = "cuda" if choose_backend(n) == "nccl" else "cpu"
        if dev not in refs:
            refs[dev] = reference_parameters(layers, width, batch, steps, lr, precision == "amp", device=dev)
        ref = refs[dev]
        for s in strategies:
            got = r0["strategies"][s]
            held = [r["strategies"][s]["measured_bytes"] for r in res]
            if s == "tp":  # row-wise biases stay whole on every rank
                pred = memory_per_rank(psi, n, s, precision, "adam", replicated=layers // 2 * width)
            else:
                pred = memory_per_rank(model, n, s, precision, "adam", layer=model[0])
            row = {"strategy": s, "world_size": n, "precision": precision, "backend": choose_backend(n),
                   "measured_bytes": {k: max(h[k] for h in held) for k in parts},
                   "predicted_bytes": {k: pred[k] for k in parts}, "batch": batch, "width": width,
                   "bytes_equal_on_all_ranks": all(h == held[0] for h in held),
                   "max_abs_diff_vs_unsharded": max_abs_diff(got["params"], ref), "comm": got["comm"]}
            for k in ("ddp_buckets", "ddp_buckets_default"):
                if k in got:
                    row[k] = got[k]
            if timed:
                row["step_s"], row["step_spread_s"] = got["step_s"], got["step_spread_s"]
                if n == 1:  # what the wrapper adds to the plain model's step, both on one process
                    raw[s] = got["step_s"] - r0["compute"]["plain_full_s"]  # kept as measured, printed in 09
                    own[s] = max(0.0, raw[s])                                # the prediction counts a negative one as 0
                    noise[s] = got["step_spread_s"] + r0["compute"]["spread_s"]["plain_full"]
                if s in raw:
                    row["own_raw_s"] = raw[s]
                    row["own_noise_s"] = noise[s]  # the spread of the two timings it is the difference of
                row["plain_rest_raw_s"] = plain_rest(s, r0["compute"])
                row["compute"] = r0["compute"]
                row["predicted_parts"] = _predicted_parts(s, n, r0["compute"], got["comm"], r0["link"], own.get(s, 0.0))
                row["predicted_step_s"] = sum(row["predicted_parts"].values())
                row["link"] = r0["link"]
            rows.append(row)
    return rows


def tp_block_worker(rank: int, world_size: int, width: int, hidden: int, batch: int) -> dict:
    """One MLP block (Linear up, ReLU, Linear down) split column-wise then row-wise, against the unsplit block (09).

    Returns the largest differences of output, input gradient and weight gradients, this rank's
    weight bytes and the whole block's, and the collectives of the forward and of the backward.
    """
    dev = local_device()
    torch.manual_seed(0)
    block = nn.Sequential(nn.Linear(width, hidden), nn.ReLU(), nn.Linear(hidden, width)).to(dev)
    whole = [p.detach().clone() for p in block.parameters()]
    full = sum(p.numel() * p.element_size() for p in block.parameters() if p.dim() == 2)
    ref = nn.Sequential(nn.Linear(width, hidden), nn.ReLU(), nn.Linear(hidden, width)).to(dev)
    ref.load_state_dict(block.state_dict())
    shard_tp(block, init_device_mesh(dev.type, (world_size,)))
    x = torch.randn(batch, width, generator=torch.Generator().manual_seed(1)).to(dev)
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    with CollectiveBytes() as fwd:
        out = block(xa)
    with CollectiveBytes() as bwd:
        out.sum().backward()
    expected = ref(xb)
    expected.sum().backward()
    grads = [p.grad.full_tensor() for p in block.parameters()]
    return {"output_diff": max_abs_diff([out], [expected]), "input_grad_diff": max_abs_diff([xa.grad], [xb.grad]),
            "weight_grad_diff": max_abs_diff(grads, [p.grad for p in ref.parameters()]),
            "weights_unchanged": max_abs_diff([p.full_tensor() for p in block.parameters()], whole) == 0.0,
            "weight_bytes": sum(local_tensor(p).numel() * local_tensor(p).element_size()
                                for p in block.parameters() if p.dim() == 2),
            "full_weight_bytes": full, "forward": fwd.summary(), "backward": bwd.summary()}


def run_tp_block(nprocs: int = 2, width: int = 64, hidden: int = 256, batch: int = 8, timeout: float = 90) -> list[dict]:
    """The tensor-parallel MLP block on ``nprocs`` ranks against the unsplit block, per rank (09)."""
    _count("nprocs", nprocs, 1, "processes")
    if hidden % nprocs or width % nprocs:
        raise ValueError(f"hidden ({hidden}) and width ({width}) must divide evenly over {nprocs} ranks")
    return launch(tp_block_worker, nprocs, args=(width, hidden, batch), timeout=timeout, verbose=False)
