"""What notebook 10 launches to show resharding: an FSDP2 model trained, saved with DCP, loaded on another N (10).

The model is a stack of ``Linear`` layers, each an FSDP2 unit (``fully_shard``), trained with Adam on a fixed
random regression: every step's batch follows from the step number, the same whatever the number of ranks,
so a run resharded from 2 ranks to 1 or 4 can be compared with one process training the whole batch.
"""
from __future__ import annotations

import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

from ..launching.ranks import local_device
from .recipe import load_sharded, save_sharded

__all__ = ["mlp", "fsdp2", "dcp_train_worker", "plain_training", "dcp_files", "save_blocking_worker"]


def mlp(layers: int = 2, width: int = 64) -> nn.Sequential:
    """``layers`` × ``Linear(width, width)`` with ReLU between, seeded: the same weights in every process (10)."""
    torch.manual_seed(0)
    mods: list[nn.Module] = []
    for i in range(layers):
        mods += [nn.Linear(width, width)] + ([nn.ReLU()] if i < layers - 1 else [])
    return nn.Sequential(*mods)


def fsdp2(model: nn.Sequential, world_size: int) -> tuple[nn.Module, torch.optim.Optimizer]:
    """Each ``Linear`` an FSDP2 unit, then the whole model; Adam on the sharded parameters (DTensors) (10)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    dev = local_device()
    mesh = init_device_mesh(dev.type, (world_size,))
    model = model.to(dev)
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model, torch.optim.Adam(model.parameters(), lr=1e-2)


def _batch(step: int, width: int, batch: int, rank: int = 0, world_size: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """Step ``step``'s batch (a fixed random regression), this rank's 1/N of it (10)."""
    g = torch.Generator().manual_seed(step)
    x, y = torch.randn(batch, width, generator=g), torch.randn(batch, width, generator=g)
    n = batch // world_size
    return x[rank * n:(rank + 1) * n], y[rank * n:(rank + 1) * n]


def _step(net: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor) -> None:
    opt.zero_grad(set_to_none=True)
    nn.functional.mse_loss(net(x), y).backward()
    opt.step()


def _whole(model: nn.Module) -> list[torch.Tensor]:
    """Every parameter whole on the CPU (a DTensor's ``full_tensor()`` is a collective: every rank calls it)."""
    from torch.distributed.tensor import DTensor  # here: DTensor's import costs ~1 s, and the package's other ranks never need it
    return [(p.full_tensor() if isinstance(p, DTensor) else p).detach().cpu().clone() for p in model.parameters()]


def dcp_train_worker(rank: int, world_size: int, path: str, start: int, steps: int, save: bool,
                     layers: int = 2, width: int = 64, batch: int = 16) -> dict:
    """FSDP2 on N ranks: load ``path`` when ``start`` > 0 (resharded to N), train ``steps`` Adam steps, save if asked (10).

    Returns the whole trained parameters.
    """
    dev = local_device()
    net, opt = fsdp2(mlp(layers, width), world_size)
    if start:
        load_sharded(path, net, opt)
    for step in range(start, start + steps):
        x, y = _batch(step, width, batch, rank, world_size)
        _step(net, opt, x.to(dev), y.to(dev))
    if save:
        save_sharded(path, net, opt)
    return {"params": _whole(net)}


def plain_training(steps: int, layers: int = 2, width: int = 64, batch: int = 16) -> list[torch.Tensor]:
    """The same training on one process, unsharded, whole batch: what every resharded run must equal (10)."""
    model = mlp(layers, width)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for step in range(steps):
        _step(model, opt, *_batch(step, width, batch))
    return [p.detach().clone() for p in model.parameters()]


def dcp_files(path: str) -> dict:
    """What DCP wrote in ``path``, read back from its own metadata (10): each file's bytes on disk, the bytes its
    items take there by the metadata, how many items it holds, and the state's tensor bytes (numel × element size
    of every tensor saved, whole: each shard counted once).
    """
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    meta = dcp.FileSystemReader(path).read_metadata()
    counted: dict[str, int] = {}
    items: dict[str, int] = {}
    for info in meta.storage_data.values():
        counted[info.relative_path] = counted.get(info.relative_path, 0) + info.length
        items[info.relative_path] = items.get(info.relative_path, 0) + 1
    tensors = sum(m.size.numel() * m.properties.dtype.itemsize for m in meta.state_dict_metadata.values()
                  if isinstance(m, TensorStorageMetadata))
    files = {f.name: f.stat().st_size for f in sorted(Path(path).iterdir())}
    return {"files": files, "counted": counted, "items": items, "tensor_bytes": tensors}


def save_blocking_worker(rank: int, world_size: int, path: str, layers: int = 8, width: int = 512) -> dict:
    """How long ``dcp.save`` and ``dcp.async_save`` keep an FSDP2 rank from training (10).

    ``save_s``: the whole call, spent before training can go on. ``async_returned_s``: until ``async_save``
    returns (it first copies the state to CPU memory, the *staging*); ``async_done_s``: until its future is
    done (the writing, in a background thread, while training could go on); ``load_s``: ``dcp.load`` of the saved
    state. One of each after an untimed call of each.
    """
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    dev = local_device()
    net, opt = fsdp2(mlp(layers, width), world_size)
    x, y = _batch(0, width, 16, rank, world_size)
    _step(net, opt, x.to(dev), y.to(dev))  # Adam's state exists from the first step on
    state = dict(zip(("model", "optim"), get_state_dict(net, opt)))
    dcp.save(state, checkpoint_id=f"{path}/warm")
    dcp.async_save(state, checkpoint_id=f"{path}/async-warm").result()   # each timed call has run once before
    out = {}
    dist.barrier()
    t0 = time.perf_counter()
    dcp.save(state, checkpoint_id=f"{path}/save")
    out["save_s"] = time.perf_counter() - t0
    dist.barrier()
    t0 = time.perf_counter()
    future = dcp.async_save(state, checkpoint_id=f"{path}/async")
    out["async_returned_s"] = time.perf_counter() - t0
    future.result()
    out["async_done_s"] = time.perf_counter() - t0
    dist.barrier()
    t0 = time.perf_counter()
    dcp.load(state, checkpoint_id=f"{path}/save")
    out["load_s"] = time.perf_counter() - t0
    out["bytes"] = sum(f.stat().st_size for f in Path(f"{path}/save").iterdir())
    return out
