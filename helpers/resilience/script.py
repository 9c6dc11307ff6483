"""Notebook 10's resumable training as a script for torchrun: it picks up where the last checkpoint left off (10).

    torchrun --standalone --nproc_per_node 2 --max-restarts 1 -m helpers.resilience.script --epochs 3 --checkpoint ck.pt

With ``--max-restarts`` torchrun restarts every worker when one dies; each restarted worker finds the
checkpoint and resumes from it. SIGTERM (a scheduler's or a reclaimed spot instance's warning) makes the
workers finish their epoch, save, and exit 0. Rank 0 prints one line per run: the epochs it trained.
"""
from __future__ import annotations

import argparse
import gc
import os
from functools import partial

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record

from ..core.i18n import tr
from ..launching.ranks import choose_backend, local_device, local_world_size
from .instruments import announce
from .recipe import resumable_worker


@record
def main(argv: list[str] | None = None) -> None:
    """The torchrun entry point: join the process group, train from the checkpoint if there is one, report (10)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--checkpoint", default="resumable.pt", help="'' for none: a restart begins at epoch 0")
    parser.add_argument("--out", default=None, help="rank 0 saves the final parameters here")
    parser.add_argument("--announce-dir", default=None, help="each rank writes its pid there as each epoch starts")
    args = parser.parse_args(argv)
    backend = choose_backend(local_world_size())
    device = local_device(backend)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    dist.init_process_group(backend, init_method="env://")
    rank = dist.get_rank()
    try:
        res = resumable_worker(rank, dist.get_world_size(), args.epochs, args.checkpoint or None,
                               partial(announce, args.announce_dir))
        if rank == 0:
            restart, epochs = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"), res["epochs_run"]
            if res["stopped_on_sigterm"]:   # the notebook keeps the lines that start with "restart ", in Korean too
                said = tr("10.restart_trained_sigterm", "restart {restart}: trained epochs {epochs}; stopped on "
                          "SIGTERM after saving", restart=restart, epochs=epochs)
            else:
                said = tr("10.restart_trained", "restart {restart}: trained epochs {epochs}", restart=restart,
                          epochs=epochs)
            print(said, flush=True)
            if args.out:
                torch.save(res["params"], args.out)
        dist.barrier()
    finally:
        gc.collect()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
