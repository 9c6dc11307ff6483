"""The course's one logger: TensorBoard and Weights & Biases from one ``log(metrics, step)`` call (05; 03 uses it).

:class:`Monitor` is what ``helpers.train(..., logger=monitor)`` reports to, and what a DDP worker
logs through on rank 0 only. W&B runs offline unless this machine is logged in
(:func:`wandb_mode`), and offline means no network call at all.
"""
from __future__ import annotations

import os
from pathlib import Path

from torch import nn

from .files import OwnedFolder


_OFFLINE_SET_HERE = False  # whether WANDB_MODE=offline was exported by this module (not by the reader)

def wandb_logged_in() -> bool:
    """Whether wandb itself finds credentials for the server it is configured for (05).

    Asks wandb's own lookup (``WANDB_API_KEY``, then ``.netrc`` for the configured host, then
    wandb's settings): ``wandb login`` writes the key for its configured host, which is not always
    ``api.wandb.ai``. Reads files only; makes no network call. (wandb's credential lookup is
    internal API: this is the one place the course calls it, pinned by .ci/constraints.txt.)
    """
    if os.environ.get("WANDB_API_KEY"):
        return True
    _offline_until_known()  # wandb's settings are created now, from the environment: offline unless logged in
    try:
        from wandb.sdk import wandb_setup
        from wandb.sdk.lib.wbauth import wbnetrc

        settings = wandb_setup.singleton().settings
        return bool(wbnetrc.read_netrc_auth(host=settings.base_url) or settings.api_key)
    except ImportError:  # another wandb version: its public fallback
        import wandb

        return bool(wandb.api.api_key)
    except Exception:  # an unreadable or malformed .netrc: not logged in
        return False


def wandb_mode() -> str:
    """``"online"`` when this machine is logged in to W&B (``wandb login``), else ``"offline"`` (05).

    ``WANDB_MODE`` wins when the reader set it. Offline never needs an account or a network: the
    run is written to disk (``wandb sync`` uploads it later), and wandb itself makes no network
    call either (see :func:`_apply_wandb_mode`).
    """
    if os.environ.get("WANDB_MODE") and not _ours():
        return os.environ["WANDB_MODE"]
    mode = "online" if wandb_logged_in() else "offline"
    _apply_wandb_mode(mode)
    return mode


def _ours() -> bool:
    """Whether the WANDB_MODE in the environment is the one this module exported (not the reader's)."""
    return _OFFLINE_SET_HERE and os.environ.get("WANDB_MODE") == "offline"


def _offline_until_known() -> None:
    """Export ``WANDB_MODE=offline`` unless the reader chose a mode (see :func:`_apply_wandb_mode`)."""
    global _OFFLINE_SET_HERE
    if not os.environ.get("WANDB_MODE"):
        os.environ["WANDB_MODE"] = "offline"
        _OFFLINE_SET_HERE = True


def _apply_wandb_mode(mode: str) -> None:
    """Make wandb's own processes follow ``mode`` (05).

    wandb decides from its environment, when its settings are first created, whether to send
    telemetry: with only ``wandb.init(mode="offline")`` it still resolves and POSTs to its
    telemetry host when a run ends (measured with wandb 0.31); with ``WANDB_MODE=offline`` in the
    environment first, it makes no network call. So the course exports ``WANDB_MODE=offline``
    before asking wandb anything (unless the reader chose a mode), and removes it again, with a
    fresh start of wandb's settings, only when this machine turns out to be logged in.
    """
    global _OFFLINE_SET_HERE
    if mode != "offline" and _ours():
        import wandb

        os.environ.pop("WANDB_MODE", None)
        _OFFLINE_SET_HERE = False
        wandb.teardown()  # settings (and any service) made while offline keep that environment: start afresh
    elif mode == "offline":
        _offline_until_known()


class Monitor:
    """Feeds TensorBoard and W&B from one ``log(metrics, step)`` call; a no-op on ranks other than 0 (05).

    ``Monitor(run_dir, config=..., wandb=True)``; use as a context manager or call ``close()``.
    W&B runs offline unless this machine is logged in (see :func:`wandb_mode`). ``run_dir`` must be
    new or empty, or a folder an earlier Monitor wrote: a rerun then replaces only the files that
    Monitor wrote, never anything else (see :class:`helpers.files.OwnedFolder`).
    """

    def __init__(self, run_dir: str | Path, config: dict | None = None, tensorboard: bool = True,
                 wandb: bool = True, project: str = "beyond-one-gpu", rank: int = 0) -> None:
        self.folder = OwnedFolder(run_dir, "Monitor")
        self.run_dir = self.folder.path
        self.active = rank == 0
        self.tb = None
        self.wandb_run = None
        self._wandb_path: Path | None = None
        if not self.active:
            return
        self.folder.claim()  # a rerun must not append to the last run's files
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self.tb = SummaryWriter(str(self.run_dir / "tensorboard"))
        if wandb:
            import wandb as wb

            mode = wandb_mode()
            # an absolute dir: a wandb-core service started elsewhere resolves relative paths from its own cwd
            self.wandb_run = wb.init(project=project, config=config or {}, dir=str(self.run_dir), mode=mode,
                                     reinit="finish_previous",
                                     settings=wb.Settings(console="off", silent=True, x_disable_stats=True))
            self._wandb_path = Path(self.wandb_run.dir).parent

    def log(self, metrics: dict[str, float], step: int) -> None:
        """Log scalar metrics at ``step`` to every backend (05)."""
        if not self.active:
            return
        if self.tb is not None:
            for k, v in metrics.items():
                self.tb.add_scalar(k, v, step)
        if self.wandb_run is not None:
            self.wandb_run.log({**metrics, "epoch": step})

    def watch(self, model: nn.Module, log_freq: int = 10) -> None:
        """Log gradient histograms to W&B every ``log_freq`` batches (``wandb.watch``) (05)."""
        if self.active and self.wandb_run is not None:
            self.wandb_run.watch(model, log="gradients", log_freq=log_freq)

    @property
    def wandb_dir(self) -> Path | None:
        """The run's folder on disk (``.../wandb/offline-run-...``), for ``wandb sync``; also after ``close()`` (05)."""
        if self._wandb_path is None:
            return None
        return Path(os.path.relpath(self._wandb_path))  # relative: readable, and works for sync

    def close(self) -> None:
        """Flush and close every backend; record the files written, for the next run's cleanup (05)."""
        if self.tb is not None:
            self.tb.close()
            self.tb = None
        if self.wandb_run is not None:
            self.wandb_run.finish()
            self.wandb_run = None
        if self.active and self.folder.manifest.exists():
            self.folder.seal()

    def __enter__(self) -> "Monitor":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
