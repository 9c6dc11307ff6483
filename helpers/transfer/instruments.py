"""Transfer learning and augmentation, measured: strategies with few labels, each augmentation's effect (07)."""
from __future__ import annotations

import math
import time
from typing import Callable, Sequence

import torch
from torch import nn
from torch.utils.data import DataLoader

from ..core.data import tensors
from ..core.device import model_device
from ..core.models import DigitsCNN, count_parameters
from ..core.train import evaluate, train
from .recipe import MODES, TARGET, Augmented, augmentations, make_target_model, subset

__all__ = ["compare_strategies", "binomial_se", "compare_to", "recorded_convolutions", "augmentation_grid", "transform_cost", "augmentation_effect", "flipped_accuracy_per_class"]


def compare_strategies(pretrained: nn.Module, shots: Sequence[int] = (5, 10, 50), steps: int = 150,
                       seeds: Sequence[int] = (0, 1, 2)) -> list[dict]:
    """Test accuracy (mean and per seed) and seconds per optimizer step of each mode in ``MODES``, with few labels
    per class, each trained for whole epochs of at least ``steps`` steps (the count is in ``"steps"``) (07)."""
    test_loader = DataLoader(subset("test", TARGET), batch_size=512)
    rows = []
    for k in shots:
        for mode in MODES:
            accs, secs = [], []
            for seed in seeds:
                model = make_target_model(pretrained, mode, seed=seed)  # on the pretrained model's device
                loader = DataLoader(subset("train", TARGET, k, seed=seed), batch_size=32, shuffle=True,
                                    generator=torch.Generator().manual_seed(seed))
                # whole epochs, at least ``steps`` optimizer steps whatever the number of labels
                epochs = max(1, math.ceil(steps / len(loader)))
                hist = train(model, loader, epochs=epochs, lr=3e-3, progress=False)
                accs.append(evaluate(model, test_loader)["acc"])
                secs.append(sum(hist.epoch_seconds) / (epochs * len(loader)))
            rows.append({"shots": k, "mode": mode, "test_acc": sum(accs) / len(accs), "seed_accs": accs,
                         "steps": epochs * len(loader), "sec_per_step": sum(secs) / len(secs),
                         "n_test": len(test_loader.dataset), "trainable": count_parameters(model)["trainable"]})
    return rows


def binomial_se(acc: float, n: int) -> float:
    """Standard error of an accuracy measured on ``n`` test images: sqrt(p(1 − p)/n) (07)."""
    return math.sqrt(max(acc * (1 - acc), 0.0) / n)


def compare_to(a: float, b: float, n: int) -> tuple[str, float]:
    """``a`` against ``b``, both accuracies on the same ``n`` test images: ("beats" | "trails" | "within noise", 2·SE) (07).

    A difference counts only beyond twice the standard error of the difference of two binomial
    estimates, 2·sqrt(SE(a)² + SE(b)²); smaller ones are what another test set, or another seed,
    could reverse. A rough rule: it treats the two accuracies as independent, which overstates the
    noise when both models answer the same test images, and leaves out seed-to-seed variation.
    """
    noise = 2 * math.sqrt(binomial_se(a, n) ** 2 + binomial_se(b, n) ** 2)
    return ("within noise" if abs(a - b) <= noise else "beats" if a > b else "trails"), noise


def recorded_convolutions(model: nn.Module, x: torch.Tensor) -> int:
    """How many convolutions autograd recorded in ``model(x)``'s graph, i.e. the backward pass will enter (07)."""
    todo, seen, convs = [model(x).sum().grad_fn], set(), 0
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        convs += "Convolution" in type(node).__name__
        todo.extend(f for f, _ in node.next_functions)
    return convs


def augmentation_grid(n: int = 6, seed: int = 0) -> tuple[torch.Tensor, list[str]]:
    """The same ``n`` digits through each augmentation: images ``[len(augs) * n, 1, 8, 8]`` and row names (07)."""
    torch.manual_seed(seed)
    x, _ = tensors(subset("train", range(10), per_class=1, seed=seed))
    x = x[:n]
    rows, names = [], []
    for name, tf in augmentations(p_flip=1.0).items():  # flips drawn every time: the grid shows what they do
        rows.append(torch.stack([tf(img) for img in x]))
        names.append(name)
    return torch.cat(rows), names


def transform_cost(transforms: dict[str, Callable], n: int = 500, seed: int = 0) -> list[dict]:
    """Each transform on ``n`` digit images one by one, as a DataLoader's workers apply them: output shape, µs per image (07)."""
    x, _ = tensors(subset("train", range(10), per_class=n // 10 + 1, seed=seed))
    x = x[:n]
    rows = []
    for name, tf in transforms.items():
        torch.manual_seed(seed)
        tf(x[0])  # warm-up
        t0 = time.perf_counter()
        out = [tf(img) for img in x]
        rows.append({"transform": name, "shape": tuple(out[0].shape), "us_per_image": (time.perf_counter() - t0) / n * 1e6})
    return rows


def augmentation_effect(per_class: int = 10, steps: int = 300, seeds: Sequence[int] = (0, 1, 2),
                        names: Sequence[str] | None = None, device: str | torch.device = "cpu",
                        extra: dict[str, Callable] | None = None) -> list[dict]:
    """Test accuracy on all 10 digits, trained from scratch on ``device`` with ``per_class`` labels, per augmentation (07).

    ``names``: which of :func:`augmentations` (and of ``extra``, your own named transforms) to
    measure; all of them by default.
    """
    augs = {**augmentations(), **(extra or {})}
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
        rows.append({"augmentation": name, "test_acc": sum(accs) / len(accs), "seed_accs": accs,
                     "n_test": len(test_loader.dataset)})
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
