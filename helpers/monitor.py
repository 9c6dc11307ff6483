"""Monitoring: tqdm, TensorBoard (written and read back), Weights & Biases offline, the profiler (05).

:class:`Monitor` is the course's one logger: pass it to ``helpers.train(..., logger=monitor)``
and every epoch's metrics go to TensorBoard and W&B at once (and only from rank 0 in a
multi-process run). Everything written is read back with the tools' own readers: TensorBoard's
``EventAccumulator`` and projector config, and W&B's own record format (protobuf records in the
run's ``.wandb`` file).
"""
from __future__ import annotations

import json
import os
import socket
import struct
import sys
import time
import urllib.request
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader
from tqdm.auto import tqdm

from .device import model_device
from .files import OwnedFolder, user_path
from .train import evaluate, train_one_epoch
from .checks import Exercise


# --- tqdm ------------------------------------------------------------------------------------------

def train_with_bars(model: nn.Module, train_loader: DataLoader, val_loader: DataLoader, epochs: int = 3,
                    lr: float = 3e-3, rank: int = 0) -> list[dict]:
    """Nested tqdm bars: one over epochs, one over batches, live description and postfix (05).

    Only rank 0 draws (``disable=rank != 0``), so N processes do not print N bars. Batches go to
    the device the model is on.
    """
    device = model_device(model)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    history = []
    epochs_bar = tqdm(range(epochs), desc="epochs", disable=rank != 0, unit="epoch")
    for epoch in epochs_bar:
        batches = tqdm(train_loader, desc=f"epoch {epoch + 1}", leave=False, disable=rank != 0, unit="batch")
        for x, y in batches:
            x, y = x.to(device), y.to(device)
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            batches.set_postfix(loss=f"{loss.item():.3f}")
        val = evaluate(model, val_loader)
        history.append({"epoch": epoch + 1, "val_loss": val["loss"], "val_acc": val["acc"]})
        epochs_bar.set_postfix(val_acc=f"{val['acc']:.3f}")
    return history


# --- W&B mode ----------------------------------------------------------------------------------------

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


# --- the one logger ---------------------------------------------------------------------------------

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
        """Log scalar metrics at ``step`` to every backend."""
        if not self.active:
            return
        if self.tb is not None:
            for k, v in metrics.items():
                self.tb.add_scalar(k, v, step)
        if self.wandb_run is not None:
            self.wandb_run.log({**metrics, "epoch": step})

    def watch(self, model: nn.Module) -> None:
        """Log gradient histograms to W&B every step (``wandb.watch``)."""
        if self.active and self.wandb_run is not None:
            self.wandb_run.watch(model, log="gradients", log_freq=10)

    @property
    def wandb_dir(self) -> Path | None:
        """The run's folder on disk (``.../wandb/offline-run-...``), for ``wandb sync``; also after ``close()``."""
        if self._wandb_path is None:
            return None
        return Path(os.path.relpath(self._wandb_path))  # relative: readable, and works for sync

    def close(self) -> None:
        """Flush and close every backend; record the files written, for the next run's cleanup."""
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


# --- TensorBoard: write every summary type -----------------------------------------------------------

