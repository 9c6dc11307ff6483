"""Transfer learning and data augmentation: the code notebook 07 teaches (its recipe).

The offline "pretrained" backbone is real: the course CNN trained on digits 0–4 (the source
task), saved as a ``state_dict`` checkpoint; the target task is digits 5–9 with few labels.
:func:`freeze_batchnorm_stats` is the step a model with BatchNorm layers (a torchvision ResNet)
needs besides ``requires_grad_(False)``: frozen BatchNorm layers in evaluation mode.
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Callable, Sequence

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

from ..core.data import load_datasets, tensors
from ..core.device import model_device
from ..core.models import DigitsCNN
from ..core.train import train

__all__ = ["SOURCE", "TARGET", "subset", "pretrain_backbone", "load_pretrained", "MODES", "make_target_model",
           "frozen_state", "freeze_batchnorm_stats", "augmentations", "resize_crop_transforms", "Augmented"]


SOURCE = (0, 1, 2, 3, 4)  # the source task: the backbone is pretrained on these digits


TARGET = (5, 6, 7, 8, 9)  # the target task, with few labels


def subset(split: str, classes: Sequence[int], per_class: int | None = None, seed: int = 0) -> TensorDataset:
    """Images of ``classes`` from a split, labels renumbered 0..len(classes)−1; ``per_class`` picks few (07)."""
    if per_class is not None and (not isinstance(per_class, int) or per_class < 1):
        raise ValueError(f"per_class must be a positive int or None, got {per_class!r}")
    x, y = tensors(load_datasets("digits")[split])
    g = torch.Generator().manual_seed(seed)
    xs, ys = [], []
    for new, c in enumerate(classes):
        idx = (y == c).nonzero().flatten()
        if per_class is not None:
            if per_class > len(idx):
                raise ValueError(f"only {len(idx)} images of digit {c} in the {split} split; ask for at most that many")
            idx = idx[torch.randperm(len(idx), generator=g)[:per_class]]
        xs.append(x[idx])
        ys.append(torch.full((len(idx),), new))
    return TensorDataset(torch.cat(xs), torch.cat(ys))


def pretrain_backbone(path: str | Path, epochs: int = 10, seed: int = 0, device: str | torch.device = "cpu") -> dict:
    """Train the course CNN on digits 0–4 on ``device`` and save its ``state_dict`` (the offline pretrained model) (07)."""
    torch.manual_seed(seed)
    model = DigitsCNN(num_classes=len(SOURCE)).to(device)
    train_loader = DataLoader(subset("train", SOURCE), batch_size=64, shuffle=True,
                              generator=torch.Generator().manual_seed(seed))
    hist = train(model, train_loader, DataLoader(subset("val", SOURCE), batch_size=256), epochs=epochs, lr=3e-3,
                 progress=False)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), path)  # the portable way: tensors only, no pickled class
    return {"path": str(path), "source_val_acc": hist.val_acc[-1]}


def load_pretrained(path: str | Path, device: str | torch.device = "cpu") -> DigitsCNN:
    """A DigitsCNN with the saved source-task weights, loaded onto ``device`` with ``map_location`` (07)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}; run pretrain_backbone({str(path)!r}) first")
    model = DigitsCNN(num_classes=len(SOURCE))
    model.load_state_dict(torch.load(path, map_location=device, weights_only=True))
    return model.to(device)


MODES = {
    "scratch": "from scratch",
    "head_only": "freeze all but the classifier",
    "frozen": "freeze the convolutions, new head",
    "finetune": "fine-tune the last conv layer + new head",
}


def make_target_model(pretrained: nn.Module | None, mode: str, num_classes: int = len(TARGET), seed: int = 0,
                      device: str | torch.device | None = None) -> nn.Module:
    """The model for the target task (07).

    ``mode``: ``"scratch"`` (new random weights); ``"head_only"`` (everything pretrained frozen,
    only a new classifier trains); ``"frozen"`` (the
    convolutions frozen, a new two-layer head: Linear(512, 64), ReLU, Linear(64, classes));
    ``"finetune"`` (as ``"frozen"`` but the last convolution trains too). The pretrained model
    is copied first, so it is never changed. The new model is on ``device``: by default where
    ``pretrained`` is (the CPU for ``"scratch"`` without one).
    """
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; choose one of {list(MODES)}")
    if device is None:
        device = model_device(pretrained) if pretrained is not None else torch.device("cpu")
    torch.manual_seed(seed)
    if mode == "scratch":
        return DigitsCNN(num_classes=num_classes).to(device)
    if pretrained is None:
        raise ValueError(f"mode {mode!r} needs a pretrained model; pass load_pretrained(...)")
    model = copy.deepcopy(pretrained)  # never modify the pretrained model itself
    model.requires_grad_(False)
    torch.manual_seed(seed)
    if mode in ("frozen", "finetune"):
        convs = list(model.features[:6])  # conv, ReLU, conv, ReLU, pool, flatten: the general part
        head_in = model.features[6].in_features
        model.features = nn.Sequential(*convs, nn.Linear(head_in, model.features[6].out_features), nn.ReLU())
        if mode == "finetune":
            convs[2].requires_grad_(True)  # the last convolution
    model.classifier = nn.Linear(model.classifier.in_features, num_classes)  # new, trainable
    return model.to(device)  # the new layers were made on the CPU


