"""Notebook 10's training under Ray Train: the same setup and epochs as the course's launcher, Ray's checkpoints (10).

``TorchTrainer(ray_train_loop, train_loop_config={...}, scaling_config=ScalingConfig(num_workers=2))`` runs
this function on every worker. Ray Train has already joined the workers in a process group (gloo on CPUs,
nccl on GPUs) and gives each its rank (``ray.train.get_context()``); the setup is :func:`digits_setup`, so the
data order and the weights are those of the course's launcher. After each epoch every worker reports the
epoch's number and the validation accuracy with ``ray.train.report``, rank 0 with a checkpoint directory; a restarted group finds the last
one with ``ray.train.get_checkpoint()`` and resumes from it.
"""
from __future__ import annotations

import os
import tempfile

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader

from ..core.data import load_datasets
from ..core.train import evaluate
from .instruments import announce
from .recipe import digits_setup, rng_state, set_rng_state, train_epochs

__all__ = ["ray_train_loop"]


def ray_train_loop(config: dict) -> None:
    """Ray Train's function per worker: resume from Ray's last checkpoint if any, train, report every epoch (10)."""
    import ray.train

    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    model, opt, sampler, loader = digits_setup(rank, world, config.get("batch_size", 64), config.get("lr", 3e-3))
    val = DataLoader(load_datasets("digits")["val"], batch_size=256)   # every worker: the whole validation split
    start = 0
    checkpoint = ray.train.get_checkpoint()
    if checkpoint is not None:  # a restarted group: every worker loads the same file
        with checkpoint.as_directory() as d:
            state = torch.load(os.path.join(d, "state.pt"), map_location="cpu", weights_only=True)
        model.module.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        set_rng_state(state["rng"][rank])
        start = state["next_epoch"]

    def after_epoch(epoch: int) -> bool:
        rng = [None] * world
        dist.all_gather_object(rng, rng_state())
        with tempfile.TemporaryDirectory() as d:
            saved = None
            if rank == 0:  # one copy of the replicated state: rank 0's
                torch.save({"model": model.module.state_dict(), "optimizer": opt.state_dict(),
                            "next_epoch": epoch + 1, "rng": rng}, os.path.join(d, "state.pt"))
                saved = ray.train.Checkpoint.from_directory(d)
            metrics = {"epoch": epoch, "pid": os.getpid(), "val_acc": evaluate(model.module, val)["acc"]}
            ray.train.report(metrics, checkpoint=saved)  # every worker: a barrier
        return False

    train_epochs(model, opt, sampler, loader, start, config["epochs"], after_epoch,
                 lambda epoch: announce(config.get("announce_dir"), rank, epoch))
