"""DistributedDataParallel, shown and measured (03_ddp).

Workers here run inside processes started by :func:`helpers.launch.launch` (``torch.distributed``
already initialised); the ``run_*`` functions are what the notebook calls.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset
from tqdm.auto import tqdm

from .data import load_datasets, tensors
from .launch import launch
from .ranks import agree, choose_backend, local_device
from .models import DigitsCNN
from .utils import seed_everything
from .checks import Exercise


# --- DistributedSampler, seen -------------------------------------------------------------------

def sampler_indices(n: int = 10, world_size: int = 4, shuffle: bool = False, epoch: int = 0,
                    drop_last: bool = False, seed: int = 0) -> list[list[int]]:
    """Which sample indices each rank gets from ``DistributedSampler`` for a dataset of ``n`` (03).

    Uses the real sampler with explicit ``num_replicas``/``rank``, so no process group is needed.
    """
    if n < 1 or world_size < 1:
        raise ValueError(f"need n >= 1 and world_size >= 1, got n={n}, world_size={world_size}")
    data = list(range(n))
    out = []
    for rank in range(world_size):
        s = DistributedSampler(data, num_replicas=world_size, rank=rank, shuffle=shuffle, seed=seed,
                               drop_last=drop_last)
        s.set_epoch(epoch)
        out.append(list(s))
    return out


def format_sampler_table(parts: list[list[int]]) -> str:
    """One line per rank: ``rank 0: [0, 4, 8]``."""
    return "\n".join(f"rank {r}: {p}" for r, p in enumerate(parts))


# --- DDP equals one big batch -----------------------------------------------------------------------

def _equivalence_model(batchnorm: bool, sync: bool = False) -> nn.Module:
    torch.manual_seed(0)
    layers: list[nn.Module] = [nn.Flatten(), nn.Linear(64, 32)]
    if batchnorm:
        layers.append(nn.BatchNorm1d(32))
    layers += [nn.ReLU(), nn.Linear(32, 10)]
    model = nn.Sequential(*layers)
    return nn.SyncBatchNorm.convert_sync_batchnorm(model) if sync else model


def _equivalence_batch(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    x, y = tensors(load_datasets("digits")["train"])
    return x[:batch], y[:batch]


def _sgd_step(model: nn.Module, x: torch.Tensor, y: torch.Tensor, lr: float) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()


def equivalence_worker(rank: int, world_size: int, batch: int, lr: float, batchnorm: bool, sync: bool) -> list:
    """One SGD step with DDP, each rank on its ``batch / world_size`` slice; returns the parameters (03)."""
    device = local_device()
    model = _ddp(_equivalence_model(batchnorm, sync).to(device), device)
    x, y = (t.to(device) for t in _equivalence_batch(batch))
    local = batch // world_size
    _sgd_step(model, x[rank * local:(rank + 1) * local], y[rank * local:(rank + 1) * local], lr)
    return [p.detach().cpu().clone() for p in model.module.parameters()]


def _ddp(model: nn.Module, device: torch.device) -> DDP:
    """``DDP(model)``, told its GPU when there is one (``device_ids`` is for single-device CUDA modules only)."""
    return DDP(model, device_ids=[device.index] if device.type == "cuda" else None)


def run_ddp_equivalence_check(nprocs: int = 2, batch: int = 64, lr: float = 0.5, batchnorm: bool = False,
                              sync_batchnorm: bool = False, timeout: float = 90) -> dict:
    """Max |difference| between DDP's parameters after one step and one process on the whole batch (03).

    Equal (to float rounding) without BatchNorm: DDP averages the ranks' gradients, and the mean
    of equal-sized slices' mean losses is the whole batch's mean loss.
    """
    if batch % nprocs:
        raise ValueError(f"batch ({batch}) must divide evenly over {nprocs} processes for this comparison")
    ranks = launch(equivalence_worker, nprocs, args=(batch, lr, batchnorm, sync_batchnorm), timeout=timeout,
                   verbose=False)
    single = _equivalence_model(batchnorm)
    _sgd_step(single, *_equivalence_batch(batch), lr)
    diff = max((a - b).abs().max().item() for a, b in zip(ranks[0], single.parameters()))
    between_ranks = max((a - b).abs().max().item() for a, b in zip(ranks[0], ranks[-1]))
    return {"max_abs_diff": diff, "ranks_agree": between_ranks == 0.0, "processes": nprocs, "batch": batch}


# --- training for real ------------------------------------------------------------------------------

def train_worker(rank: int, world_size: int, epochs: int, batch_size: int, lr: float, ckpt: str,
                 log_dir: str | None = None) -> dict:
    """The course CNN on the digits with DDP; rank 0 draws the bar, saves and reloads the checkpoint (03).

    With ``log_dir``, rank 0 logs each epoch's loss to TensorBoard through ``helpers.monitor.Monitor``
    (the other ranks' monitors do nothing) (05).
    """
    from .monitor import Monitor
    device = local_device()  # cuda:LOCAL_RANK under nccl: the local rank, never the global one
    seed_everything(0)
    ds = load_datasets("digits")
    sampler = DistributedSampler(ds["train"], num_replicas=world_size, rank=rank, shuffle=True, seed=0)
    # shuffle=False on the loader: the sampler shuffles; pin_memory only pays off when copying to a GPU
    loader = DataLoader(ds["train"], batch_size=batch_size // world_size, sampler=sampler, shuffle=False,
                        pin_memory=device.type == "cuda")
    model = _ddp(DigitsCNN().to(device), device)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    bar = tqdm(total=epochs * len(loader), desc=f"DDP × {world_size}", disable=rank != 0, mininterval=0.5)
    monitor = Monitor(log_dir, rank=rank, wandb=False) if log_dir else None
    for epoch in range(epochs):
        sampler.set_epoch(epoch)  # a different shuffle every epoch, the same on every rank
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            bar.update()
        bar.set_postfix(epoch=epoch + 1, loss=f"{loss.item():.3f}")
        if monitor is not None:
            monitor.log({"train/loss": loss.item()}, step=epoch + 1)
    bar.close()
    if monitor is not None:
        monitor.close()
    if rank == 0:
        torch.save(model.module.state_dict(), ckpt)  # save the plain module, not the DDP wrapper
    dist.barrier()  # nobody reads the checkpoint before rank 0 has written it
    fresh = DigitsCNN().to(device)
    fresh.load_state_dict(torch.load(ckpt, map_location=device, weights_only=True))
    same = all(torch.equal(a, b) for a, b in zip(fresh.state_dict().values(), model.module.state_dict().values()))
    x_val, y_val = tensors(ds["val"])
    with torch.no_grad():
        acc = (fresh(x_val.to(device)).argmax(1).cpu() == y_val).float().mean().item()
    return {"rank": rank, "samples_seen": len(sampler) * epochs, "val_acc": acc, "checkpoint_matches": same}


# --- timing: 1 vs N processes -----------------------------------------------------------------------

class BucketCounter:
    """A DDP communication hook that counts the gradient buckets it all-reduces (03)."""

    def __init__(self) -> None:
        self.calls = 0
        self.bytes = 0

    @staticmethod
    def hook(state, bucket):  # no annotations: DDP checks them, and this module's are strings

        state.calls += 1
        buf = bucket.buffer()
        state.bytes += buf.numel() * buf.element_size()
        fut = dist.all_reduce(buf.div_(dist.get_world_size()), async_op=True).get_future()
        return fut.then(lambda f: f.value()[0])


def _synthetic_batches(global_batch: int, world_size: int, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    x, y = tensors(load_datasets("digits")["train"])
    reps = -(-global_batch // len(x))
    x, y = x.repeat(reps, 1, 1, 1)[:global_batch], y.repeat(reps)[:global_batch]
    local = global_batch // world_size
    return x[rank * local:(rank + 1) * local], y[rank * local:(rank + 1) * local]


def throughput_worker(rank: int, world_size: int, batches: list[int], seconds: float, channels: tuple[int, int],
                      hidden: int) -> list[dict]:
    """Samples/s of DDP training at each global batch size, measured for ``seconds`` each (03)."""
    device = local_device()
    torch.manual_seed(0)
    model = _ddp(DigitsCNN(channels=channels, hidden=hidden).to(device), device)
    counter = BucketCounter()
    model.register_comm_hook(counter, BucketCounter.hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    out = []
    for gb in batches:
        x, y = (t.to(device) for t in _synthetic_batches(gb, world_size, rank))

        def step() -> None:
            opt.zero_grad(set_to_none=True)
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()

        for _ in range(3):
            step()
        counter.calls = counter.bytes = 0
        # every rank runs the same number of steps: rank 0 decides, from a timed probe
        t0 = time.perf_counter()
        for _ in range(3):
            step()
        n = int(agree(max(3, int(seconds / ((time.perf_counter() - t0) / 3))), "rank0"))
        counter.calls = counter.bytes = 0
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(n):
            step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        dt = agree(time.perf_counter() - t0, "max")  # the slowest rank sets the pace
        out.append({"global_batch": gb, "steps": n, "step_s": dt / n, "samples_per_s": gb * n / dt,
                    "buckets_per_step": counter.calls / n, "allreduce_bytes_per_step": counter.bytes / n})
    return out


def run_throughput(nprocs_list: tuple[int, ...] = (1, 2), batches: tuple[int, ...] = (64, 256, 1024),
                   seconds: float = 1.5, channels: tuple[int, int] = (16, 32), hidden: int = 64, repeats: int = 2,
                   timeout: float = 120) -> list[dict]:
    """Throughput of DDP with each process count, every process single-threaded, same global batches (03).

    The process counts are measured in turn, ``repeats`` times, and the best run of each is kept:
    on a shared machine a burst of outside load slows one run, never speeds one up.
    """
    best: dict[tuple[int, int], dict] = {}
    backend = choose_backend(max(nprocs_list))  # the same backend (and devices) for every process count
    for _ in range(repeats):
        for n in nprocs_list:
            res = launch(throughput_worker, n, args=(list(batches), seconds, channels, hidden), timeout=timeout,
                         backend=backend, verbose=False)[0]
            for r in res:
                key = (n, r["global_batch"])
                if key not in best or r["samples_per_s"] > best[key]["samples_per_s"]:
                    best[key] = {"processes": n, **r}
    rows = [best[(n, b)] for n in nprocs_list for b in batches]
    base = {r["global_batch"]: r["samples_per_s"] for r in rows if r["processes"] == nprocs_list[0]}
    for r in rows:
        r["speedup"] = r["samples_per_s"] / base[r["global_batch"]]
    return rows


def no_sync_worker(rank: int, world_size: int, accum: int, local_batch: int) -> dict:
    """Gradient accumulation over ``accum`` micro-batches, with and without ``no_sync`` (03).

    Returns how many buckets were all-reduced in each case and whether the gradients are equal.
    """
    device = local_device()
    x, y = (t.to(device) for t in _synthetic_batches(local_batch * accum * world_size, world_size, rank))
    grads, calls = {}, {}
    for use_no_sync in (False, True):
        torch.manual_seed(0)
        model = _ddp(DigitsCNN().to(device), device)
        counter = BucketCounter()
        model.register_comm_hook(counter, BucketCounter.hook)
        for i in range(accum):
            xb, yb = x[i * local_batch:(i + 1) * local_batch], y[i * local_batch:(i + 1) * local_batch]
            last = i == accum - 1
            ctx = model.no_sync() if (use_no_sync and not last) else nullcontext()
            with ctx:
                (nn.functional.cross_entropy(model(xb), yb) / accum).backward()
        grads[use_no_sync] = [p.grad.clone() for p in model.parameters()]
        calls[use_no_sync] = counter.calls
    diff = max((a - b).abs().max().item() for a, b in zip(grads[False], grads[True]))
    return {"allreduce_calls_plain": calls[False], "allreduce_calls_no_sync": calls[True], "grad_max_abs_diff": diff}


# --- torchrun --------------------------------------------------------------------------------------

def torchrun_command(nproc: int = 2, nnodes: int = 1, endpoint: str | None = None,
                     script_args: tuple[str, ...] = ()) -> list[str]:
    """The torchrun command line for this course's DDP script, one node (standalone) or several (03).

    Several nodes meet at a c10d rendezvous: every node runs the *same* command, and the
    rendezvous gives each its node rank (no ``--node_rank`` to set by hand).
    """
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}"]
    if nnodes == 1 and endpoint is None:
        cmd.append("--standalone")  # a free local port is chosen for the rendezvous
    else:
        if endpoint is None:
            raise ValueError("several nodes need a rendezvous endpoint reachable by all, e.g. endpoint='10.0.0.1:29500'")
        cmd += [f"--nnodes={nnodes}", "--rdzv_backend=c10d", f"--rdzv_endpoint={endpoint}", "--rdzv_id=beyond-one-gpu"]
    return cmd + ["-m", "helpers.ddp_script", *script_args]


def run_torchrun(nproc: int = 2, script_args: tuple[str, ...] = (), timeout: float = 90, nnodes: int = 1) -> str:
    """Run the course's DDP script with torchrun and return what it printed (03).

    ``nnodes=1``: ``torchrun --standalone --nproc_per_node N``. ``nnodes=2``: a real two-node launch
    on this machine: two torchrun agents, each a "node" with ``nproc`` processes, meeting at a c10d
    rendezvous on 127.0.0.1 (a free port). Each agent runs in a process group of its own; all of
    them are killed if the run outlives ``timeout`` seconds, fails on one node, is interrupted
    (Jupyter's Stop), or if this kernel dies (a watchdog). Returns the nodes' outputs, node by node.
    """
    from .procs import kill_group, watch_parent

    if not isinstance(nnodes, int) or nnodes < 1:
        raise ValueError(f"nnodes must be a positive int, got {nnodes!r}")
    endpoint = None if nnodes == 1 else f"127.0.0.1:{_free_port()}"
    cmd = torchrun_command(nproc, nnodes=nnodes, endpoint=endpoint, script_args=script_args)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    outs = [tempfile.TemporaryFile("w+") for _ in range(nnodes)]
    agents = [subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True)
              for out in outs]
    watchdog = watch_parent(groups=[a.pid for a in agents])  # if this kernel dies, the agents and workers go too
    deadline = time.monotonic() + timeout
    try:
        while any(a.poll() is None for a in agents):
            if any(a.returncode not in (None, 0) for a in agents) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    finally:
        for a in agents:
            if a.poll() is None:
                kill_group(a.pid)
            a.wait()
        watchdog.kill()
        watchdog.wait()
    texts = []
    for out in outs:
        out.seek(0)
        texts.append(out.read())
        out.close()
    text = texts[0] if nnodes == 1 else "\n".join(f"--- node {i} ---\n{t}" for i, t in enumerate(texts))
    if time.monotonic() > deadline:
        raise TimeoutError(f"torchrun did not finish within {timeout:g} s and was killed with all its workers")
    if any(a.returncode != 0 for a in agents):
        codes = [a.returncode for a in agents]
        raise RuntimeError(f"torchrun exited with code(s) {codes}; its output:\n{text}")
    return text


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pinned_copy_speed(mb: int = 64, repeats: int = 5) -> dict | None:
    """GB/s of host-to-GPU copies from pageable vs pinned memory; ``None`` without a GPU (03)."""
    if not torch.cuda.is_available():
        return None
    n = mb * 2**20 // 4
    out = {}
    for pinned in (False, True):
        src = torch.empty(n, dtype=torch.float32, pin_memory=pinned)
        dst = torch.empty(n, dtype=torch.float32, device="cuda")
        dst.copy_(src, non_blocking=pinned)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(repeats):
            dst.copy_(src, non_blocking=pinned)
        torch.cuda.synchronize()
        out["pinned" if pinned else "pageable"] = repeats * n * 4 / (time.perf_counter() - t0) / 1e9
    return out


def cleanup_checkpoint(path: str | Path) -> None:
    """Remove a checkpoint file or folder written by a demo, if it is there."""
    p = Path(path)
    if p.is_dir():
        shutil.rmtree(p)
    elif p.exists():
        p.unlink()


def throughput_table(rows: list[dict]) -> str:
    """The 1-vs-N-process measurements as aligned text (03)."""
    head = f"{'processes':>9} {'global batch':>12} {'step ms':>8} {'samples/s':>10} {'speedup':>8} {'all-reduce KB/step':>19}"
    lines = [head]
    for r in rows:
        lines.append(f"{r['processes']:>9} {r['global_batch']:>12} {1e3 * r['step_s']:>8.1f} {r['samples_per_s']:>10.0f} "
                     f"{r['speedup']:>7.2f}× {r['allreduce_bytes_per_step'] / 1e3:>19.0f}")
    return "\n".join(lines)


def plot_throughput(rows: list[dict], label: str = ""):
    """Samples/s and speedup against the global batch, one line per process count (03)."""
    import matplotlib.pyplot as plt

    from .plots import finish

    fig, ax = plt.subplots(1, 2, figsize=(10, 3.4))
    for n in sorted({r["processes"] for r in rows}):
        rs = [r for r in rows if r["processes"] == n]
        gb = [r["global_batch"] for r in rs]
        ax[0].plot(gb, [r["samples_per_s"] for r in rs], "o-", label=f"{n} process{'es' if n > 1 else ''}")
        ax[1].plot(gb, [r["speedup"] for r in rs], "o-", label=f"{n} process{'es' if n > 1 else ''}")
    n_max = max(r["processes"] for r in rows)
    ax[1].axhline(n_max, color="gray", ls=":", label=f"ideal ({n_max}×)")
    ax[0].set(xscale="log", xlabel="global batch (samples per step)", ylabel="samples / s", title="throughput")
    ax[1].set(xscale="log", xlabel="global batch (samples per step)", ylabel="speedup over 1 process",
              title="more compute per all-reduce → better scaling")
    for a in ax:
        a.grid(alpha=0.3)
        a.legend()
    if label:
        fig.suptitle(label, fontsize=9)
    fig.tight_layout()
    return finish(fig)


EXERCISES = [
    Exercise("03.rank3_n10_k4", "int", digest="9a5bcd552aaadc3f8701ccb90fe40d73566a92beda416d3dd0c17d81881c32ba",
             hint="The sampler pads the dataset to a multiple of the number of ranks, then deals it out like cards.",
             why="Every rank gets the same number of samples, so no rank waits at the all-reduce."),
    Exercise("03.padding_n10_k4", "int", digest="ef42eaa49ef601f793eaf5c5f383534409aebf15f3fe4aac3656b2220acd904d",
             hint="Round the dataset size up to the next multiple of the number of ranks.",
             why="Padding repeats samples; drop_last=True drops the tail instead."),
    Exercise("03.allreduce_8", "int", digest="f532e3e731f475049d439455a19a9f7e483ca09da04242755b6898bfb35fc470",
             hint="all_reduce with the default op sums what every rank contributes; each rank contributes rank + 1.",
             why="Every rank ends with the same sum: that is what makes DDP's replicas identical."),
]
