"""Monitoring: the code notebook 05 teaches (its recipe): tqdm bars, a SummaryWriter session, the profiler.

The one logger that feeds TensorBoard and W&B together is ``helpers.core.logger.Monitor`` (the
training loop and the DDP worker use it too); here are the tools used directly.
"""
from __future__ import annotations

import contextlib
import os
import sys
import warnings
from pathlib import Path
from typing import Any, Iterator

import torch
from torch import nn
from torch.utils.data import DataLoader

from ..core.bars import progress  # tqdm.auto.tqdm, same arguments; in Jupyter its saved output is the final state
from ..core.device import model_device
from ..core.files import OwnedFolder
from ..core.train import evaluate, train_one_epoch

__all__ = ["train_with_bars", "log_epoch_summaries", "log_predictions", "log_other_summaries", "write_all_summaries",
           "bar_chars_worker", "ddp_logging_worker", "run_epoch_means",
           "profile_training"]

# what write_all_summaries writes, and so all it may remove on a rerun: event files (its own run, and the
# sub-runs add_scalars and add_hparams make), the projector's config and the embedding's folder
_SUMMARY_FILES = ("events.out.tfevents.*", "*/events.out.tfevents.*", "projector_config.pbtxt",
                  "[0-9][0-9][0-9][0-9][0-9]/*")


def train_with_bars(model: nn.Module, train_loader: DataLoader, val_loader: DataLoader, epochs: int = 3,
                    lr: float = 3e-3, rank: int = 0) -> list[dict]:
    """Nested tqdm bars: one over epochs, one over batches, live description and postfix (05).

    ``progress`` is ``tqdm.auto.tqdm``, called with the same arguments (:mod:`helpers.core.bars`).
    Only rank 0 draws (``disable=rank != 0``), so N processes do not print N bars. Batches go to
    the device the model is on.
    """
    device = model_device(model)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    history = []
    epochs_bar = progress(range(epochs), desc="epochs", disable=rank != 0, unit="epoch")
    for epoch in epochs_bar:
        batches = progress(train_loader, desc=f"epoch {epoch + 1}", leave=False, disable=rank != 0, unit="batch")
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


def write_all_summaries(log_dir: str | Path, model: nn.Module, loaders: dict[str, DataLoader], epochs: int = 3,
                        lr: float = 3e-3) -> dict:
    """One short training run that writes every TensorBoard summary type but video; returns what it wrote (05).

    Scalars (``add_scalar`` and ``add_scalars``), weight and gradient histograms, an image grid of
    predictions with their labels as text, a matplotlib figure, a PR curve, an embedding with
    sprites, the graph, a mesh, a sound, a custom-scalars layout and hparams (the recipe:
    :func:`log_epoch_summaries`, :func:`log_predictions`, :func:`log_other_summaries`). Not video:
    ``add_video`` needs ``moviepy``, which the course does not install. ``log_dir`` must be new or empty, or written by an earlier call: a rerun replaces
    only the files this function wrote (:class:`helpers.core.files.OwnedFolder`).
    """
    folder = OwnedFolder(log_dir, "write_all_summaries", writes=_SUMMARY_FILES)
    log_dir = folder.claim()
    try:
        out = _write_all(log_dir, model, loaders, epochs, lr)
    except BaseException:
        folder.release()  # the folder is free for the rerun, which clears what this one wrote
        raise
    folder.seal()
    return out


def log_epoch_summaries(w: Any, model: nn.Module, epoch: int, train_loss: float, val: dict) -> None:
    """What a SummaryWriter ``w`` logs every epoch: scalars, one chart of two runs, histograms (05)."""
    w.add_scalar("loss/train", train_loss, epoch)
    w.add_scalar("loss/val", val["loss"], epoch)
    w.add_scalar("acc/val", val["acc"], epoch)
    # one sub-run per main tag and key, named <main_tag>_<key>
    w.add_scalars("loss", {"train": train_loss, "val": val["loss"]}, epoch)
    for name, p in model.named_parameters():
        w.add_histogram(f"weights/{name}", p, epoch)
        w.add_histogram(f"grads/{name}", p.grad, epoch)


