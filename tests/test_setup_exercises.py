"""Notebook 00's exercises (helpers/setup/lesson.py): right answers pass; wrapping the course's evaluate(), a
hard-coded value and the classic mistakes are refused; no message shows the expected answer."""
from __future__ import annotations

import pytest
import torch

import helpers
from helpers import evaluate
from helpers.core import train as train_module
from helpers.core.checks import verify
from helpers.setup import lesson, readings

from accuracy_answers import (EX, _first_case_value, averages_per_batch, builds_a_graph, counts_batches_not_samples,
                              freezes_and_restores_the_parameters, freezes_the_parameters_instead_of_no_grad,
                              leaves_the_model_in_eval_mode, returns_a_tensor, right,
                              right_with_inference_mode_on_the_models_device, switches_autograd_off_for_good,
                              wraps_it_and_hides_the_error, wraps_it_as_a_default_argument, wraps_it_imported_inside,
                              wraps_it_in_a_closure, wraps_it_in_a_partial, wraps_it_through_the_package,
                              wraps_the_reference)


@pytest.mark.parametrize("fn", [right, right_with_inference_mode_on_the_models_device])
def test_right_answers_pass(fn):
    ok, msg = verify(EX, fn)
    assert ok and msg.startswith("✅"), msg


@pytest.mark.parametrize("fn", [wraps_the_reference, wraps_it_through_the_package, wraps_it_imported_inside,
                                wraps_it_and_hides_the_error, wraps_it_as_a_default_argument, wraps_it_in_a_partial,
                                wraps_it_in_a_closure])
def test_wrapping_the_course_evaluate_is_refused_and_the_reference_is_put_back(fn):
    ok, msg = verify(EX, fn)
    assert not ok and "calls the course's evaluate()" in msg, msg
    assert helpers.evaluate is train_module.evaluate is evaluate          # restored everywhere after the check
    assert globals()["evaluate"] is train_module.evaluate and not train_module._REFUSE   # evaluate() works again


def test_leaving_autograd_off_is_refused_and_autograd_is_switched_back_on():
    ok, msg = verify(EX, switches_autograd_off_for_good)
    assert not ok and "left it off" in msg and "Hint" in msg, msg
    assert torch.is_grad_enabled()


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


def test_the_threads_question_rounds_down_and_divides():
    assert verify("00.threads_3_on_16", 5)[0]
    for wrong in (16, 8, 6, 1, 5.33):       # the core count, the two-process answer, rounded up, the launcher default, unrounded
        assert not verify("00.threads_3_on_16", wrong)[0], wrong


def test_the_visible_gpus_question_renumbers_in_the_listed_order():
    assert verify("00.gpus_visible_2_0_3", [3, 0])[0]
    for wrong in ([3, 1],                    # cuda:1 taken as the machine's GPU 1
                  [3, 2], [3, 3],            # the list read from the other end, or sorted (0, 2, 3)
                  [4, 0], [4, 1], [2, 0],    # all GPUs; a list of two
                  [2, 3], [3, 2, 0, 3]):     # the question's own numbers typed back
        assert not verify("00.gpus_visible_2_0_3", wrong)[0], wrong


@pytest.mark.parametrize("fn, says", [(leaves_the_model_in_eval_mode, "evaluation mode"),
                                      (freezes_the_parameters_instead_of_no_grad, "requires_grad=False")])
def test_leaving_the_model_changed_is_refused(fn, says):
    ok, msg = verify(EX, fn)
    assert not ok and says in msg and "Hint" in msg, msg


def ends_with_an_unconditional_train(model, loader):   # right, but a model that came in eval mode goes back training
    model.eval()
    correct, seen = 0, 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
            seen += len(y)
    model.train()
    return correct / seen


def test_a_model_that_came_in_evaluation_mode_must_go_back_in_it():
    ok, msg = verify(EX, ends_with_an_unconditional_train)
    assert not ok and "came in evaluation mode" in msg and "Hint" in msg, msg


def unfreezes_everything_after(model, loader):   # restores no flags: requires_grad_(True) trains a frozen backbone
    model.requires_grad_(False)
    try:
        return right(model, loader)
    finally:
        model.requires_grad_(True)


def test_unfreezing_parameters_that_came_frozen_is_refused():
    ok, msg = verify(EX, unfreezes_everything_after)
    assert not ok and "came frozen" in msg and "requires_grad" in msg and "Hint" in msg, msg


def test_freezing_and_restoring_the_parameters_passes():
    ok, msg = verify(EX, freezes_and_restores_the_parameters)
    assert ok, msg


def forgets_eval_mode(model, loader):       # right in every way but one: BatchNorm keeps using the batch's statistics
    correct, seen = 0, 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
            seen += len(y)
    return correct / seen


