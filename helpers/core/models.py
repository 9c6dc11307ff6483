"""The course's model family: a small CNN and an MLP for 8×8 digits (00_setup onwards).

Both are split into ``features`` (the backbone) and ``classifier`` (the head), which notebook 07
freezes and replaces, and notebook 01 splits across devices.
"""
from __future__ import annotations

import torch
from torch import nn


class DigitsCNN(nn.Module):
    """Two 3×3 convolutions, a 2×2 max-pool, and a two-layer head: ~40 k parameters for 1×8×8 input."""

    def __init__(self, channels: tuple[int, int] = (16, 32), hidden: int = 64, num_classes: int = 10,
                 in_channels: int = 1, image_size: int = 8) -> None:
        super().__init__()
        for n, v in (("hidden", hidden), ("num_classes", num_classes), ("in_channels", in_channels)):
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{n} must be a positive int, got {v!r}")
        if len(channels) != 2 or any(not isinstance(c, int) or c < 1 for c in channels):
            raise ValueError(f"channels must be two positive ints, e.g. (16, 32); got {channels!r}")
        if image_size % 2:
            raise ValueError(f"image_size must be even (a 2×2 pool halves it), got {image_size}")
        c1, c2 = channels
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, c1, 3, padding=1), nn.ReLU(),
            nn.Conv2d(c1, c2, 3, padding=1), nn.ReLU(),
            nn.MaxPool2d(2), nn.Flatten(),
            nn.Linear(c2 * (image_size // 2) ** 2, hidden), nn.ReLU(),
        )
        self.classifier = nn.Linear(hidden, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


class MLP(nn.Module):
    """A multi-layer perceptron on flattened images; ``hidden`` gives the width of each layer."""

    def __init__(self, in_features: int = 64, hidden: tuple[int, ...] = (128,), num_classes: int = 10) -> None:
        super().__init__()
        sizes = (in_features, *hidden)
        if any(not isinstance(s, int) or s < 1 for s in (*sizes, num_classes)):
            raise ValueError(f"layer sizes must be positive ints, got in={in_features}, hidden={hidden}, "
                             f"out={num_classes}")
        layers: list[nn.Module] = [nn.Flatten()]
        for a, b in zip(sizes[:-1], sizes[1:]):
            layers += [nn.Linear(a, b), nn.ReLU()]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(sizes[-1], num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


MODELS = {"cnn": DigitsCNN, "mlp": MLP}


def build_model(name: str = "cnn", **kwargs) -> nn.Module:
    """A course model by name: ``"cnn"`` or ``"mlp"``; keyword arguments go to its constructor (00)."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose one of {sorted(MODELS)}")
    return MODELS[name](**kwargs)


def count_parameters(model: nn.Module) -> dict[str, int]:
    """Trainable, frozen and total parameter counts (00_setup, 07_transfer_learning)."""
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    return {"trainable": trainable, "frozen": total - trainable, "total": total}