def log_predictions(w: Any, model: nn.Module, x: torch.Tensor, y: torch.Tensor, step: int) -> None:
    """Logged once, after training: what the model sees and predicts on the images ``x`` with labels ``y`` (05)."""
    import matplotlib.pyplot as plt
    import torchvision

    model.eval()
    with torch.no_grad():
        probs, features = model(x).softmax(1).cpu(), model.features(x).cpu()
    x, y, pred = x.cpu(), y.cpu(), probs.argmax(1)
    w.add_image("predictions", torchvision.utils.make_grid(x[:32], nrow=8, normalize=True, pad_value=1), step)
    w.add_text("predictions/labels", " ".join(f"{int(a)}→{int(b)}" for a, b in zip(y[:32], pred[:32])), step)
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.bar(range(10), torch.bincount(pred, minlength=10).tolist())
    ax.set(title="predicted classes", xlabel="digit")
    w.add_figure("figures/predicted_classes", fig, step)  # closes the figure
    w.add_pr_curve("pr/digit_3", (y == 3).int(), probs[:, 3], step)
    w.add_embedding(features[:100], metadata=y[:100].tolist(), label_img=x[:100], global_step=step, tag="features")


def log_other_summaries(w: Any, model: nn.Module, x: torch.Tensor, step: int, hparams: dict, metrics: dict) -> None:
    """Logged once: the graph, a mesh, a sound, a custom chart layout, and the run's hparams with its metrics (05)."""
    with warnings.catch_warnings():  # add_graph traces with torch.jit, which warns that it is deprecated
        warnings.simplefilter("ignore", FutureWarning)
        w.add_graph(model, x[:4])
    verts = torch.tensor([[[0.0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]]])
    faces = torch.tensor([[[0, 1, 2], [0, 1, 3], [0, 2, 3], [1, 2, 3]]])
    w.add_mesh("mesh/tetrahedron", vertices=verts, faces=faces, global_step=step)
    t = torch.arange(4000) / 8000                                  # half a second at 8,000 samples/s
    w.add_audio("audio/a440", torch.sin(2 * torch.pi * 440 * t).unsqueeze(0), step, sample_rate=8000)
    w.add_custom_scalars({"losses": {"train and val": ["Multiline", ["loss/train", "loss/val"]]}})
    w.add_hparams(hparams, metrics, run_name="hparams")            # writes a sub-run


def _write_all(log_dir: Path, model: nn.Module, loaders: dict[str, DataLoader], epochs: int, lr: float) -> dict:
    """The body of :func:`write_all_summaries`, into a claimed folder: training, then the recipe's loggers."""
    from torch.utils.tensorboard import SummaryWriter

    w = SummaryWriter(str(log_dir))
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    device = model_device(model)
    x_val, y_val = next(iter(DataLoader(loaders["val"].dataset, batch_size=len(loaders["val"].dataset))))
    x_val, y_val = x_val.to(device), y_val.to(device)
    hist_tags = [f"weights/{n}" for n, _ in model.named_parameters()] + [f"grads/{n}" for n, _ in model.named_parameters()]
    for epoch in range(1, epochs + 1):
        tr = train_one_epoch(model, loaders["train"], opt)
        val = evaluate(model, loaders["val"])
        log_epoch_summaries(w, model, epoch, tr["loss"], val)
    log_predictions(w, model, x_val, y_val, epochs)
    hparams = {"lr": lr, "epochs": epochs, "model": type(model).__name__}
    log_other_summaries(w, model, x_val, epochs, hparams, {"hparam/val_acc": val["acc"]})
    w.close()
    return {"epochs": epochs, "last": {"loss/val": val["loss"], "acc/val": val["acc"]}, "hist_tags": hist_tags,
            "hparams": hparams, "embedding_points": 100, "audio": {"audio/a440": (8000, 4000)},
            "custom_scalars": {"losses": {"train and val": ["loss/train", "loss/val"]}}}


class _Counted:
    """A stream that passes every write on to ``stream`` and counts the characters written."""

    def __init__(self, stream: Any) -> None:
        self.stream, self.chars = stream, 0

    def write(self, text: str) -> int:
        self.chars += len(text)
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()


