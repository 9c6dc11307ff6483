"""Notebook 00's exercises (helpers/setup/lesson.py): right answers pass; wrapping the course's evaluate(), a
hard-coded value and the classic mistakes are refused; no message shows the expected answer."""
from __future__ import annotations

import os

import pytest
import torch

import helpers
from helpers import evaluate
from helpers.core import train as train_module
from helpers.core.checks import verify
from helpers.setup import lesson

EX = "00.accuracy_no_grad"


def right(model, loader):
    correct, seen = 0, 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
            seen += len(y)
    return correct / max(seen, 1)


def right_with_inference_mode_on_the_models_device(model, loader):
    device = next(model.parameters()).device
    correct, seen = 0, 0
    with torch.inference_mode():
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            correct += int((model(x).argmax(dim=1) == y).sum())
            seen += y.numel()
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
    return lesson._right_fraction(DigitsCNN(), DataLoader(load_datasets("digits")["val"], batch_size=64))


@pytest.mark.parametrize("fn", [right, right_with_inference_mode_on_the_models_device])
def test_right_answers_pass(fn):
    ok, msg = verify(EX, fn)
    assert ok and msg.startswith("✅"), msg


@pytest.mark.parametrize("fn", [wraps_the_reference, wraps_it_through_the_package, wraps_it_imported_inside,
                                wraps_it_and_hides_the_error])
def test_wrapping_the_course_evaluate_is_refused_and_the_reference_is_put_back(fn):
    ok, msg = verify(EX, fn)
    assert not ok and "calls the course's evaluate()" in msg, msg
    assert helpers.evaluate is train_module.evaluate is evaluate          # restored everywhere after the check
    assert globals()["evaluate"] is train_module.evaluate


def test_a_hard_coded_value_is_refused_even_the_first_cases_right_one():
    value = _first_case_value()
    ok, msg = verify(EX, lambda model, loader: value)
    assert not ok and "is not the fraction" in msg, msg
    ok, msg = verify(EX, lambda model, loader: 0.0963)
    assert not ok


@pytest.mark.parametrize("fn, says", [(builds_a_graph, "bytes of activations"), (averages_per_batch, "not the fraction"),
                                      (counts_batches_not_samples, "not the fraction"),
                                      (returns_a_tensor, "return a Python number")])
def test_the_classic_mistakes_are_refused_with_a_hint(fn, says):
    ok, msg = verify(EX, fn)
    assert not ok and says in msg and "Hint" in msg, msg


@pytest.mark.parametrize("fn", [averages_per_batch, counts_batches_not_samples, lambda m, l: 0.5])
def test_no_message_shows_the_expected_value(fn):
    value = _first_case_value()
    msg = verify(EX, fn)[1]
    assert f"{value:.4f}" not in msg and f"{value:.4g}" not in msg and "evaluate() says" not in msg


def test_the_threads_question_needs_the_division(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    assert verify("00.threads_two_processes", 4)[0]
    assert not verify("00.threads_two_processes", 8)[0]      # the core count copied from the device table
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    assert verify("00.threads_two_processes", 1)[0] and not verify("00.threads_two_processes", 0)[0]


def test_the_visible_gpus_question_is_not_the_gpu_count(monkeypatch):
    from helpers.core import device
    monkeypatch.setattr(device, "nvml_gpus", lambda: [{"index": i} for i in range(4)])
    monkeypatch.setattr(device, "gpu_count", lambda: 4)
    assert verify("00.gpus_visible_0", 1)[0] and not verify("00.gpus_visible_0", 4)[0]
    monkeypatch.setattr(device, "nvml_gpus", lambda: [])
    monkeypatch.setattr(device, "gpu_count", lambda: 0)
    assert verify("00.gpus_visible_0", 0)[0] and not verify("00.gpus_visible_0", 1)[0]
