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
from ..core.i18n import tr
from ..core.models import DigitsCNN, count_parameters
from ..core.train import evaluate, train
from .recipe import MODES, TARGET, Augmented, augmentations, make_target_model, subset

__all__ = ["mode_name", "augmentation_name", "said", "compare_strategies", "binomial_se", "compare_to", "correctness_correlation", "correlation_note", "compare_step_times", "recorded_convolutions", "convolution_gradients", "augmentation_grid", "transform_cost", "augmentation_effect", "flipped_accuracy_per_class"]


def mode_name(mode: str) -> str:
    """The strategy ``mode`` (a key of ``MODES``) as a sentence names it, in the course's language (07)."""
    return {"scratch": tr("transfer.mode.scratch", "from scratch"),
            "head_only": tr("transfer.mode.head_only", "freeze all but the classifier"),
            "frozen": tr("transfer.mode.frozen", "freeze the convolutions, new head"),
            "finetune": tr("transfer.mode.finetune", "fine-tune the last conv layer + new head")}[mode]


def augmentation_name(name: str) -> str:
    """An augmentation of :func:`augmentations` (its key) as a sentence names it, in the course's language ("none":
    "no augmentation") (07)."""
    return {"none": tr("transfer.aug.none", "no augmentation"), "rotate ±15°": tr("transfer.aug.rotate", "rotate ±15°"),
            "shift ±1 px": tr("transfer.aug.shift", "shift ±1 px"),
            "random crop (pad 1)": tr("transfer.aug.crop", "random crop (pad 1)"),
            "resized crop": tr("transfer.aug.resized", "resized crop"),
            "horizontal flip": tr("transfer.aug.hflip", "horizontal flip"),
            "vertical flip": tr("transfer.aug.vflip", "vertical flip")}[name]


def said(verdict: str) -> str:
    """A verdict of :func:`compare_to` or :func:`compare_step_times` as a sentence says it, in the course's
    language: "beats", "trails", "is within noise of", "shorter", "longer" (07)."""
    return {"beats": tr("transfer.beats", "beats"), "trails": tr("transfer.trails", "trails"),
            "within noise": tr("transfer.within_noise", "is within noise of"),
            "shorter": tr("transfer.shorter", "shorter"), "longer": tr("transfer.longer", "longer")}[verdict]