def freeze_batchnorm_stats(model: nn.Module) -> nn.Module:
    """Put every BatchNorm layer whose parameters are all frozen in evaluation mode; return ``model`` (07).

    In training mode a BatchNorm layer normalises with the batch's statistics and updates its
    running mean and variance from them, whether its weights train or not (``nn.BatchNorm2d``'s
    docstring); in evaluation mode it uses the stored ones and changes nothing. ``model.train()``
    sets every layer to training mode again, so call this after it, every time.
    """
    for module in model.modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm) and not any(p.requires_grad for p in module.parameters()):
            module.eval()
    return model


def frozen_state(model: nn.Module,
                 prepare: Callable[[nn.Module], object] | None = freeze_batchnorm_stats) -> dict[str, torch.Tensor]:
    """Copies of every tensor training will not change, by ``state_dict`` name, to compare after training (07).

    Every parameter that does not train, and every buffer of a module the training loop leaves in
    evaluation mode: ``model.train()``, then ``prepare(model)`` (default :func:`freeze_batchnorm_stats`,
    the course's recipe; ``None`` for a loop that calls ``model.train()`` alone). A BatchNorm layer
    updates ``running_mean``, ``running_var`` and ``num_batches_tracked`` in training mode only,
    whatever ``requires_grad_(False)`` says; so a BatchNorm layer in a head that the loop keeps in
    training mode (even one without parameters, ``affine=False``) is not counted. The modes of
    ``model`` are restored before returning.
    """
    state = {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad}
    modes = {m: m.training for m in model.modules()}
    try:
        model.train()
        if prepare is not None:
            prepare(model)
        for prefix, module in model.named_modules():
            if not module.training:
                for n, b in module.named_buffers(prefix=prefix, recurse=False):
                    state[n] = b.detach().clone()
    finally:
        for m, training in modes.items():
            m.training = training
    return state


def augmentations(p_flip: float = 0.5) -> dict[str, Callable]:
    """Named ``torchvision.transforms.v2`` pipelines for 1×8×8 digit tensors (07).

    ``p_flip``: the flips' probability (0.5 for training; 1 to draw what a flip does).
    """
    from torchvision.transforms import v2

    return {
        "none": v2.Identity(),
        "rotate ±15°": v2.RandomRotation(15),
        "shift ±1 px": v2.RandomAffine(degrees=0, translate=(0.125, 0.125)),
        "random crop (pad 1)": v2.RandomCrop(8, padding=1),
        "resized crop": v2.RandomResizedCrop(8, scale=(0.7, 1.0), ratio=(0.9, 1.1), antialias=True),
        "horizontal flip": v2.RandomHorizontalFlip(p=p_flip),
        "vertical flip": v2.RandomVerticalFlip(p=p_flip),
    }


def resize_crop_transforms() -> dict[str, Callable]:
    """Resizing and cropping transforms, sized for 8×8 digits (07).

    ``Resize`` scales (antialiased), ``CenterCrop`` cuts the middle, ``RandomCrop`` with padding
    shifts the digit by up to the padding; chained, resize then centre crop is the order of the
    ImageNet evaluation preset (resize to 256, crop 224), here resize to 12, crop 8.
    """
    from torchvision.transforms import v2

    return {
        "Resize(16)": v2.Resize(16, antialias=True),
        "CenterCrop(6)": v2.CenterCrop(6),
        "RandomCrop(8, padding=1)": v2.RandomCrop(8, padding=1),
        "Resize(12) → CenterCrop(8)": v2.Compose([v2.Resize(12, antialias=True), v2.CenterCrop(8)]),
    }


class Augmented(Dataset):
    """A dataset whose images pass through ``transform`` each time they are read (one draw per sample)."""

    def __init__(self, base: TensorDataset, transform: Callable) -> None:
        self.base, self.transform = base, transform

    def __len__(self) -> int:
        return len(self.base)

    def __getitem__(self, i: int):
        x, y = self.base[i]
        return self.transform(x), y
