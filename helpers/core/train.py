"""The course's one training loop, and evaluation (00 onwards).

``train`` draws a tqdm.auto progress bar (a widget in Jupyter, text in a terminal) and returns a
:class:`History` of per-epoch metrics. The same loop trains one process and each rank of a DDP
run (03): ``on_epoch`` is called at the start of every epoch (where a ``DistributedSampler``
gets its ``set_epoch``), and only rank 0 draws the bar and logs. Anything with a
``log(metrics, step)`` method can be the ``logger`` (``helpers.core.logger.Monitor`` feeds
TensorBoard and W&B, notebook 05).
"""
from __future__ import annotations

import math
import os
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator, Protocol

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset
from .bars import progress as tqdm

from .device import get_device, model_device
from .i18n import tr

DIVERGED = 1e4  # a loss this many times its first value (or 1, if larger) has diverged


class Logger(Protocol):
    """Anything that takes ``log(metrics, step)``: what :func:`train` reports each epoch to (00, 05)."""

    def log(self, metrics: dict[str, float], step: int) -> None: ...


@dataclass
class History:
    """Per-epoch metrics of one training run (00 onwards)."""

    train_loss: list[float] = field(default_factory=list)
    train_acc: list[float] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    val_acc: list[float] = field(default_factory=list)
    epoch_seconds: list[float] = field(default_factory=list)

    def last(self) -> dict[str, float]:
        """The last epoch's metrics, rounded for printing (00)."""
        out = {k: round(v[-1], 4) for k, v in vars(self).items() if v and k != "epoch_seconds"}
        return out


_REFUSE: list = []   # while an exercise checks a student's function, evaluate() refuses to run (00, 06)


@contextmanager
def evaluate_refused(error: type[Exception]) -> Iterator[list]:
    """While the block runs, ``evaluate`` records each call's ``(model, loader)`` and raises ``error``, however the
    student's code reached it (a global, an import, a default argument, a closure, a partial): the refusal sits
    inside ``evaluate`` itself (00, 06)."""
    calls: list = []

    def refuse(args):
        calls.append(args)
        raise error("the course's evaluate() is not available inside this exercise")

    _REFUSE.append(refuse)
    try:
        yield calls
    finally:
        _REFUSE.remove(refuse)


@torch.no_grad()
def evaluate(model: nn.Module, loader: DataLoader, device: torch.device | str | None = None) -> dict[str, float]:
    """Mean cross-entropy loss and accuracy of ``model`` on ``loader`` (00_setup onwards).

    Batches go to ``device``, by default the device the model is on (:func:`model_device`).
    """
    if _REFUSE:
        _REFUSE[-1]((model, loader))
    _check_loader("loader", loader, "val")
    if device is None:
        device = model_device(model)
    elif not isinstance(device, torch.device):  # a torch.device was decided by the caller: used as it is
        device = get_device(device)
    was_training = model.training
    model.eval()
    total_loss, correct, n = 0.0, 0, 0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        out = _forward(model, x, y)
        total_loss += nn.functional.cross_entropy(out, y, reduction="sum").item()
        correct += (out.argmax(1) == y).sum().item()
        n += len(y)
    model.train(was_training)
    if n == 0:
        raise ValueError("evaluate() got an empty loader; check the dataset and batch size")
    return {"loss": total_loss / n, "acc": correct / n}


def make_optimizer(model: nn.Module, name: str = "adam", lr: float = 1e-2) -> torch.optim.Optimizer:
    """``"adam"`` or ``"sgd"`` (with momentum 0.9) over the trainable parameters (00, 07)."""
    if not (isinstance(lr, (int, float)) and not isinstance(lr, bool) and 0 < lr < math.inf):
        raise ValueError(f"learning rate must be a positive, finite number, got {lr!r}; try 1e-2")
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the model has no trainable parameters (all frozen?); unfreeze some with requires_grad_(True)")
    if name == "adam":
        return torch.optim.Adam(params, lr=lr)
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=0.9)
    raise ValueError(f"unknown optimizer {name!r}; choose 'adam' or 'sgd'")


def _check_optimizer_owns(opt: torch.optim.Optimizer, model: nn.Module) -> None:
    """Refuse an optimizer that holds none of the model's trainable parameters (it would train nothing)."""
    mine = {id(p) for p in model.parameters() if p.requires_grad}
    theirs = {id(p) for group in opt.param_groups for p in group["params"]}
    if mine and not mine & theirs:
        raise ValueError("the optimizer holds none of this model's parameters, so training would change nothing: "
                         "build it from this model, e.g. torch.optim.Adam(model.parameters(), lr=3e-3)")


