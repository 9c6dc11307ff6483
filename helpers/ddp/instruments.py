"""DistributedDataParallel, seen and checked: the sampler's shares, DDP = one big batch, no_sync, pinned copies (03)."""
from __future__ import annotations

import time

import torch
from torch import nn
from torch.utils.data import DistributedSampler

from ..core.data import digits_batch
from ..core.i18n import tr
from ..core.measure import max_abs_diff
from ..core.models import DigitsCNN
from ..launching.launcher import launch
from ..launching.ranks import choose_backend, local_device
from ..launching.throughput import BucketCounter, rank_share
from .recipe import accumulate_with_no_sync, ddp_wrap

__all__ = ["sampler_indices", "format_sampler_table", "equivalence_worker", "run_ddp_equivalence_check",
           "run_ddp_equivalence_checks", "no_sync_worker", "pinned_copy_speed", "throughput_table", "gloo_worker_threads",
           "how_the_launch_ended"]


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


def gloo_worker_threads() -> dict | None:
    """Called in a rank: the worker threads and network devices of its default group's gloo backend, else None (03).

    Read from the backend's own options (``_threads``, ``_devices``): gloo's default options give it two
    worker threads per network device (``Options::create_default`` in ProcessGroupGloo.cpp).
    """
    import torch.distributed as dist
    group = dist.distributed_c10d._get_default_group()
    if "gloo" not in str(dist.get_backend(group)):
        return None
    try:  # private bindings (torch 2.14 has them): None where a version lacks them
        opts = group._get_backend(torch.device("cpu")).options
        return {"threads": opts._threads, "devices": len(opts._devices)}
    except (AttributeError, RuntimeError):
        return None


def format_sampler_table(parts: list[list[int]]) -> str:
    """One line per rank: ``rank 0: [0, 4, 8]`` (03)."""
    return "\n".join(f"rank {r}: {p}" for r, p in enumerate(parts))


def _equivalence_model(batchnorm: bool, sync: bool = False) -> nn.Module:
    torch.manual_seed(0)
    layers: list[nn.Module] = [nn.Flatten(), nn.Linear(64, 32)]
    if batchnorm:
        layers.append(nn.BatchNorm1d(32))
    layers += [nn.ReLU(), nn.Linear(32, 10)]
    model = nn.Sequential(*layers)
    return nn.SyncBatchNorm.convert_sync_batchnorm(model) if sync else model


