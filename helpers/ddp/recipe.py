"""DistributedDataParallel: the worker notebook 03 teaches (its recipe), the way a training script writes it.

Every rank runs :func:`train_worker` (the launcher from a notebook, or ``torchrun`` through
``helpers/ddp/script.py``): its local device, its share of the data, the model wrapped in DDP,
the course's training loop, a checkpoint that rank 0 writes and every rank reloads.
"""
from __future__ import annotations

import hashlib
import os
import socket
from contextlib import nullcontext

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from ..core.data import load_datasets, tensors
from ..core.i18n import tr
from ..core.logger import Monitor
from ..core.measure import seed_everything
from ..core.models import DigitsCNN
from ..core.train import train
from ..launching.ranks import local_device

__all__ = ["ddp_wrap", "accumulate_with_no_sync", "require_same_file", "train_worker"]


def ddp_wrap(model: nn.Module, device: torch.device) -> DDP:
    """``DistributedDataParallel(model)``, told its GPU when it has one (03).

    ``device_ids`` is for a module on one CUDA device; on the CPU it must be left out.
    """
    return DDP(model, device_ids=[device.index] if device.type == "cuda" else None)


def accumulate_with_no_sync(model: DDP, optimizer: torch.optim.Optimizer, micro_batches: list) -> None:
    """One optimizer step over several micro-batches, all-reduced once (03): gradient accumulation.

    ``model.no_sync()`` turns DDP's all-reduce off for the backward passes inside it: their
    gradients add up in ``.grad`` on each rank. The last backward runs outside it, so DDP
    all-reduces the sum once, bucket by bucket, as in any other step.
    """
    optimizer.zero_grad()
    for i, (x, y) in enumerate(micro_batches):
        last = i == len(micro_batches) - 1
        with nullcontext() if last else model.no_sync():  # no all-reduce before the last micro-batch
            # mean loss / number of micro-batches: the gradients add up to those of the mean over all
            # samples only when the micro-batches are equal in size (else weight each by its share)
            loss = nn.functional.cross_entropy(model(x), y) / len(micro_batches)
            loss.backward()
    optimizer.step()


def require_same_file(path: str, rank: int) -> None:
    """Every rank must read the very file rank 0 wrote at ``path``; otherwise every rank raises, saying why (03).

    Each machine reads ``path`` on its own filesystem: unless every node shares it (NFS, a cluster
    filesystem), a rank on another machine finds no file there, or a stale one from an earlier run.
    Rank 0 broadcasts the file's SHA-256; each rank compares its own copy, and all ranks learn the verdict.
    """
    def sha256() -> str | None:
        if not os.path.exists(path):
            return None
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()

    digest = [sha256() if rank == 0 else None]
    dist.broadcast_object_list(digest, src=0)
    mine = sha256()
    seen = [None] * dist.get_world_size()
    dist.all_gather_object(seen, (socket.gethostname(), "same" if mine == digest[0] else
                                  "no such file" if mine is None else "a different file"))
    bad = [f"rank {r} on {host}: {what}" for r, (host, what) in enumerate(seen) if what != "same"]
    if bad:
        raise RuntimeError(f"not every rank sees the file rank 0 wrote at {path!r} ({'; '.join(bad)}): with several "
                           "machines, give a path on a filesystem every node shares")


def train_worker(rank: int, world_size: int, epochs: int, batch_size: int, lr: float, ckpt: str,
                 log_dir: str | None = None) -> dict:
    """The course CNN trained with DDP on the digits, each rank on its share; checkpoint saved and reloaded (03).

    The recipe: the rank's local device, a ``DistributedSampler`` (with ``set_epoch`` every epoch,
    through the training loop's ``on_epoch``), the model wrapped in DDP, the course's one training
    loop (only rank 0 draws its bar), rank 0 saving the plain module behind a barrier, every rank
    reloading it with ``map_location`` (after checking that it sees the file rank 0 wrote). With ``log_dir``, rank 0 logs every epoch to TensorBoard
    (``Monitor`` is a no-op on the other ranks) (05).
    """
    device = local_device()  # cuda:LOCAL_RANK under nccl: the local rank, never the global one
    seed_everything(0)
    ds = load_datasets("digits")
    sampler = DistributedSampler(ds["train"], num_replicas=world_size, rank=rank, shuffle=True, seed=0)
    # shuffle=False on the loader: the sampler shuffles; pin_memory only pays off when copying to a GPU
    loader = DataLoader(ds["train"], batch_size=batch_size // world_size, sampler=sampler, shuffle=False,
                        pin_memory=device.type == "cuda")
    model = ddp_wrap(DigitsCNN().to(device), device)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    monitor = Monitor(log_dir, rank=rank, wandb=False) if log_dir else None
    train(model, loader, epochs=epochs, optimizer=opt, rank=rank,
          desc=tr("ddp.train_desc", "DDP × {world}, rank 0 on 1/{world} of each batch",
                  world=world_size),  # its bar and loss: rank 0's share only
          on_epoch=sampler.set_epoch,  # a different shuffle every epoch, the same on every rank
          logger=monitor)
    if monitor is not None:
        monitor.close()
    if rank == 0:
        torch.save(model.module.state_dict(), ckpt)  # save the plain module, not the DDP wrapper
    dist.barrier()  # nobody reads the checkpoint before rank 0 has written it
    require_same_file(ckpt, rank)  # several machines: the path must be on a filesystem every node shares
    fresh = DigitsCNN().to(device)
    fresh.load_state_dict(torch.load(ckpt, map_location=device, weights_only=True))
    same = all(torch.equal(a, b) for a, b in zip(fresh.state_dict().values(), model.module.state_dict().values()))
    x_val, y_val = tensors(ds["val"])
    with torch.no_grad():
        acc = (fresh(x_val.to(device)).argmax(1).cpu() == y_val).float().mean().item()
    return {"rank": rank, "samples_seen": len(sampler) * epochs, "val_acc": acc, "checkpoint_matches": same}