def write_all_summaries(log_dir: str | Path, model: nn.Module, loaders: dict[str, DataLoader], epochs: int = 3,
                        lr: float = 3e-3) -> dict:
    """One short training run that writes every TensorBoard summary type; returns what it wrote (05).

    Scalars (``add_scalar`` and ``add_scalars``), weight and gradient histograms, an image grid of
    predictions, a matplotlib figure, the graph, an embedding with sprites, hparams, a PR curve
    and a mesh. ``log_dir`` must be new or empty, or written by an earlier call: a rerun replaces
    only the files this function wrote (:class:`helpers.files.OwnedFolder`).
    """
    import matplotlib.pyplot as plt
    import torchvision
    from torch.utils.tensorboard import SummaryWriter

    folder = OwnedFolder(log_dir, "write_all_summaries")
    log_dir = folder.claim()
    w = SummaryWriter(str(log_dir))
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    device = model_device(model)
    x_val, y_val = next(iter(DataLoader(loaders["val"].dataset, batch_size=len(loaders["val"].dataset))))
    x_val, y_val = x_val.to(device), y_val.to(device)
    hist_tags = [f"weights/{n}" for n, _ in model.named_parameters()] + [f"grads/{n}" for n, _ in model.named_parameters()]
    for epoch in range(1, epochs + 1):
        tr = train_one_epoch(model, loaders["train"], opt)
        val = evaluate(model, loaders["val"])
        w.add_scalar("loss/train", tr["loss"], epoch)
        w.add_scalar("loss/val", val["loss"], epoch)
        w.add_scalar("acc/val", val["acc"], epoch)
        w.add_scalars("loss", {"train": tr["loss"], "val": val["loss"]}, epoch)  # writes one sub-run per key
        for n, p in model.named_parameters():
            w.add_histogram(f"weights/{n}", p, epoch)
            w.add_histogram(f"grads/{n}", p.grad, epoch)
    model.eval()
    with torch.no_grad():
        logits = model(x_val)
        features = model.features(x_val)
    pred, logits, features, x_val, y_val = (t.cpu() for t in (logits.argmax(1), logits, features, x_val, y_val))
    w.add_image("predictions", torchvision.utils.make_grid(x_val[:32], nrow=8, normalize=True, pad_value=1), epochs)
    w.add_text("predictions/labels", " ".join(f"{int(a)}→{int(b)}" for a, b in zip(y_val[:32], pred[:32])), epochs)
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.bar(range(10), torch.bincount(pred, minlength=10).tolist())
    ax.set(title="predicted classes", xlabel="digit")
    w.add_figure("figures/predicted_classes", fig, epochs)  # closes the figure
    with warnings.catch_warnings():  # add_graph traces with torch.jit, which warns that it is deprecated
        warnings.simplefilter("ignore", FutureWarning)
        w.add_graph(model, x_val[:4].to(device))
    w.add_embedding(features[:100], metadata=y_val[:100].tolist(), label_img=x_val[:100], global_step=epochs,
                    tag="features")
    probs = logits.softmax(1)
    w.add_pr_curve("pr/digit_3", (y_val == 3).int(), probs[:, 3], epochs)
    verts = torch.tensor([[[0.0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]]])
    faces = torch.tensor([[[0, 1, 2], [0, 1, 3], [0, 2, 3], [1, 2, 3]]])
    w.add_mesh("mesh/tetrahedron", vertices=verts, faces=faces, global_step=epochs)
    hparams = {"lr": lr, "epochs": epochs, "model": type(model).__name__}
    w.add_hparams(hparams, {"hparam/val_acc": val["acc"]}, run_name="hparams")  # writes a sub-run
    w.close()
    folder.seal()
    return {"epochs": epochs, "last": {"loss/val": val["loss"], "acc/val": val["acc"]}, "hist_tags": hist_tags,
            "hparams": hparams, "embedding_points": 100}


# --- TensorBoard: read it all back -----------------------------------------------------------------------

def read_back(log_dir: str | Path) -> dict:
    """Everything under ``log_dir`` as TensorBoard itself reads it: per run, tags and values (05).

    Uses ``EventAccumulator`` (TensorBoard's event reader) on every run folder — ``add_scalars``
    and ``add_hparams`` create sub-runs — and the projector plugin's config for the embedding.
    """
    from google.protobuf import text_format
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.projector.projector_config_pb2 import ProjectorConfig

    log_dir = Path(log_dir)
    runs = {}
    for folder in sorted({p.parent for p in log_dir.rglob("events.out.tfevents.*")}):
        ea = EventAccumulator(str(folder), size_guidance={"scalars": 0, "histograms": 0, "images": 0, "tensors": 0})
        ea.Reload()
        tags = ea.Tags()
        run = {"scalars": {t: [(e.step, e.value) for e in ea.Scalars(t)] for t in tags["scalars"]},
               "histograms": {t: len(ea.Histograms(t)) for t in tags["histograms"]},
               "images": {t: len(ea.Images(t)) for t in tags["images"]},
               "tensors": {t: len(ea.Tensors(t)) for t in tags["tensors"]},
               "graph": tags["graph"]}
        run.update(_plugins_and_hparams(folder))
        runs[str(folder.relative_to(log_dir)) or "."] = run
    config_path = log_dir / "projector_config.pbtxt"
    embeddings = []
    if config_path.exists():
        cfg = text_format.Parse(config_path.read_text(), ProjectorConfig())
        for e in cfg.embeddings:
            rows = (log_dir / e.tensor_path).read_text().strip().splitlines()
            embeddings.append({"tag": e.tensor_name, "points": len(rows), "dims": len(rows[0].split("\t")),
                               "sprite": bool(e.sprite.image_path), "metadata": bool(e.metadata_path)})
    return {"runs": runs, "embeddings": embeddings}