def train_one_epoch(model: nn.Module, loader: DataLoader, opt: torch.optim.Optimizer,
                    device: torch.device | str | None = None,
                    on_batch: Callable[[float], None] | None = None) -> dict[str, float]:
    """One pass over ``loader`` with cross-entropy; mean loss and accuracy (00 onwards; 04, 05 use it directly).

    ``on_batch(loss_so_far)`` is called after every batch (the progress bar's hook).
    """
    _check_loader("loader", loader, "train")
    device = model_device(model) if device is None else torch.device(device)
    model.train()
    total_loss, correct, n, first = 0.0, 0, 0, None
    for batch, (x, y) in enumerate(loader, 1):
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        out = _forward(model, x, y)
        loss = nn.functional.cross_entropy(out, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        # .item() turns the 0-d tensor into a float, so no graph is kept alive (notebook 06)
        value = loss.item()
        if not math.isfinite(value):
            raise FloatingPointError(f"the loss became {value} at batch {batch}: training diverged. "
                                     "Lower the learning rate (try 10× smaller) and check the inputs for NaN/inf.")
        first = value if first is None else first
        _check_exploding(first, value, opt, batch=batch)
        total_loss += value * len(y)
        correct += (out.argmax(1) == y).sum().item()
        n += len(y)
        if on_batch is not None:
            on_batch(total_loss / n)
    if n == 0:
        raise ValueError("the training loader gave no batches: is its dataset empty, or is drop_last=True with a "
                         "batch_size larger than the dataset?")
    return {"loss": total_loss / n, "acc": correct / n}


def train(model: nn.Module, train_loader: DataLoader, val_loader: DataLoader | None = None, epochs: int = 5,
          lr: float = 1e-2, optimizer: str | torch.optim.Optimizer = "adam", device: torch.device | str | None = None,
          progress: bool = True, logger: Logger | None = None, desc: str = "train", rank: int = 0,
          on_epoch: Callable[[int], None] | None = None) -> History:
    """Train ``model`` with cross-entropy for ``epochs``; return a :class:`History` (00 onwards; 03, 04, 05, 07).

    One progress bar over batches of all epochs, its postfix showing the running loss and the
    last validation accuracy. ``progress=False`` for worker processes and tests. ``device``:
    where to train; the model is moved there. By default the model stays where it is (the
    notebook decides the device once: ``model = DigitsCNN().to(device)``). In a multi-process
    run, pass the process's ``rank``: only rank 0 draws the bar and logs; and ``on_epoch``
    (e.g. ``sampler.set_epoch``) is called with each epoch's number before it starts.
    """
    if not isinstance(epochs, int) or isinstance(epochs, bool) or epochs < 1:
        raise ValueError(f"epochs must be a positive int, got {epochs!r}")
    for name, loader in (("train_loader", train_loader), ("val_loader", val_loader)):
        if isinstance(loader, dict):
            raise TypeError(f"{name} is a dict of loaders; pass one loader, e.g. train(model, loaders['train'], "
                            "loaders['val'])")
        _check_loader(name, loader, name[:-len("_loader")])
    if device is None:
        device = model_device(model)
    else:
        device = get_device(str(device))   # the run's one device decision: every epoch below gets this torch.device
        model.to(device)
    opt = make_optimizer(model, optimizer, lr) if isinstance(optimizer, str) else optimizer
    _check_optimizer_owns(opt, model)
    hist = History()
    show = progress and rank == 0
    bar = tqdm(total=epochs * len(train_loader), desc=desc, disable=not (show and _can_draw()), unit="batch",
               leave=True, mininterval=0.5)
    t_start = time.perf_counter()
    for epoch in range(epochs):
        if on_epoch is not None:
            on_epoch(epoch)
        t0 = time.perf_counter()

        def tick(loss_so_far: float, epoch: int = epoch) -> None:
            bar.update()
            bar.set_postfix(epoch=epoch + 1, loss=f"{loss_so_far:.3f}", refresh=False)

        m = train_one_epoch(model, train_loader, opt, device, on_batch=tick)
        hist.epoch_seconds.append(time.perf_counter() - t0)
        hist.train_loss.append(m["loss"])
        hist.train_acc.append(m["acc"])
        _check_exploding(hist.train_loss[0], m["loss"], opt, epoch=epoch + 1)
        metrics = {"train/loss": hist.train_loss[-1], "train/acc": hist.train_acc[-1]}
        if val_loader is not None:
            v = evaluate(model, val_loader, device)
            hist.val_loss.append(v["loss"])
            hist.val_acc.append(v["acc"])
            metrics.update({"val/loss": v["loss"], "val/acc": v["acc"]})
            bar.set_postfix(epoch=epoch + 1, loss=f"{hist.train_loss[-1]:.3f}", val_acc=f"{v['acc']:.3f}")
        if logger is not None and rank == 0:
            logger.log(metrics, step=epoch + 1)
    bar.close()
    if show:  # the bar's final state as one line: what a saved notebook or a log shows
        said = dict(desc=desc, epochs=epochs, batches=len(train_loader), s=f"{time.perf_counter() - t_start:.1f}",
                    loss=f"{hist.train_loss[-1]:.3f}", acc=f"{hist.val_acc[-1]:.3f}" if hist.val_acc else "")
        if hist.val_acc:   # each line whole, so that the stored Korean output can say it again
            line = (tr("train.done_val", "{desc}: {epochs} epochs of {batches} batches in {s} s; last training loss "
                       "{loss}, validation accuracy {acc}", **said) if epochs > 1 else
                    tr("train.done_one_val", "{desc}: {epochs} epoch of {batches} batches in {s} s; last training loss "
                       "{loss}, validation accuracy {acc}", **said))
        else:
            line = (tr("train.done", "{desc}: {epochs} epochs of {batches} batches in {s} s; last training loss {loss}",
                       **said) if epochs > 1 else
                    tr("train.done_one", "{desc}: {epochs} epoch of {batches} batches in {s} s; last training loss "
                       "{loss}", **said))
        print(line)
    return hist


def _check_loader(name: str, loader: object, split: str) -> None:
    """Refuse a dataset where batches are expected: iterating it gives single samples, and the model fails on them."""
    if isinstance(loader, Dataset):
        raise TypeError(tr("train.dataset", "{name} is a {type}, a dataset of single samples, not a DataLoader of "
                           "batches: wrap it, e.g. DataLoader(dataset, batch_size=64{shuffle}) (from "
                           "torch.utils.data), or take make_loaders(64)['{split}']", name=name,
                           type=type(loader).__name__, shuffle=", shuffle=True" if split == "train" else "",
                           split=split))


def _forward(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``model(x)``, with the two mistakes that otherwise end in raw errors said in words: a model whose dtype is
    not the batches' (``model.half()``), and labels beyond the model's classes (``num_classes`` too small)."""
    try:
        out = model(x)
    except RuntimeError as e:
        dtype = next((p.dtype for p in model.parameters() if p.is_floating_point()), None)
        if dtype is not None and x.is_floating_point() and dtype != x.dtype:
            raise TypeError(tr("train.dtype", "the model's parameters are {model} but the batches are {data}: "
                               "train in float32 with model.float() (for 16-bit training keep the model in float32 "
                               "and use torch.autocast, notebook 06)", model=dtype, data=x.dtype)) from e
        raise
    if out.dim() == 2 and y.dim() == 1 and not y.is_floating_point() and y.numel():
        low, high = torch.stack([y.min(), y.max()]).tolist()  # one look at the labels (one sync on a GPU)
        if low < 0:
            raise ValueError(tr("train.negative_label", "a batch has the label {low}: labels are class numbers from "
                                "0 to {last}, never negative", low=low, last=out.shape[1] - 1))
        if high >= out.shape[1]:
            raise ValueError(tr("train.too_few_classes", "a batch has the label {high}, but the model outputs "
                                "{classes} classes (0 to {last}): build it with at least num_classes={need}, e.g. "
                                "DigitsCNN(num_classes={need})", high=high, classes=out.shape[1],
                                last=out.shape[1] - 1, need=high + 1))
    return out


def _check_exploding(first: float, now: float, opt: torch.optim.Optimizer, batch: int = 0, epoch: int = 0) -> None:
    """Stop a run whose loss exploded (:data:`DIVERGED` times its first value), saying to lower the learning rate."""
    if now > DIVERGED * max(first, 1.0):
        lr = float(opt.param_groups[0]["lr"])
        where = (tr("train.at_batch", "batch {batch}", batch=batch) if batch else
                 tr("train.at_epoch", "the end of epoch {epoch}", epoch=epoch))
        raise FloatingPointError(tr("train.exploded", "the loss rose from {first:.3g} to {now:.3g} at {where}: "
                                    "training diverged (lr={lr:.2g}). Lower the learning rate: try 10× smaller, "
                                    "lr={smaller:.2g}", first=first, now=now, where=where, lr=lr, smaller=lr / 10))


def _can_draw() -> bool:
    """Whether a live progress bar can be seen: in a Jupyter kernel, on a terminal, or in a launched rank whose
    output the launcher shows in the notebook (helpers.launching.relay)."""
    if os.environ.get("BEYOND_ONE_GPU_RELAYED") == "1":
        return True
    try:
        from IPython import get_ipython

        if get_ipython() is not None:
            return True
    except ImportError:
        pass
    return sys.stderr.isatty()