def bar_chars_worker(rank: int, world_size: int, steps: int = 10) -> tuple[int, int]:
    """Each rank loops under a tqdm bar twice: with no ``disable``, then with ``disable=rank != 0`` (05).

    Returns how many characters each bar wrote, ``(no disable, disable=rank != 0)``. The count is of
    what reached the stream (stderr, relayed to the notebook), so it shows which ranks drew, not
    which ranks were asked to.
    """
    import time

    from tqdm.auto import tqdm

    counts = []
    for disable in (False, rank != 0):
        out = _Counted(sys.stderr)
        for _ in tqdm(range(steps), desc=f"rank {rank}", disable=disable, file=out):
            time.sleep(0.01)
        counts.append(out.chars)
    return counts[0], counts[1]


def ddp_logging_worker(rank: int, world_size: int, epochs: int, batch_size: int, lr: float, log_dir: str) -> dict:
    """Notebook 03's DDP training (``helpers.ddp.train_worker``) with its logging, without the checkpoint (05).

    Each rank trains on its ``DistributedSampler`` shard with ``batch_size // world_size`` samples a
    batch; ``Monitor(..., rank=rank)`` writes on rank 0 only. Returns what each rank measured itself
    (its epoch means of training loss and accuracy, over its own samples), so the notebook can put
    every rank's numbers beside the one rank 0 logged.
    """
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DistributedSampler

    from ..core.data import load_datasets
    from ..core.logger import Monitor
    from ..core.measure import seed_everything
    from ..core.models import DigitsCNN
    from ..core.train import train
    from ..launching.ranks import local_device

    device = local_device()
    seed_everything(0)
    ds = load_datasets("digits")
    sampler = DistributedSampler(ds["train"], num_replicas=world_size, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(ds["train"], batch_size=batch_size // world_size, sampler=sampler, shuffle=False,
                        pin_memory=device.type == "cuda")
    model = DDP(DigitsCNN().to(device), device_ids=[device.index] if device.type == "cuda" else None)  # ddp_wrap (03)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    with Monitor(log_dir, rank=rank, wandb=False) as monitor:  # a no-op on every rank but 0
        hist = train(model, loader, epochs=epochs, optimizer=opt, rank=rank, desc=f"DDP × {world_size}",
                     on_epoch=sampler.set_epoch, logger=monitor)
    return {"rank": rank, "samples": len(sampler), "dataset": len(ds["train"]), "batch_size": loader.batch_size,
            "train/loss": hist.train_loss, "train/acc": hist.train_acc}


def run_epoch_means(ranks: list[dict], tag: str) -> list[float]:
    """Each epoch's ``tag`` over every sample of the run, from what :func:`ddp_logging_worker` returned per rank (05).

    Exercise 4's reference does the averaging (``lesson._run_mean``), so its check refuses an answer that calls this.
    """
    from . import lesson

    return [lesson._run_mean([(r["samples"], {tag: r[tag][e]}) for r in ranks], tag) for e in range(len(ranks[0][tag]))]


@contextlib.contextmanager
def _native_output_silenced() -> Iterator[None]:
    """Send what C++ code writes to the process's stdout/stderr (file descriptors 1 and 2) to /dev/null.

    The profiler's own C++ layer (kineto) logs its start and stop and a warning about memory
    allocated before it started: noise in a notebook. Python's prints are not affected beyond
    this block.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, null):
            os.close(fd)


def profile_training(model: nn.Module, loader: DataLoader, trace_path: str | Path, steps: int = 6) -> Any:
    """Profile ``steps`` training steps with a wait/warmup/active schedule, one cycle; write a Chrome/Perfetto trace (05)."""
    from torch.profiler import ProfilerActivity, profile, schedule

    os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # keep the profiler's own C++ log to errors that matter
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    trace_path = Path(trace_path)
    device = model_device(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with _native_output_silenced(), profile(
            activities=activities, schedule=schedule(wait=1, warmup=1, active=steps - 2, repeat=1), record_shapes=True,
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
