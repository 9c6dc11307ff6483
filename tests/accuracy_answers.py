"""Answers to notebook 00's accuracy exercise (``00.accuracy_no_grad``), right and wrong, shared by
tests/test_setup_exercises.py: right ones in two forms, wrappers of the course's evaluate(), the classic mistakes."""
from __future__ import annotations

import functools

import torch

import helpers
from helpers import evaluate
from helpers.core import train as train_module


EX = "00.accuracy_no_grad"


def right(model, loader):
    was = model.training
    model.eval()
    correct, seen = 0, 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
            seen += len(y)
    model.train(was)
    return correct / max(seen, 1)


def leaves_the_model_in_eval_mode(model, loader):   # right answer, but the training after it runs in eval mode
    model.eval()
    correct, seen = 0, 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
            seen += len(y)
    return correct / seen


def freezes_the_parameters_instead_of_no_grad(model, loader):   # builds no graph, but training stops updating
    was = model.training
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    correct, seen = 0, 0
    for x, y in loader:
        correct += (model(x).argmax(1) == y).sum().item()
        seen += len(y)
    model.train(was)
    return correct / seen


def freezes_and_restores_the_parameters(model, loader):   # clumsy but harmless: accepted
    flags = [p.requires_grad for p in model.parameters()]
    for p in model.parameters():
        p.requires_grad_(False)
    try:
        return right(model, loader)
    finally:
        for p, f in zip(model.parameters(), flags):
            p.requires_grad_(f)


def right_with_inference_mode_on_the_models_device(model, loader):
    device = next(model.parameters()).device
    was = model.training
    model.eval()
    correct, seen = 0, 0
    with torch.inference_mode():
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            correct += int((model(x).argmax(dim=1) == y).sum())
            seen += y.numel()
    model.train(was)
    return correct / seen


def wraps_the_reference(model, loader):
    return evaluate(model, loader)["acc"]


def wraps_it_through_the_package(model, loader):
    return helpers.core.train.evaluate(model, loader)["acc"]


def wraps_it_imported_inside(model, loader):
    from helpers.core.train import evaluate as reference
    return reference(model, loader)["acc"]


def wraps_it_and_hides_the_error(model, loader):
    try:
        return evaluate(model, loader)["acc"]
    except Exception:
        return right(model, loader)


def wraps_it_as_a_default_argument(model, loader, _ev=evaluate):
    return _ev(model, loader)["acc"]


def wraps_it_in_a_partial(model, loader, _ev=functools.partial(evaluate, device=None)):
    return _ev(model, loader)["acc"]


def _closure():
    ev = train_module.evaluate
    return lambda model, loader: ev(model, loader)["acc"]


wraps_it_in_a_closure = _closure()


def switches_autograd_off_for_good(model, loader):   # passes the graph test, breaks every later training step
    torch.set_grad_enabled(False)
    correct, seen = 0, 0
    for x, y in loader:
        correct += (model(x).argmax(1) == y).sum().item()
        seen += len(y)
    return correct / seen


def builds_a_graph(model, loader):          # the classic mistake: evaluation with autograd on
    correct, seen = 0, 0
    for x, y in loader:
        correct += (model(x).argmax(1) == y).sum().item()
        seen += len(y)
    return correct / seen


def averages_per_batch(model, loader):      # the other classic: the small last batch weighs as much as a full one
    accs = []
    with torch.no_grad():
        for x, y in loader:
            accs.append((model(x).argmax(1) == y).float().mean().item())
    return sum(accs) / len(accs)


def counts_batches_not_samples(model, loader):
    correct, seen = 0, 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
            seen += 1
    return correct / seen


def returns_a_tensor(model, loader):
    correct, seen = 0, 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum()
            seen += len(y)
    return correct / seen


def _first_case_value() -> float:
    """What the check's first case should give: the value a student could copy from an earlier message."""
    from torch.utils.data import DataLoader

    from helpers import DigitsCNN, load_datasets
    torch.manual_seed(0)
    return right(DigitsCNN(), DataLoader(load_datasets("digits")["val"], batch_size=64))
