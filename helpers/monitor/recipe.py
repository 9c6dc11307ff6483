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

from ..core.bars import progress as tqdm  # tqdm.auto's bar; in Jupyter its saved output is the final state
from ..core.device import model_device
from ..core.files import OwnedFolder
from ..core.train import evaluate, train_one_epoch

__all__ = ["train_with_bars", "write_all_summaries", "profile_training"]

# what write_all_summaries writes, and so all it may remove on a rerun: event files (its own run, and the
# sub-runs add_scalars and add_hparams make), the projector's config and the embedding's folder
_SUMMARY_FILES = ("events.out.tfevents.*", "*/events.out.tfevents.*", "projector_config.pbtxt",
                  "[0-9][0-9][0-9][0-9][0-9]/*")


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


def write_all_summaries(log_dir: str | Path, model: nn.Module, loaders: dict[str, DataLoader], epochs: int = 3,
                        lr: float = 3e-3) -> dict:
    """One short training run that writes every TensorBoard summary type; returns what it wrote (05).

    Scalars (``add_scalar`` and ``add_scalars``), weight and gradient histograms, an image grid of
    predictions, a matplotlib figure, the graph, an embedding with sprites, hparams, a PR curve
    and a mesh. ``log_dir`` must be new or empty, or written by an earlier call: a rerun replaces
    only the files this function wrote (:class:`helpers.files.OwnedFolder`).
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


def _write_all(log_dir: Path, model: nn.Module, loaders: dict[str, DataLoader], epochs: int, lr: float) -> dict:
    """The body of :func:`write_all_summaries`, into a claimed folder."""
    import matplotlib.pyplot as plt
    import torchvision
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
    return {"epochs": epochs, "last": {"loss/val": val["loss"], "acc/val": val["acc"]}, "hist_tags": hist_tags,
            "hparams": hparams, "embedding_points": 100}


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
    """Profile training steps with a wait/warmup/active schedule; write a Chrome/Perfetto trace (05)."""
    from torch.profiler import ProfilerActivity, profile, schedule

    os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # keep the profiler's own C++ log to errors that matter
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    trace_path = Path(trace_path)
    device = model_device(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with _native_output_silenced(), profile(
            activities=activities, schedule=schedule(wait=1, warmup=1, active=steps - 2), record_shapes=True,
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