def _plugins_and_hparams(folder: Path) -> dict:
    """Active plugins of a run, and its hparams/metrics decoded from the hparams plugin's own protos."""
    from tensorboard.backend.event_processing.plugin_event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    ea = EventAccumulator(str(folder), size_guidance={"tensors": 0})
    ea.Reload()
    out: dict = {"plugins": sorted(ea.ActivePlugins()), "hparams": {}, "hparam_metrics": []}
    if "hparams" in out["plugins"]:
        for content in ea.PluginTagToContent("hparams").values():
            pd = plugin_data_pb2.HParamsPluginData.FromString(content)
            if pd.HasField("session_start_info"):
                out["hparams"] = {k: (v.number_value if v.HasField("number_value") else v.string_value)
                                  for k, v in pd.session_start_info.hparams.items()}
            if pd.HasField("experiment"):
                out["hparam_metrics"] = [m.name.tag for m in pd.experiment.metric_infos]
    return out


def summarize_read_back(back: dict) -> str:
    """A per-run table of what TensorBoard found (05)."""
    lines = []
    for name, r in back["runs"].items():
        parts = [f"{len(r['scalars'])} scalar tags", f"{len(r['histograms'])} histogram tags",
                 f"{len(r['images'])} image tags", f"{len(r['tensors'])} tensor tags", f"graph: {r['graph']}"]
        lines.append(f"run {name!r}: " + ", ".join(parts) + f"; plugins {r['plugins']}")
    for e in back["embeddings"]:
        lines.append(f"embedding {e['tag']!r}: {e['points']} points × {e['dims']} dims, sprite {e['sprite']}, "
                     f"labels {e['metadata']}")
    return "\n".join(lines)


# --- TensorBoard in the notebook -------------------------------------------------------------------------

def tensorboard_binary() -> str:
    """Point TensorBoard's notebook magic at this environment's ``tensorboard`` (05)."""
    exe = Path(sys.executable).parent / "tensorboard"
    if exe.exists():
        os.environ["TENSORBOARD_BINARY"] = str(exe)
    return os.environ.get("TENSORBOARD_BINARY", "tensorboard")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def running_tensorboards(logdir: str | Path | None = None) -> list:
    """TensorBoard servers started from this machine (TensorBoard's own registry), optionally by logdir."""
    from tensorboard import manager

    infos = manager.get_all()
    if logdir is None:
        return infos
    want = str(Path(logdir).resolve())
    return [i for i in infos if str(Path(i.logdir).resolve()) == want]


def check_tensorboard(port: int, timeout: float = 30) -> list[str]:
    """Ask the TensorBoard server on ``port`` for its runs; raise if it does not answer (05)."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/runs", timeout=5) as r:
                return json.loads(r.read())
        except OSError as e:
            last = e
            time.sleep(0.5)
    raise RuntimeError(f"TensorBoard did not answer on 127.0.0.1:{port} within {timeout:g} s ({last}); "
                       "read the %tensorboard cell's output for its error")


def _is_that_tensorboard(info: Any) -> bool:
    """Whether the registry entry's pid is still the TensorBoard it describes, started by this user."""
    import psutil

    try:
        p = psutil.Process(info.pid)
        cmd, created, uid = " ".join(p.cmdline()), p.create_time(), p.uids().real
    except psutil.Error:  # gone, or not ours to inspect
        return False
    # TensorBoard registers itself once serving, a few seconds after it started: a process created
    # after that moment is another program that got the pid when the real one was gone
    return "tensorboard" in cmd and created <= info.start_time + 1 and uid == os.getuid()


