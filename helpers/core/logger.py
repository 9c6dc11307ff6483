"""The course's one logger: TensorBoard and Weights & Biases from one ``log(metrics, step)`` call (05; 03 uses it).

:class:`Monitor` is what ``helpers.train(..., logger=monitor)`` reports to, and what a DDP worker
logs through on rank 0 only. W&B runs offline unless this machine is logged in
(:func:`wandb_mode`), and offline means no network call at all.
"""
from __future__ import annotations

import os
import socket
import struct
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Iterator

from torch import nn

from .files import OwnedFolder
from .i18n import tr

# what a Monitor writes into its folder, and so all it may ever remove there (see OwnedFolder)
_WRITES = ("tensorboard/events.out.tfevents.*", "wandb/offline-run-*", "wandb/run-*", "wandb/latest-run",
           "wandb/debug.log", "wandb/debug-internal.log")
_CONNECT_TIMEOUT_S = 2.5  # how long a reachable W&B server may take to accept a connection
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


def _unreachable(url: str, timeout: float = _CONNECT_TIMEOUT_S) -> str | None:
    """None if a TCP connection to ``url``'s server (or its proxy) opens within ``timeout``, else why not.

    A plain connect: nothing is sent. Name lookup has no timeout of its own: the thread is given up on.
    """
    parts = urllib.parse.urlsplit(url)
    host, port = parts.hostname or "api.wandb.ai", parts.port or (80 if parts.scheme == "http" else 443)
    proxy = urllib.request.getproxies().get(parts.scheme or "https")
    local = host in ("localhost", "127.0.0.1", "::1")  # wandb-core (Go) never proxies these
    if proxy and not local and not urllib.request.proxy_bypass(host):  # wandb goes through it: is it reachable?
        p = urllib.parse.urlsplit(proxy if "://" in proxy else "http://" + proxy)
        host, port = p.hostname or host, p.port or 8080
    outcome: list[str | None] = []

    def connect() -> None:
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            outcome.append(None)
        except OSError as e:
            outcome.append(f"{host}:{port}: {str(e) or type(e).__name__}")

    t = threading.Thread(target=connect, daemon=True, name="wandb-reachable")
    t.start()
    t.join(timeout + 0.5)
    return outcome[0] if outcome else f"{host}:{port}: no answer within {timeout:g} s"


def _offline_if_unreachable(mode: str) -> tuple[str, str | None]:
    """``(mode, None)``, or ``("offline", why)`` when ``"online"`` cannot reach the W&B server (05).

    Logged in but without a network (a train, a cluster's compute node), wandb would wait 90 s and
    then fail with advice about ``init_timeout``; the right answer is an offline run.
    """
    if mode != "online":
        return mode, None
    try:  # the server wandb is configured for (``wandb login --host``, ``WANDB_BASE_URL``, else api.wandb.ai)
        from wandb.sdk import wandb_setup

        url = str(wandb_setup.singleton().settings.base_url)
    except Exception:  # another wandb version
        url = os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")
    why = _unreachable(url)
    if why is None:
        return mode, None
    if not os.environ.get("WANDB_MODE"):  # wandb's settings were made for online: make them afresh, offline
        import wandb

        _offline_until_known()
        wandb.teardown()
    return "offline", why


def _wandb_chunks(data: bytes) -> Iterator[bytes]:
    """Records of a ``.wandb`` file: a LevelDB-style log (32 KiB blocks, 7-byte record headers)."""
    if data[:4] != b":W&B":
        raise ValueError("not a W&B run file (missing the ':W&B' header)")
    pos, block, buf = 7, 32768, b""
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        pos += 7
        if kind == 0:  # zero padding to the end of the block
            pos += left - 7
            continue
        if pos + length > len(data):  # a record not yet written to the end
            return
        chunk = data[pos:pos + length]
        pos += length
        if kind == 1:
            yield chunk
        elif kind == 2:
            buf = chunk
        elif kind == 3:
            buf += chunk
        elif kind == 4:
            yield buf + chunk


