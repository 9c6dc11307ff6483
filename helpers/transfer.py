"""Transfer learning and data augmentation, measured (07_transfer_learning).

The offline "pretrained" backbone is real: the course CNN trained on digits 0–4 (the source
task), saved as a ``state_dict`` checkpoint; the target task is digits 5–9 with few labels.
Where a network is available, :func:`imagenet_backbone` loads a torchvision ImageNet model.
"""
from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Callable, Sequence

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

from .data import load_datasets, tensors
from .device import model_device
from .models import DigitsCNN, count_parameters
from .train import evaluate, train
from .checks import Exercise

SOURCE, TARGET = (0, 1, 2, 3, 4), (5, 6, 7, 8, 9)


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
    "finetune": "fine-tune the last conv block + new head",
}


def make_target_model(pretrained: nn.Module | None, mode: str, num_classes: int = len(TARGET), seed: int = 0,
                      device: str | torch.device | None = None) -> nn.Module:
    """The model for the target task (07).

    ``mode``: ``"scratch"`` (new random weights); ``"head_only"`` (everything pretrained frozen,
    only a new classifier trains — the lecture's "replace the classifier"); ``"frozen"`` (the
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
            convs[2].requires_grad_(True)  # the last convolution block
    model.classifier = nn.Linear(model.classifier.in_features, num_classes)  # new, trainable
    return model.to(device)  # the new layers were made on the CPU


def frozen_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """Copies of every parameter that does not train, to compare after training (07)."""
    return {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad}


def compare_strategies(pretrained: nn.Module, shots: Sequence[int] = (5, 10, 50), steps: int = 150,
                       seeds: Sequence[int] = (0, 1, 2)) -> list[dict]:
    """Test accuracy and seconds per epoch of each mode in ``MODES``, with few labels per class (07)."""
    test_loader = DataLoader(subset("test", TARGET), batch_size=512)
    rows = []
    for k in shots:
        for mode in MODES:
            accs, secs = [], []
            for seed in seeds:
                model = make_target_model(pretrained, mode, seed=seed)  # on the pretrained model's device
                loader = DataLoader(subset("train", TARGET, k, seed=seed), batch_size=32, shuffle=True,
                                    generator=torch.Generator().manual_seed(seed))
                # the same number of optimizer steps whatever the number of labels
                hist = train(model, loader, epochs=max(1, math.ceil(steps / len(loader))), lr=3e-3, progress=False)
                accs.append(evaluate(model, test_loader)["acc"])
                secs.append(sum(hist.epoch_seconds) / len(hist.epoch_seconds))
            rows.append({"shots": k, "mode": mode, "test_acc": sum(accs) / len(accs), "sec_per_epoch": sum(secs) / len(secs),
                         "trainable": count_parameters(model)["trainable"]})
    return rows


# --- imagenet, where the network allows ---------------------------------------------------------

def imagenet_backbone() -> tuple[nn.Module | None, str]:
    """torchvision's ResNet-18 with ImageNet weights, or ``None`` and why (no network, no cache) (07)."""
    import torchvision

    try:
        weights = torchvision.models.ResNet18_Weights.DEFAULT
        return torchvision.models.resnet18(weights=weights), f"ResNet-18, {weights}"
    except Exception as e:  # no network (URLError), a proxy, a full disk: say it, do not fake it
        return None, f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"


# --- augmentation ------------------------------------------------------------------------------------