def _forget(info: Any) -> None:
    """Remove a registry entry of TensorBoard's (its own format: one file per pid)."""
    from tensorboard import manager

    Path(manager._get_info_dir(), f"pid-{info.pid}.info").unlink(missing_ok=True)


def stop_tensorboards(logdir: str | Path | None = None) -> int:
    """End the TensorBoard servers serving ``logdir`` (all of this user's if None); return how many (05).

    A registry entry whose process is gone, or whose pid now belongs to another program, is removed
    and not counted: nothing but the TensorBoard that registered is ever signalled.
    """
    import psutil

    n = 0
    for info in running_tensorboards(logdir):
        if not _is_that_tensorboard(info):
            _forget(info)
            continue
        p = psutil.Process(info.pid)
        p.terminate()
        try:
            p.wait(5)
        except psutil.TimeoutExpired:
            p.kill()
        _forget(info)
        n += 1
    return n


# --- W&B: read an offline run back -----------------------------------------------------------------------

def _wandb_chunks(data: bytes):
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


def read_wandb_run(run_dir: str | Path) -> dict:
    """History rows, config and record counts of an offline W&B run, from its ``.wandb`` file (05)."""
    from wandb.proto import wandb_internal_pb2

    files = sorted(Path(run_dir).glob("run-*.wandb"))
    if not files:
        raise FileNotFoundError(f"no run-*.wandb file in {run_dir}; pass the run folder (…/wandb/offline-run-…)")
    history, config, kinds = [], {}, {}
    for chunk in _wandb_chunks(files[0].read_bytes()):
        rec = wandb_internal_pb2.Record()
        rec.ParseFromString(chunk)
        kind = rec.WhichOneof("record_type")
        kinds[kind] = kinds.get(kind, 0) + 1
        if kind == "history":
            history.append({(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in rec.history.item})
        elif kind == "run":
            for u in rec.run.config.update:
                config[u.key] = json.loads(u.value_json)
        elif kind == "config":
            for u in rec.config.update:
                config[u.key] = json.loads(u.value_json)
    return {"history": history, "config": config, "records": kinds}


# --- the profiler ------------------------------------------------------------------------------------

def profile_training(model: nn.Module, loader: DataLoader, trace_path: str | Path, steps: int = 6) -> Any:
    """Profile training steps with a wait/warmup/active schedule; write a Chrome/Perfetto trace (05)."""
    from torch.profiler import ProfilerActivity, profile, schedule

    os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # keep the profiler's own C++ log to errors that matter
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    trace_path = Path(trace_path)
    device = model_device(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with profile(activities=activities, schedule=schedule(wait=1, warmup=1, active=steps - 2), record_shapes=True,
                 profile_memory=True, on_trace_ready=lambda p: p.export_chrome_trace(str(trace_path))) as prof:
        for i, (x, y) in enumerate(loader):
            if i == steps:
                break
            x, y = x.to(device), y.to(device)
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            prof.step()
    return prof


EXERCISES = [
    Exercise("05.scalar_points", "int", digest="e3c42f74094f8f4044fb4d9161be1ab7e753821fc303e97b5196fe7dbbb3a5be",
             hint="How often does write_all_summaries call add_scalar for one tag?",
             why="One point per call: the step you pass is the x axis."),
    Exercise("05.add_scalars_runs", "int", digest="c540308f6bc251a19b79189e16336ae92ff9ec9f55dbaf7168270fc6b135ef5e",
             hint="add_scalars writes each key of its dictionary as a run of its own.",
             why="That is why TensorBoard lists loss_train and loss_val as runs beside '.'."),
    Exercise("05.profiler_steps", "int", digest="7b0607b319319e3059a48bb74f283384ab619d50f03ceabc508d6e77cf6c0281",
             hint="wait and warmup steps are run but not recorded.",
             why="Warm-up keeps the profiler's own start-up cost out of the numbers."),
]
