"""What notebook 10 launches to show resharding: an FSDP2 model trained, saved with DCP, loaded on another N (10)."""
from __future__ import annotations

import os

import torch
from torch.distributed.device_mesh import init_device_mesh

from ..launching.ranks import local_device
from ..sharding.instruments import full_parameters, synthetic_regression, train_step
from ..sharding.recipe import make_model, shard_fsdp2
from .recipe import load_sharded, save_sharded

__all__ = ["dcp_train_worker", "plain_training"]


def _share(rank: int, world_size: int, batch: int, width: int, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    x, y = synthetic_regression(batch, width, seed=step)  # step s's batch, the same whatever N
    n = batch // world_size
    return x[rank * n:(rank + 1) * n], y[rank * n:(rank + 1) * n]


def dcp_train_worker(rank: int, world_size: int, path: str, start: int, steps: int, save: bool,
                     layers: int = 2, width: int = 64, batch: int = 16) -> dict:
    """FSDP2 on N ranks: load ``path`` when ``start`` > 0 (resharded to N), train ``steps`` Adam steps, save if asked (10).

    Returns the files DCP wrote (rank 0) and the whole trained parameters.
    """
    dev = local_device()
    net, opt = shard_fsdp2(make_model(layers, width).to(dev), init_device_mesh(dev.type, (world_size,)), lr=1e-2)
    if start:
        load_sharded(path, net, opt)
    for step in range(start, start + steps):
        xs, ys = _share(rank, world_size, batch, width, step)
        train_step(net, opt, xs.to(dev), ys.to(dev))
    if save:
        save_sharded(path, net, opt)
    files = sorted(os.listdir(path)) if save and rank == 0 else None
    return {"files": files, "params": full_parameters(net)}


def plain_training(steps: int, layers: int = 2, width: int = 64, batch: int = 16) -> list[torch.Tensor]:
    """The same training on one process, unsharded, whole batch: what every resharded run must equal (10)."""
    model = make_model(layers, width)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for step in range(steps):
        x, y = _share(0, 1, batch, width, step)
        train_step(model, opt, x, y)
    return [p.detach().clone() for p in model.parameters()]