def _equivalence_batch(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    return digits_batch(batch)


def _sgd_step(model: nn.Module, x: torch.Tensor, y: torch.Tensor, lr: float) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()


def reference_parameters(name: str, batch: int, lr: float, device: str | torch.device = "cpu") -> list[torch.Tensor]:
    """One process's parameters after the same SGD step on the whole batch (03).

    ``device``: the kind of device the ranks it is compared with computed on. A GPU's matrix products
    round differently from a CPU's, so GPU ranks against a CPU reference would measure that, not DDP.
    The BatchNorm variants train plain BatchNorm over the whole batch: the statistics SyncBatchNorm gathers.
    """
    dev = torch.device(device)
    single = _equivalence_model(VARIANTS[name][0]).to(dev)
    _sgd_step(single, *(t.to(dev) for t in _equivalence_batch(batch)), lr)
    return [p.detach().cpu().clone() for p in single.parameters()]


VARIANTS = {"plain": (False, False), "batchnorm": (True, False), "syncbatchnorm": (True, True)}


def equivalence_worker(rank: int, world_size: int, batch: int, lr: float, variants: list[str]) -> list:
    """One SGD step with DDP per model variant, each rank on its ``batch / world_size`` slice; the parameters (03)."""
    device = local_device()
    x, y = (t.to(device) for t in _equivalence_batch(batch))
    local = batch // world_size
    out = []
    for name in variants:
        batchnorm, sync = VARIANTS[name]
        try:
            model = ddp_wrap(_equivalence_model(batchnorm, sync).to(device), device)
        except ValueError as e:  # DDP refuses SyncBatchNorm on CPU modules: its own words come back
            out.append(str(e))
            continue
        _sgd_step(model, x[rank * local:(rank + 1) * local], y[rank * local:(rank + 1) * local], lr)
        out.append([p.detach().cpu().clone() for p in model.module.parameters()])
    return out


def run_ddp_equivalence_checks(nprocs: int = 2, batch: int = 64, lr: float = 0.5,
                               variants: tuple[str, ...] = ("plain", "batchnorm"), timeout: float = 90) -> dict:
    """``{variant: result}`` of :func:`run_ddp_equivalence_check` for several models, in one launch (03).

    Variants: ``"plain"`` (no BatchNorm), ``"batchnorm"``, ``"syncbatchnorm"``. DDP accepts SyncBatchNorm on
    GPUs only: on the CPU that variant's result is ``{"refused": DDP's error message}``.
    """
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise ValueError(f"unknown variant(s) {unknown}; choose from {sorted(VARIANTS)}")
    if batch % nprocs:
        raise ValueError(f"batch ({batch}) must divide evenly over {nprocs} processes for this comparison")
    ranks = launch(equivalence_worker, nprocs, args=(batch, lr, list(variants)), timeout=timeout, verbose=False)
    dev = "cuda" if choose_backend(nprocs) == "nccl" else "cpu"  # the launch's choice: where the ranks computed
    out = {}
    for i, name in enumerate(variants):
        if isinstance(ranks[0][i], str):
            out[name] = {"refused": ranks[0][i], "processes": nprocs, "batch": batch}
            continue
        single = reference_parameters(name, batch, lr, device=dev)
        out[name] = {"max_abs_diff": max_abs_diff(ranks[0][i], single),
                     "ranks_agree": max_abs_diff(ranks[0][i], ranks[-1][i]) == 0.0, "processes": nprocs, "batch": batch}
    return out


def run_ddp_equivalence_check(nprocs: int = 2, batch: int = 64, lr: float = 0.5, batchnorm: bool = False,
                              sync_batchnorm: bool = False, timeout: float = 90) -> dict:
    """Max |difference| between DDP's parameters after one step and one process on the whole batch (03).

    Equal (to float rounding) without BatchNorm: DDP averages the ranks' gradients, and the mean
    of equal-sized slices' mean losses is the whole batch's mean loss.
    """
    name = "syncbatchnorm" if sync_batchnorm else ("batchnorm" if batchnorm else "plain")
    return run_ddp_equivalence_checks(nprocs, batch, lr, (name,), timeout)[name]


def no_sync_worker(rank: int, world_size: int, accum: int, local_batch: int,
                   channels: tuple[int, int] = (16, 32), hidden: int = 64) -> dict:
    """One SGD step over ``accum`` micro-batches, plainly and with :func:`accumulate_with_no_sync` (03).

    Returns how many buckets DDP all-reduced in each case (a communication hook counts them), the
    buckets of one backward on a third model of its own (counted apart, not derived from the other
    two), and the largest difference between the parameters the two reach. Every model first runs
    one backward that is not counted: DDP's first backward puts every gradient in one bucket
    (``find_unused_parameters=False``); the forward after it rebuilds the buckets by size
    (``compute_bucket_size_limits`` and ``_rebuild_buckets`` in torch/nn/parallel/distributed.py),
    so the counts are those of every later step. ``channels``/``hidden`` size the DigitsCNN.
    """
    device = local_device()
    x, y = (t.to(device) for t in rank_share(local_batch * accum * world_size, world_size, rank))
    micro = [(x[i * local_batch:(i + 1) * local_batch], y[i * local_batch:(i + 1) * local_batch]) for i in range(accum)]

    def warmed(counter: BucketCounter) -> nn.Module:
        """A fresh DDP DigitsCNN (seed 0) after one uncounted backward, its gradients cleared."""
        torch.manual_seed(0)
        model = ddp_wrap(DigitsCNN(channels=channels, hidden=hidden).to(device), device)
        model.register_comm_hook(counter, BucketCounter.hook)
        nn.functional.cross_entropy(model(micro[0][0]), micro[0][1]).backward()  # the first bucketing
        model.zero_grad(set_to_none=True)
        counter.calls = counter.bytes = 0
        return model

    one = BucketCounter()
    single = warmed(one)  # one plain backward, only to count its buckets
    nn.functional.cross_entropy(single(micro[0][0]), micro[0][1]).backward()
    params, calls = {}, {}
    for use_no_sync in (False, True):
        counter = BucketCounter()
        model = warmed(counter)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        if use_no_sync:
            accumulate_with_no_sync(model, opt, micro)
        else:  # the same accumulation without no_sync: every backward all-reduces
            opt.zero_grad()
            for xb, yb in micro:
                (nn.functional.cross_entropy(model(xb), yb) / accum).backward()
            opt.step()
        params[use_no_sync] = [p.detach().clone() for p in model.parameters()]
        calls[use_no_sync] = counter.calls
    return {"allreduce_calls_plain": calls[False], "allreduce_calls_no_sync": calls[True],
            "buckets_per_backward": one.calls, "max_abs_diff": max_abs_diff(params[False], params[True])}


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


def throughput_table(rows: list[dict]) -> str:
    """The 1-vs-N-process measurements as aligned text (03)."""
    head = f"{'processes':>9} {'global batch':>12} {'step ms':>8} {'samples/s':>10} {'speedup':>8} {'all-reduce KB/step':>19}"
    lines = [head]
    for r in rows:
        lines.append(f"{r['processes']:>9} {r['global_batch']:>12} {1e3 * r['step_s']:>8.1f} {r['samples_per_s']:>10.0f} "
                     f"{r['speedup']:>7.2f}× {r['allreduce_bytes_per_step'] / 1e3:>19.0f}")
    return "\n".join(lines)


def how_the_launch_ended(err, seconds: float) -> str:
    """What each other rank did after the cause of a failed launch, and what the time printed holds (03).

    Generated from the :class:`~helpers.launching.failures.LaunchError`: ``exits`` (``None``: still running when the
    launcher stopped listening, so it ended that rank) and ``errors`` (a traceback naming a lost connection,
    ``PEER_LOST``, is a consequence of another rank's leaving).
    """
    from ..launching.failures import PEER_LOST
    from ..launching.launcher import SETTLE
    lines, still = [], []
    for r in sorted(x for x in err.exits if x != err.rank):
        code, tb = err.exits[r], err.errors.get(r, "")
        if code is None:
            still.append(r)
            lines.append(tr("ddp.ended_still", "rank {rank}: still running when the launcher stopped listening, so the "
                            "launcher ended it", rank=r))
        elif any(s in tb for s in PEER_LOST):
            lines.append(tr("ddp.ended_peer_lost", "rank {rank}: did not wait to be ended: its collective failed with "
                            "a lost-connection error (PEER_LOST: a consequence of rank {cause} leaving, not a "
                            "cause), and it exited", rank=r, cause=err.rank))
        elif tb:
            lines.append(tr("ddp.ended_raised", "rank {rank}: raised too: {error}", rank=r,
                            error=tb.strip().splitlines()[-1]))
        else:
            lines.append(tr("ddp.ended_code", "rank {rank}: exited with code {code}", rank=r, code=code))
    if still:
        lines.append(tr("ddp.seconds_still", "So the {seconds} s are: starting the ranks, all of SETTLE ({settle} s) "
                        "of listening while rank(s) {ranks} ran, up to 0.2 s more, and ending them (SIGTERM, then "
                        "up to 3 s before SIGKILL).", seconds=f"{seconds:.1f}", settle=f"{SETTLE:g}",
                        ranks=", ".join(map(str, still))))
    else:
        lines.append(tr("ddp.seconds_failed", "So the {seconds} s are: starting the ranks, their failing, and "
                        "listening until every rank had exited (at most SETTLE, {settle} s, then up to 0.2 s more); "
                        "no rank was left to end.", seconds=f"{seconds:.1f}", settle=f"{SETTLE:g}"))
    return "\n".join(lines)