def ignores_the_models_device(model, loader):
    return right(model, loader)             # model.eval() and no graph, but batches stay on the CPU


def test_forgetting_model_eval_is_refused():
    ok, msg = verify(EX, forgets_eval_mode)
    assert not ok and "training mode" in msg and "Hint" in msg, msg


def test_no_function_of_the_lesson_module_counts_the_answer_for_the_student():
    """A student who looks in helpers.setup's modules finds no (model, loader) function that returns the fraction."""
    import inspect

    from torch.utils.data import DataLoader

    from helpers import DigitsCNN, load_datasets
    torch.manual_seed(0)
    model, loader = DigitsCNN().eval(), DataLoader(load_datasets("digits")["val"], batch_size=64)
    value = right(model, loader)
    functions = [fn for module in (lesson, readings) for _, fn in inspect.getmembers(module, inspect.isfunction)
                 if fn.__module__ == module.__name__]
    assert readings.sample_losses in functions
    for fn in functions:
        try:
            got = fn(model, loader)
        except Exception:
            continue
        assert not (isinstance(got, (int, float)) and abs(got - value) < 1e-9), fn.__name__


@pytest.mark.skipif(not (torch.cuda.is_available() or torch.backends.mps.is_available()), reason="needs a GPU or MPS")
def test_leaving_batches_on_the_cpu_is_refused_where_a_gpu_exists():
    ok, msg = verify(EX, ignores_the_models_device)
    assert not ok and "raised" in msg, msg
    assert verify(EX, right_with_inference_mode_on_the_models_device)[0]


def test_the_no_pool_question_refuses_the_helper_calls_and_near_misses():
    from helpers import DigitsCNN, count_parameters
    assert verify("00.params_hidden128", 32 * 8 * 8 * 128 + 128)[0]
    for wrong in (count_parameters(DigitsCNN(hidden=128))["total"], count_parameters(DigitsCNN())["total"],
                  32 * 4 * 4 * 128 + 128,          # the layer as it is, with the pool
                  32 * 8 * 8 * 128,                # no biases
                  32 * 8 * 8 * 64 + 64):           # the default hidden width
        assert not verify("00.params_hidden128", wrong)[0], wrong


def test_the_drop_last_question_refuses_the_batch_count():
    from helpers import make_loaders
    assert verify("00.batches_of_100", 57)[0]
    for wrong in (len(make_loaders(batch_size=100)["train"]), 12, 100 - 57, 1257, 0):
        assert not verify("00.batches_of_100", wrong)[0], wrong


def hands_the_model_back_elsewhere(model, loader):   # right, then moves the model (to meta: testable on a CPU)
    value = right(model, loader)
    model.to("meta")
    return value


def moves_the_model_to_the_cpu(model, loader):       # the classic: brings the model to the batches
    model.to("cpu")
    return right(model, loader)


def hands_it_back_in_double(model, loader):          # right, then changes the parameters' dtype
    value = right(model, loader)
    model.double()
    return value


def nudges_the_weights(model, loader):               # right, then changes a parameter's values
    value = right(model, loader)
    with torch.no_grad():
        next(model.parameters()).add_(1e-3)
    return value


def warms_up_in_training_mode_first(model, loader):   # a train-mode forward moves BatchNorm's running statistics
    with torch.no_grad():
        model(next(iter(loader))[0])
    return right(model, loader)


def test_changing_batchnorm_statistics_before_evaluating_is_refused():
    ok, msg = verify(EX, warms_up_in_training_mode_first)
    assert not ok and "buffers" in msg and "Hint" in msg, msg


def test_a_model_handed_back_on_another_device_is_refused():
    ok, msg = verify(EX, hands_the_model_back_elsewhere)
    assert not ok and "handed the model back on meta" in msg and "Hint" in msg, msg


@pytest.mark.parametrize("fn", [hands_it_back_in_double, nudges_the_weights])
def test_a_model_handed_back_with_changed_parameters_is_refused(fn):
    ok, msg = verify(EX, fn)
    assert not ok and "changed the model's parameters" in msg and "Hint" in msg, msg


def test_the_passing_message_says_what_a_cpu_only_machine_could_not_test():
    msg = " ".join(verify(EX, right)[1].split())
    assert msg.startswith("✅") and "could not test that your batches go where the model is" in msg, msg


@pytest.mark.skipif(not (torch.cuda.is_available() or torch.backends.mps.is_available()), reason="needs a GPU or MPS")
def test_moving_the_model_to_the_cpu_is_refused_where_a_gpu_exists():
    ok, msg = verify(EX, moves_the_model_to_the_cpu)
    assert not ok and "handed the model back on cpu" in msg, msg
