"""Notebook 10's benchmark (``python -m helpers.bench resilience``): what a failure costs, and what saving costs (10).

- torchrun: a worker killed mid-epoch, restarted with ``--max-restarts=1``, ``runs`` times with the rendezvous
  store shared with the workers (torch's default) and ``runs`` times with a store for each round
  (``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``): restarts that failed, and the recovery time of those that did not.
- Ray Train: the same with ``FailureConfig(max_failures=1)``: recovery time; and what a failure cost with the
  checkpoint (the restart and the work since the last checkpoint) against without one (the restart and every epoch
  trained before the kill), for both.
- Ray Tune over Ray Train: two trials (learning rates), each a ``TorchTrainer`` of one worker: the sweep's time.
- DCP: ``dcp.save`` and ``dcp.load`` of an FSDP2 model's state on 2 ranks, against ``torch.save`` and
  ``torch.load`` of the same bytes on this disk, as throughputs and their ratio; the share of ``dcp.async_save``'s
  time spent after it returned (writing in the background), with nothing else running.
"""
from __future__ import annotations

import signal
import statistics
import tempfile
import time
from pathlib import Path

import torch

from ..core.device import hardware_label
from ..launching import launch
from ..launching.ray_cluster import init_ray, shutdown_ray
from ..launching.torchrun import run_torchrun
from .instruments import announcements, kill_when, ray_registered_epochs, recovery
from .ray_runs import run_ray_train, tune_ray_train
from .workers import save_blocking_worker

__all__ = ["bench_resilience"]


def _torchrun_restart(share: bool, epochs: int = 3) -> dict | None:
    """One torchrun run with rank 1 killed in epoch 1: :func:`recovery`'s figures, or None if the restart failed."""
    with tempfile.TemporaryDirectory() as d:
        kill = kill_when(d, rank=1, epoch=1, sig=signal.SIGKILL, delay=0.01)
        try:
            run_torchrun(2, module="helpers.resilience.script", agent_args=("--max-restarts=1",), timeout=180,
                         script_args=("--epochs", str(epochs), "--checkpoint", f"{d}/state.pt", "--announce-dir", d),
                         env={"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "0" if share else "1"})
        except RuntimeError:
            return None
        kill["thread"].join(5)
        return recovery(announcements(d), kill["at"], rank=1)


def _ray_restart(epochs: int = 3) -> dict:
    """One Ray Train run with rank 1 killed once epoch 0's checkpoint is registered: :func:`recovery`'s figures."""
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d, "starts")
        folder.mkdir()
        kill = kill_when(str(folder), rank=1, epoch=1, sig=signal.SIGKILL, delay=0.0,
                         ready=lambda: 0 in ray_registered_epochs(f"{d}/ray/killed"))
        run_ray_train(epochs, storage=f"{d}/ray", name="killed", max_failures=1, announce_dir=str(folder))
        kill["thread"].join(5)
        return recovery(announcements(str(folder)), kill["at"], rank=1)


def _lost(runs: list[dict]) -> dict:
    """Median seconds a failure cost: restart and redone work (checkpoint) vs restart and all work before it (none)."""
    return {"recovery_s": round(statistics.median(r["recovery_s"] for r in runs), 2),
            "lost_with_checkpoint_s": round(statistics.median(r["recovery_s"] + r["redone_s"] for r in runs), 2),
            "lost_without_s": round(statistics.median(r["recovery_s"] + r["kill_s"] for r in runs), 2)}


def _disk(nbytes: int) -> dict:
    """``torch.save`` and ``torch.load`` of ``nbytes`` of float32 on this disk: seconds each (best of 3)."""
    t = torch.randn(nbytes // 4)
    save, load = [], []
    with tempfile.TemporaryDirectory() as d:
        for _ in range(3):
            t0 = time.perf_counter()
            torch.save(t, f"{d}/x.pt")
            save.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            torch.load(f"{d}/x.pt", weights_only=True)
            load.append(time.perf_counter() - t0)
    return {"save_s": min(save), "load_s": min(load)}


def bench_resilience(runs: int = 3) -> dict:
    """Restarts (torchrun shared store vs not, Ray Train), DCP against the disk, async_save's hidden share (10)."""
    shared = [_torchrun_restart(share=True) for _ in range(runs)]
    own = [_torchrun_restart(share=False) for _ in range(runs)]
    cluster = init_ray(nodes=2)
    try:
        ray = [_ray_restart() for _ in range(runs)]
        with tempfile.TemporaryDirectory() as d:
            t0 = time.perf_counter()
            grid = tune_ray_train([1e-3, 3e-3], epochs=2, storage=d, workers=1, cpus=cluster["cpus"])
            tune_s = time.perf_counter() - t0
    finally:
        shutdown_ray()
    with tempfile.TemporaryDirectory() as d:
        blocking = launch(save_blocking_worker, 2, args=(d,), timeout=180, verbose=False)[0]
    disk = _disk(blocking["bytes"])
    gb = blocking["bytes"] / 1e9
    ok = [s for s in own if s is not None]
    return {"device": hardware_label("cpu", processes=2, threads=1), "runs": runs,
            "torchrun_shared_store_failed": sum(s is None for s in shared),
            "torchrun_own_store_failed": sum(s is None for s in own),
            "torchrun": _lost(ok) if ok else None, "ray": _lost(ray),
            "tune_trials": len(grid), "tune_errors": len(grid.errors), "tune_s": round(tune_s, 1),
            "tune_at_once": cluster["cpus"] // 2,
            "dcp_bytes": blocking["bytes"], "dcp_save_gbs": round(gb / blocking["save_s"], 3),
            "torch_save_gbs": round(gb / disk["save_s"], 3),
            "dcp_save_vs_disk": round(disk["save_s"] / blocking["save_s"], 3),
            "dcp_load_gbs": round(gb / blocking["load_s"], 3), "torch_load_gbs": round(gb / disk["load_s"], 3),
            "dcp_load_vs_disk": round(disk["load_s"] / blocking["load_s"], 3),
            "async_hidden": round(1 - blocking["async_returned_s"] / blocking["async_done_s"], 3)}


def readme_figures(results: dict) -> str:
    """Notebook 10's figures for the README's results table, from ``bench_resilience``'s JSON (10)."""
    r = results["resilience"]
    t, ray = r["torchrun"], r["ray"]
    return (f"torchrun restart after a killed worker: {t['recovery_s']} s (median of {r['runs']}); a failure cost "
            f"{t['lost_with_checkpoint_s']} s with the checkpoint, {t['lost_without_s']} s without; restarts that "
            f"failed with the agent's store shared: {r['torchrun_shared_store_failed']} of {r['runs']}, with a store per "
            f"round: {r['torchrun_own_store_failed']} of {r['runs']}; Ray Train restart {ray['recovery_s']} s, a failure cost "
            f"{ray['lost_with_checkpoint_s']} s with the checkpoint, {ray['lost_without_s']} s without; Tune over Ray "
            f"Train, {r['tune_trials']} trials of 1 worker ({r['tune_at_once']} at a time): {r['tune_s']} s; "
            f"dcp.save {r['dcp_save_gbs']} GB/s = ×{r['dcp_save_vs_disk']} torch.save's on this disk, dcp.load "
            f"×{r['dcp_load_vs_disk']} torch.load's; "
            f"async_save returned after {1 - r['async_hidden']:.0%} of its time, the other {r['async_hidden']:.0%} "
            "written in the background")