def wandb_file_complete(run_dir: str | Path, timeout: float = 60.0) -> bool:
    """Wait until W&B has written the run's ``.wandb`` file to its end (its last record, ``exit``); say if it has (05).

    wandb-core holds the file's last 32 KiB block in memory and writes it when it closes the run,
    which it does *after* ``run.finish()`` has returned: a reader that comes first finds only the
    header. The file grows only when a block is written and at that close, so this re-reads it
    only when its size changes. False after ``timeout`` seconds (a crashed or still-running run).
    """
    from wandb.proto import wandb_internal_pb2

    deadline, size = time.monotonic() + timeout, -1
    while True:
        files = sorted(Path(run_dir).glob("run-*.wandb"))
        now = files[0].stat().st_size if files else -1
        if now != size:
            size = now
            for chunk in _wandb_chunks(files[0].read_bytes()) if now > 0 else ():  # empty until a block is written
                rec = wandb_internal_pb2.Record()
                rec.ParseFromString(chunk)
                if rec.WhichOneof("record_type") == "exit":
                    return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


class Monitor:
    """Feeds TensorBoard and W&B from one ``log(metrics, step)`` call; a no-op on ranks other than 0 (05).

    ``Monitor(run_dir, config=..., wandb=True)``; use as a context manager or call ``close()``.
    W&B runs offline unless this machine is logged in (see :func:`wandb_mode`), and offline too when
    logged in but the server cannot be reached. ``run_dir`` must be new or empty, or a folder an
    earlier Monitor wrote: a rerun then replaces only the files that Monitor wrote (its event file
    and W&B run folder), never anything else, and a folder another live Monitor is writing is
    refused with that one's process id (see :class:`helpers.core.files.OwnedFolder`).
    """

    def __init__(self, run_dir: str | Path, config: dict | None = None, tensorboard: bool = True,
                 wandb: bool = True, project: str = "beyond-one-gpu", rank: int = 0) -> None:
        self.folder = OwnedFolder(run_dir, "Monitor", writes=_WRITES)
        self.run_dir = self.folder.path
        self.active = rank == 0
        self.tb = None
        self.wandb_run = None
        self._wandb_path: Path | None = None
        if not self.active:
            return
        self.folder.claim()  # refused if a live Monitor writes there; a rerun must not append to the last run's files
        try:
            if tensorboard:
                from torch.utils.tensorboard import SummaryWriter

                self.tb = SummaryWriter(str(self.run_dir / "tensorboard"))
            if wandb:
                self._start_wandb(project, config)
        except BaseException:  # nothing half-started stays behind, and the folder is free again
            self.close(seal=False)
            raise

    def _start_wandb(self, project: str, config: dict | None) -> None:
        import wandb as wb

        mode, unreachable = _offline_if_unreachable(wandb_mode())
        # an absolute dir: a wandb-core service started elsewhere resolves relative paths from its own cwd
        self.wandb_run = wb.init(project=project, config=config or {}, dir=str(self.run_dir), mode=mode,
                                 reinit="finish_previous",
                                 settings=wb.Settings(console="off", silent=True, x_disable_stats=True))
        if mode in ("online", "offline"):
            self._wandb_path = Path(self.wandb_run.dir).parent
        if unreachable:
            print(tr("monitor.wandb_unreachable",
                     "W&B: logged in, but its server cannot be reached ({why}), so this run is logged offline, to "
                     "{dir}. Upload it later with: wandb sync {dir}   (to skip this check, set WANDB_MODE=offline "
                     "before starting)", why=unreachable, dir=self.wandb_dir))

    def log(self, metrics: dict[str, float], step: int) -> None:
        """Log scalar metrics: to TensorBoard at ``step``; to W&B with ``step`` as an ``epoch`` field (W&B's own step
        counts its ``log`` calls) (05)."""
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

    def close(self, seal: bool = True) -> None:
        """Flush and close every backend, the W&B file written to its end; record the files written (05)."""
        if self.tb is not None:
            self.tb.close()
            self.tb = None
        if self.wandb_run is not None:
            run, self.wandb_run = self.wandb_run, None
            run.finish()
            if self._wandb_path is not None and not wandb_file_complete(self._wandb_path):
                print(tr("monitor.wandb_unfinished", "W&B has not finished writing {dir} yet; read it back later",
                         dir=self._wandb_path))
        if self.active:
            self.folder.seal() if seal else self.folder.release()

    def __enter__(self) -> "Monitor":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
