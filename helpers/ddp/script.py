"""The course's DDP training as a script for torchrun (03_ddp).

    torchrun --standalone --nproc_per_node 2 -m helpers.ddp.script --epochs 3

torchrun starts the processes and sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and
MASTER_PORT; the script only reads them (``init_method="env://"``). Rank 0 alone prints.
"""
from __future__ import annotations

import argparse
import gc
import os

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record

from ..core.i18n import tr
from ..launching.ranks import choose_backend, local_device, local_world_size
from .recipe import train_worker


@record  # a failing rank's traceback is reported by torchrun, not lost
def main(argv: list[str] | None = None) -> None:
    """The torchrun entry point: parse the arguments, join the process group, train, report (03)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64, help="global batch, split over the ranks")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--checkpoint", default="ddp_torchrun.pt")
    args = parser.parse_args(argv)
    backend = choose_backend(local_world_size())  # nccl if this node has a GPU per local process
    device = local_device(backend)                  # cuda:LOCAL_RANK, or the CPU
    if device.type == "cuda":
        torch.cuda.set_device(device)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    dist.init_process_group(backend, init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    try:
        _say_where(rank, world, backend, device)
        res = train_worker(rank, world, args.epochs, args.batch_size, args.lr, args.checkpoint)
        got = [None] * world
        dist.all_gather_object(got, (res["checkpoint_matches"], res["val_acc"]))
        if rank == 0:  # identical replicas: each rank's own model equals the checkpoint rank 0 saved
            print(tr("ddp.script_weights", "each rank's own weights equal rank 0's checkpoint: {same}",
                     same=[m for m, _ in got]))
            print(tr("ddp.script_accuracy", "validation accuracy of that checkpoint, reloaded on every rank: {acc}",
                     acc=[round(a, 3) for _, a in got]))
        dist.barrier()  # leave together: no rank tears down its connections while another still uses them
    finally:
        gc.collect()  # free the DDP model (its reducer holds the process group) while Python is still alive
        dist.destroy_process_group()


def _say_where(rank: int, world: int, backend: str, device: torch.device) -> None:
    """Rank 0 prints who runs where: each rank's RANK, GROUP_RANK (its node, with one agent a node) and LOCAL_RANK as
    torchrun set them, and its device."""
    where = [None] * world
    dist.all_gather_object(where, (os.environ["RANK"], os.environ["GROUP_RANK"], os.environ["LOCAL_RANK"], str(device)))
    if rank == 0:
        agents = len({node for _, node, _, _ in where})
        print(tr("ddp.script_world", "{world} processes in all, started by {agents} torchrun agent(s); backend "
                 "{backend}; MASTER_ADDR={addr} (rank 0 speaking)", world=world, agents=agents, backend=backend,
                 addr=os.environ["MASTER_ADDR"]))
        for r, node, local, dev in where:
            # the variables torchrun set, in every edition: notebook 03's cell asserts "RANK=1 GROUP_RANK=1 LOCAL_RANK=0"
            print(f"  RANK={r} GROUP_RANK={node} LOCAL_RANK={local} → {dev}")


if __name__ == "__main__":
    main()