def compare_strategies(pretrained: nn.Module, shots: Sequence[int] = (5, 10, 50), steps: int = 150,
                       seeds: Sequence[int] = (0, 1, 2), lr: float = 3e-3) -> list[dict]:
    """Test accuracy (mean and per seed) and seconds per optimizer step of each mode in ``MODES``, with few labels
    per class, each trained with Adam at ``lr`` for whole epochs of at least ``steps`` steps (the count is in
    ``"steps"``) (07).

    Also, per row: ``"epoch_step_secs"``, every epoch's seconds per step over all seeds (their spread);
    ``"correct"``, per test image the fraction of seeds whose model answered it right (for
    :func:`correctness_correlation`).
    """
    test_loader = DataLoader(subset("test", TARGET), batch_size=512)
    x_test, y_test = tensors(test_loader.dataset)
    rows = []
    for k in shots:
        for mode in MODES:
            accs, secs, epoch_secs, right = [], [], [], []
            for seed in seeds:
                model = make_target_model(pretrained, mode, seed=seed)  # on the pretrained model's device
                loader = DataLoader(subset("train", TARGET, k, seed=seed), batch_size=32, shuffle=True,
                                    generator=torch.Generator().manual_seed(seed))
                # whole epochs, at least ``steps`` optimizer steps whatever the number of labels
                epochs = max(1, math.ceil(steps / len(loader)))
                hist = train(model, loader, epochs=epochs, lr=lr, progress=False)
                accs.append(evaluate(model, test_loader)["acc"])
                secs.append(sum(hist.epoch_seconds) / (epochs * len(loader)))
                epoch_secs += [s / len(loader) for s in hist.epoch_seconds]
                model.eval()
                with torch.no_grad():
                    right.append((model(x_test.to(model_device(model))).argmax(1).cpu() == y_test).float())
            rows.append({"shots": k, "mode": mode, "test_acc": sum(accs) / len(accs), "seed_accs": accs,
                         "steps": epochs * len(loader), "sec_per_step": sum(secs) / len(secs),
                         "epoch_step_secs": epoch_secs, "correct": torch.stack(right).mean(0), "lr": lr,
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
    test-set part of the noise when the two models tend to miss the same images (their per-image
    correctness positively correlated, see :func:`correctness_correlation`), and leaves out
    seed-to-seed variation; an accuracy averaged over seeds is treated as one model's on ``n`` images,
    which overstates its test-set noise too: per image, the share of seeds right lies in [0, 1], so
    its variance is at most p(1 − p), a 0/1 outcome's with the same mean p.
    """
    noise = 2 * math.sqrt(binomial_se(a, n) ** 2 + binomial_se(b, n) ** 2)
    return ("within noise" if abs(a - b) <= noise else "beats" if a > b else "trails"), noise


def correctness_correlation(a: torch.Tensor, b: torch.Tensor) -> float:
    """Pearson correlation, over the same test images, of two models' per-image correctness (07).

    ``a``, ``b``: per image, 1 where the model answered right, 0 where not (or a fraction of seeds).
    Positive: the two tend to miss the same images, and the variance of their accuracies'
    difference is below the sum of their variances (by twice their covariance). ``nan`` where
    either is constant (e.g. every image right), which has no correlation.
    """
    a, b = a.double() - a.double().mean(), b.double() - b.double().mean()
    den = math.sqrt(float((a * a).sum() * (b * b).sum()))
    return float((a * b).sum()) / den if den > 0 else math.nan


def correlation_note(corr: dict) -> str:
    """What the correlations of :func:`correctness_correlation`, one per comparison, say about
    :func:`compare_to`'s rule (07). ``nan`` (a model right on every image) counts as not positive.

    Positive correlations show only that the rule overstated the test-set part of the noise; the
    seed-to-seed part is not in the rule, whatever their sign.
    """
    pos = [c for c in corr.values() if c > 0]
    seeds = tr("transfer.seeds_part", "the seed-to-seed part is not in it (per-seed accuracies above)")
    if corr and len(pos) == len(corr):
        return (tr("transfer.r_all", "r: the correlation of the two models' per-image correctness (each averaged over "
                   "the seeds), positive in all {n} comparisons:", n=len(corr)) + "\n"
                + tr("transfer.r_all_means", "the models tend to miss the same images, so the rule overstated the "
                     "test-set part of the noise; {seeds}.", seeds=seeds))
    return (tr("transfer.r_some", "r: the correlation of the two models' per-image correctness (each averaged over "
               "the seeds), positive in {pos} of {n} comparisons:", pos=len(pos), n=len(corr)) + "\n"
            + tr("transfer.r_some_means", "where it is not, the rule need not overstate the test-set part of the "
                 "noise; {seeds}.", seeds=seeds))


def convolution_gradients(model: nn.Module, x: torch.Tensor) -> list[dict]:
    """Each convolution gradient that the backward pass of ``model(x).sum()`` asks for (07).

    Runs that backward pass (``torch.autograd.grad`` on the trainable parameters: no ``.grad`` is
    written) under a dispatch mode that records every ``aten.convolution_backward`` call. Per call:
    ``"weight"``, the convolution's weight shape; ``"output_mask"``, which of the (input, weight,
    bias) gradients autograd asked it for; ``"macs"``, the multiply-adds per sample of the forward
    convolution (output elements × weights per output channel), which its input gradient and its
    weight gradient each take about as many of.
    """
    from torch.utils._python_dispatch import TorchDispatchMode

    calls = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func is torch.ops.aten.convolution_backward.default:
                grad_out, weight = args[0], args[2]
                mask = kwargs.get("output_mask", args[-1])
                calls.append({"weight": tuple(weight.shape), "output_mask": tuple(bool(m) for m in mask),
                              "macs": grad_out[0].numel() * weight[0].numel()})
            return func(*args, **kwargs)

    params = [p for p in model.parameters() if p.requires_grad]
    out = model(x).sum()
    with Record():
        torch.autograd.grad(out, params)
    return calls


def compare_step_times(secs: Sequence[float], base: Sequence[float]) -> tuple[str, tuple, tuple]:
    """Per-epoch seconds per step of one run against a baseline's: ("shorter" | "longer" | "not separated",
    its quartiles, the baseline's quartiles), each quartiles ``(lower, median, upper)`` (07).

    A difference counts only where the middle halves of the two sets of epochs do not overlap:
    the upper quartile of one below the lower quartile of the other.
    """
    q = lambda v: tuple(torch.quantile(torch.tensor(list(v), dtype=torch.float64),
                                       torch.tensor([0.25, 0.5, 0.75], dtype=torch.float64)).tolist())
    a, b = q(secs), q(base)
    return ("shorter" if a[2] < b[0] else "longer" if a[0] > b[2] else "not separated"), a, b


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
    measure; all of them by default. Each model trains for whole epochs, at least ``steps`` optimizer
    steps (the count is in ``"steps"``).
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
            epochs = max(1, math.ceil(steps / len(loader)))
            train(model, loader, epochs=epochs, lr=3e-3, progress=False)
            accs.append(evaluate(model, test_loader)["acc"])
        rows.append({"augmentation": name, "test_acc": sum(accs) / len(accs), "seed_accs": accs,
                     "steps": epochs * len(loader), "n_test": len(test_loader.dataset)})
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