def augmentations() -> dict[str, Callable]:
    """Named ``torchvision.transforms.v2`` pipelines for 1×8×8 digit tensors (07)."""
    from torchvision.transforms import v2

    return {
        "none": v2.Identity(),
        "rotate ±15°": v2.RandomRotation(15),
        "shift ±1 px": v2.RandomAffine(degrees=0, translate=(0.125, 0.125)),
        "resized crop": v2.RandomResizedCrop(8, scale=(0.7, 1.0), ratio=(0.9, 1.1), antialias=True),
        "rotate + shift": v2.Compose([v2.RandomRotation(10), v2.RandomAffine(degrees=0, translate=(0.125, 0.125))]),
        "horizontal flip": v2.RandomHorizontalFlip(p=0.5),
        "vertical flip": v2.RandomVerticalFlip(p=0.5),
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


def augmentation_grid(n: int = 6, seed: int = 0) -> tuple[torch.Tensor, list[str]]:
    """The same ``n`` digits through each augmentation: images ``[len(augs) * n, 1, 8, 8]`` and row names (07)."""
    torch.manual_seed(seed)
    x, _ = tensors(subset("train", range(10), per_class=1, seed=seed))
    x = x[:n]
    rows, names = [], []
    for name, tf in augmentations().items():
        rows.append(torch.stack([tf(img) for img in x]))
        names.append(name)
    return torch.cat(rows), names


def augmentation_effect(per_class: int = 10, steps: int = 300, seeds: Sequence[int] = (0, 1, 2),
                        names: Sequence[str] | None = None, device: str | torch.device = "cpu") -> list[dict]:
    """Test accuracy on all 10 digits, trained from scratch on ``device`` with ``per_class`` labels, per augmentation (07)."""
    augs = augmentations()
    names = list(names or augs)
    test_loader = DataLoader(subset("test", range(10)), batch_size=512)
    rows = []
    for name in names:
        accs = []
        for seed in seeds:
            torch.manual_seed(seed)
            base = subset("train", range(10), per_class, seed=seed)
            loader = DataLoader(Augmented(base, augs[name]), batch_size=32, shuffle=True,
                                generator=torch.Generator().manual_seed(seed))
            model = DigitsCNN().to(device)
            train(model, loader, epochs=max(1, math.ceil(steps / len(loader))), lr=3e-3, progress=False)
            accs.append(evaluate(model, test_loader)["acc"])
        rows.append({"augmentation": name, "test_acc": sum(accs) / len(accs)})
    return rows


def flipped_accuracy_per_class(model: nn.Module) -> dict[int, tuple[float, float]]:
    """Per digit: accuracy on the test images as they are, and mirrored left–right (07)."""
    device = model_device(model)
    x, y = tensors(subset("test", range(10)))
    x = x.to(device)
    y = y.to(device)
    model.eval()
    with torch.no_grad():
        plain = model(x).argmax(1) == y
        flipped = model(torch.flip(x, dims=[-1])).argmax(1) == y
    return {c: (plain[y == c].float().mean().item(), flipped[y == c].float().mean().item()) for c in range(10)}


# --- plots ---------------------------------------------------------------------------------------------

def plot_strategies(rows: list[dict], label: str = ""):
    """Test accuracy against labelled images per class, one line per mode; time per epoch (07)."""
    import matplotlib.pyplot as plt

    from .plots import finish

    fig, ax = plt.subplots(1, 2, figsize=(11, 3.6), gridspec_kw={"width_ratios": [3, 2]})
    shots = sorted({r["shots"] for r in rows})
    for mode, name in MODES.items():
        rs = [r for r in rows if r["mode"] == mode]
        ax[0].plot([r["shots"] for r in rs], [r["test_acc"] for r in rs], "o-", label=name)
    ax[0].set(xscale="log", xlabel="labelled images per class (digits 5–9)", ylabel="test accuracy",
              title="pretrained on digits 0–4, adapted to 5–9")
    ax[0].set_xticks(shots, [str(k) for k in shots])
    ax[0].legend(fontsize=7)
    ax[0].grid(alpha=0.3)
    last = [r for r in rows if r["shots"] == shots[-1]]
    ax[1].barh([MODES[r["mode"]] for r in last], [1e3 * r["sec_per_epoch"] for r in last], color=[f"C{i}" for i in range(len(last))])
    ax[1].set(xlabel=f"ms per epoch ({shots[-1]} images per class)", title="fewer trainable parameters, faster epochs")
    ax[1].tick_params(axis="y", labelsize=7)
    ax[1].invert_yaxis()
    if label:
        fig.suptitle(label, fontsize=9)
    fig.tight_layout()
    return finish(fig)


def plot_augmentation_grid(images: torch.Tensor, names: list[str]):
    """Rows: augmentations; columns: the same digits (07)."""
    import matplotlib.pyplot as plt

    from .plots import finish

    n = len(images) // len(names)
    fig, axes = plt.subplots(len(names), n, figsize=(n * 0.9, len(names) * 0.95))
    for r, name in enumerate(names):
        for c in range(n):
            ax = axes[r, c]
            ax.imshow(images[r * n + c, 0], cmap="gray_r", vmin=0, vmax=1)
            ax.set_xticks([])
            ax.set_yticks([])
        axes[r, 0].set_ylabel(name, rotation=0, ha="right", va="center", fontsize=8)
    fig.tight_layout()
    return finish(fig)


def plot_flip_per_class(per_class: dict[int, tuple[float, float]]):
    """Per digit: accuracy on normal vs mirrored test images (07)."""
    import matplotlib.pyplot as plt

    from .plots import finish

    fig, ax = plt.subplots(figsize=(7, 3))
    digits = list(per_class)
    ax.bar([d - 0.2 for d in digits], [per_class[d][0] for d in digits], 0.4, label="as they are")
    ax.bar([d + 0.2 for d in digits], [per_class[d][1] for d in digits], 0.4, label="mirrored left–right")
    ax.set(xticks=digits, xlabel="digit", ylabel="test accuracy", title="a mirrored 2 is not a 2")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    return finish(fig)


EXERCISES = [
    Exercise("07.head_params", "int", digest="9fc041e28b31b4a5679f10da8c7a21fc6bfd62406734fef4a8445781c8d6f54e",
             hint="A Linear layer has in_features × out_features weights and out_features biases.",
             why="The whole head is tiny next to the backbone: training only it is cheap."),
    Exercise("07.frozen_params", "int", digest="4b96f086adead3934bd53b359eaba59c0278165ce045d8b11f19ec07511acc4b",
             hint="Only the new head trains: count its two Linear layers' weights and biases.",
             why="count_parameters(model)['trainable'] says the same."),
    Exercise("07.frozen_tensors", "int", digest="84b2a4270650e23a69ab6d6d7ccf1c351a3c4b1eb83b0f8c15b4e4246fadc349",
             hint="Which layers are frozen, and which tensors does each of them have?",
             why="frozen_state() returns exactly these tensors, compared before and after training."),
]
