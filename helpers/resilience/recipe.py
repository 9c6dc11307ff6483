"""Surviving failures (10): a training loop that checkpoints every epoch and resumes where it stopped, a
SIGTERM that becomes a clean save-and-exit, and sharded checkpoints (DCP) that load on another number of ranks.

What the notebook teaches, the way a training script writes it. The resumed run equals the uninterrupted
one because everything the next epoch depends on is in the checkpoint or follows from it: the model's and
the optimizer's state, the epoch to start from (which is also the sampler's ``set_epoch``: the data order
follows from it and the sampler's seed), and each rank's random-number state (dropout, augmentation).
"""
from __future__ import annotations

import os
import signal

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from ..core.data import load_datasets
from ..core.models import DigitsCNN
from ..launching.ranks import local_device

__all__ = ["rng_state", "set_rng_state", "save_state", "load_state", "Preemption", "digits_setup", "train_epochs", "resumable_worker", "save_sharded",
           "load_sharded"]


def rng_state() -> dict:
    """This rank's random-number state: the CPU generator's, and its GPU's when the rank uses one (10)."""
    dev = local_device()
    return {"cpu": torch.get_rng_state(), "cuda": torch.cuda.get_rng_state(dev) if dev.type == "cuda" else None}


def set_rng_state(state: dict) -> None:
    """Put back on this rank what :func:`rng_state` took (10)."""
    torch.set_rng_state(state["cpu"])
    if state["cuda"] is not None:
        torch.cuda.set_rng_state(state["cuda"], local_device())


def save_state(path: str, model: DDP, optimizer: torch.optim.Optimizer, next_epoch: int) -> None:
    """Every rank's RNG state gathered; rank 0 writes model, optimizer, next epoch and them, atomically (10).

    Written to ``path + ".tmp"`` and renamed over ``path``: a rank killed while writing leaves the last
    complete checkpoint, never half of one (``os.replace`` is atomic on one filesystem).
    """
    rng = [None] * dist.get_world_size()
    dist.all_gather_object(rng, rng_state())
    if dist.get_rank() == 0:
        state = {"model": model.module.state_dict(), "optimizer": optimizer.state_dict(),
                 "next_epoch": next_epoch, "rng": rng}
        torch.save(state, path + ".tmp")
        os.replace(path + ".tmp", path)
    dist.barrier()  # nobody goes on (or reads it) before it is complete


def load_state(path: str, model: DDP, optimizer: torch.optim.Optimizer) -> int:
    """Restore what :func:`save_state` wrote, on every rank; return the epoch to start from (0: no checkpoint) (10)."""
    if not os.path.exists(path):
        return 0
    state = torch.load(path, map_location="cpu", weights_only=True)
    model.module.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    set_rng_state(state["rng"][dist.get_rank()])
    return state["next_epoch"]


class Preemption:
    """SIGTERM noted, not obeyed at once: the loop finishes its epoch, saves, and leaves cleanly (10).

    A scheduler that needs the machine back sends SIGTERM, then SIGKILL after a grace period (a spot instance's
    reclaim notice can be turned into the same SIGTERM by a watcher on the node);
    a process that dies on SIGTERM loses the epoch it was in. With this handler installed the signal only
    sets ``requested``; the loop checks it after each epoch's checkpoint.
    """

    def __init__(self) -> None:
        self.requested = False
        signal.signal(signal.SIGTERM, self._note)

    def _note(self, signum: int, frame: object) -> None:
        self.requested = True

    def agreed(self) -> bool:
        """Whether any rank was asked to stop: all ranks leave at the same epoch (every rank must call it)."""
        flag = torch.tensor([float(self.requested)], device=local_device())
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item())


def digits_setup(rank: int, world_size: int, batch_size: int = 64, lr: float = 3e-3) -> tuple:
    """The course CNN wrapped in DDP on this rank's device, Adam, and the digits with this rank's sampler (10).

    The same on every launcher (the course's, torchrun, Ray Train): seeded weights and the sampler's seed, so the
    data order of every epoch follows from the epoch number alone.
    """
    device = local_device()
    torch.manual_seed(0)  # the same initial weights on every rank (DDP broadcasts rank 0's anyway)
    ds = load_datasets("digits")
    sampler = DistributedSampler(ds["train"], num_replicas=world_size, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(ds["train"], batch_size=batch_size // world_size, sampler=sampler)
    model = DDP(DigitsCNN().to(device), device_ids=[device.index] if device.type == "cuda" else None)
    return model, torch.optim.Adam(model.parameters(), lr=lr), sampler, loader


def train_epochs(model: DDP, opt: torch.optim.Optimizer, sampler: DistributedSampler, loader: DataLoader,
                 start: int, epochs: int, after_epoch, before_epoch=None) -> list[int]:
    """Epochs ``start`` … ``epochs`` − 1, ``after_epoch(epoch)`` after each (it saves; True stops early) (10).

    ``before_epoch(epoch)``, if given, runs as each epoch starts (notebook 10 uses it to say where the run is).
    """
    device = next(model.parameters()).device
    ran = []
    for epoch in range(start, epochs):
        if before_epoch is not None:
            before_epoch(epoch)
        sampler.set_epoch(epoch)  # the data order follows from the epoch: a resumed epoch sees the same batches
        for x, y in loader:
            opt.zero_grad(set_to_none=True)
            nn.functional.cross_entropy(model(x.to(device)), y.to(device)).backward()
            opt.step()
        ran.append(epoch)
        if after_epoch(epoch):
            break
    return ran


def resumable_worker(rank: int, world_size: int, epochs: int, ckpt: str | None, before_epoch=None) -> dict:
    """:func:`digits_setup`, resumed from ``ckpt`` if it exists, a checkpoint after every epoch, SIGTERM obeyed (10).

    ``ckpt=None``: no checkpoint at all (a restart begins again at epoch 0). ``before_epoch(rank, epoch)``, if
    given, runs as each epoch starts (notebook 10 passes ``functools.partial(announce, folder)``: a process
    launched with it must be able to import it). Returns the epochs this run trained, whether it stopped early
    on SIGTERM, and the model's parameters.
    """

    preemption = Preemption()
    model, opt, sampler, loader = digits_setup(rank, world_size)
    start = load_state(ckpt, model, opt) if ckpt else 0

    def after_epoch(epoch: int) -> bool:
        if ckpt:
            save_state(ckpt, model, opt, epoch + 1)
        return preemption.agreed()

    ran = train_epochs(model, opt, sampler, loader, start, epochs, after_epoch,
                       None if before_epoch is None else lambda epoch: before_epoch(rank, epoch))
    return {"epochs_run": ran, "stopped_on_sigterm": bool(ran) and ran[-1] < epochs - 1,  # only SIGTERM stops it early
            "params": [p.detach().cpu().clone() for p in model.module.parameters()]}


def save_sharded(path: str, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """Model and optimizer saved with DCP: each rank writes its own shards, rank 0 the metadata (10)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model_sd, optim_sd = get_state_dict(model, optimizer)
    dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=path)


def load_sharded(path: str, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """Load what :func:`save_sharded` wrote into ``model`` and ``optimizer``, sharded as they are now (10).

    The state dicts of the model as it is sharded here say which pieces each rank needs; DCP reads them
    from the files written by however many ranks saved them: resharding happens at load.
    """
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    model_sd, optim_sd = get_state_dict(model, optimizer)
    state = {"model": model_sd, "optim": optim_sd}
    dcp.load(state, checkpoint_id=path)
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
