"""Notebook 00's exercises (helpers/setup/lesson.py): right answers pass; wrapping the course's evaluate(), a
hard-coded value and the classic mistakes are refused; no message shows the expected answer."""
from __future__ import annotations

import functools

import pytest
import torch

import helpers
from helpers import evaluate
from helpers.core import train as train_module
from helpers.core.checks import verify
from helpers.setup import lesson, readings

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


def test_cpu_pressure_is_read_from_the_psi_some_total(tmp_path):
    f = tmp_path / "cpu"
    f.write_text("some avg10=1.00 avg60=2.00 avg300=3.00 total=123456\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=7\n")
    assert lesson.cpu_pressure_total(str(f)) == 123456          # the "some" line, not "full"
    assert lesson.cpu_pressure_total(str(tmp_path / "missing")) is None
    f.write_text("garbage\n")
    assert lesson.cpu_pressure_total(str(f)) is None


def test_cpu_pressure_during_the_runs_is_said_from_the_stall_share():
    waited = lesson.pressure_meaning(300_000, 1.5, steal_ticks=0, cpus=2)       # 0.3 s of 1.5 s: 20 %
    assert "300.0 ms" in waited and "20.00%" in waited and "may have gone to waiting" in waited, waited
    assert "no upper bound" in waited, waited   # the average's caveat in every branch, not only the calm ones
    assert "whose" in waited and "whole system" in waited, waited   # PSI does not attribute the wait
    calm = lesson.pressure_meaning(3_450, 1.15, steal_ticks=0, cpus=2)          # 0.3 %: printed in ms, not "0.00 s"
    assert "3.5 ms" in calm and "0.30%" in calm, calm
    assert "may have gone to waiting" not in calm and "under 1%" in calm, calm
    assert "at most" not in calm, calm   # psi.c: a non-idle-time-weighted average over CPUs, no bound on the waiting
    assert "per-CPU average" in calm and "no upper bound" in calm and "1/2" in calm, calm
    # psi.c weights each CPU by its non-idle time: 1/n only when the others are busy throughout, all when idle
    assert "all of it if the other CPU was idle, 1/2 if all were equally busy, less if the other CPU was busier" in calm, calm
    four = lesson.pressure_meaning(3_450, 1.15, steal_ticks=0, cpus=4)
    assert "all of it if the others were idle, 1/4 if all were equally busy, less if the others were busier" in four, four
    one = lesson.pressure_meaning(3_450, 1.15, steal_ticks=0, cpus=1)   # one CPU: the average is that CPU's own time
    assert "no upper bound" not in one and "that CPU's own" in one, one
    small_steal = lesson.pressure_meaning(15_000, 1.0, steal_ticks=0, cpus=2)   # 1.5 %: not small, and named
    assert "may have gone to waiting" in small_steal, small_steal
    assert "PSI's share (1.50%) is not small (1% or more); steal's is 0.00%" in small_steal, small_steal
    near = lesson.pressure_meaning(10_040, 1.0, steal_ticks=0, cpus=2)   # 1.004 %: printed so it reads as over 1%
    assert "(1.00%) is not small" in near, near
    assert "(1.00%) is not small" in lesson.pressure_meaning(9_960, 1.0, steal_ticks=0, cpus=2)   # judged as printed
    assert "0.99%" in lesson.pressure_meaning(9_940, 1.0, steal_ticks=0, cpus=2) and "under 1%" in \
        lesson.pressure_meaning(9_940, 1.0, steal_ticks=0, cpus=2)


def test_steal_time_is_read_from_proc_stat_and_said_beside_psi(tmp_path):
    f = tmp_path / "stat"
    f.write_text("cpu  5769807 508589 524513 1993805 14860 0 11884 29649 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n")
    assert readings.cpu_steal_total(str(f)) == 29649              # the all-CPU line's 8th value, not cpu0's
    assert readings.cpu_steal_total(str(tmp_path / "missing")) is None
    f.write_text("cpu  1 2 3 4 5 6 7\n")                         # a kernel without the steal column
    assert readings.cpu_steal_total(str(f)) is None
    stolen = lesson.pressure_meaning(3_000, 1.0, steal_ticks=10, hz=100, cpus=2)   # 0.1 s of 2 CPU-s: 5 %
    assert "10 tick(s) of 10 ms (between 90 and 110 ms)" in stolen and "5.00%" in stolen, stolen   # ±1 tick
    assert "PSI does not count" in stolen, stolen
    none = lesson.pressure_meaning(3_000, 1.0, steal_ticks=0, hz=100, cpus=2)   # zero ticks: under one tick, not "0 ms"
    assert "0 tick(s) of 10 ms (under 10 ms)" in none and "0 ms in" not in none, none
    assert "(between 0 and 20 ms)" in lesson.pressure_meaning(3_000, 1.0, steal_ticks=1, hz=100, cpus=2)
    assert "under 1%" not in stolen and "may have gone to waiting" in stolen, stolen   # PSI small, steal not
    assert "steal's share (5.00%) is not small (1% or more); PSI's is 0.30%" in stolen, stolen
    unknown = lesson.pressure_meaning(3_000, 1.0, steal_ticks=None)
    assert "not read here" in unknown and "not known" in unknown, unknown
    assert "both shares" not in unknown and "at most" not in unknown, unknown   # the small share is only this kernel's


def test_a_rise_in_validation_loss_is_called_overfitting_only_above_its_noise():
    import random
    rng = random.Random(0)
    at_lowest = [rng.expovariate(10) for _ in range(270)]
    train_loss = [2.0, 1.0, 0.5, 0.3, 0.2]
    # this run's case: a rise well inside the noise of 270 samples, the training loss still falling
    noisy = [v + rng.gauss(0.01, 0.3) for v in at_lowest]
    val = [1.0, 0.5, 0.1, 0.12, 0.1 + sum(noisy) / 270 - sum(at_lowest) / 270]
    text = readings.overfitting_verdict(train_loss, val, at_lowest, noisy)
    assert "within 2 standard errors" in text and "no rise in validation loss after epoch 3" in text, text
    assert "consistent with" not in text and "separate matter" not in text, text   # §5.2's overfitting is the gap
    assert "lowest of 5 on these same samples" in text, text   # the pick's bias, said in both branches
    # with the gap given: §5.2 defines overfitting by it, said from the numbers next to the noise test
    text = readings.overfitting_verdict(train_loss, val, at_lowest, noisy, fit=(val[-1] / 17, 1.0), val_acc=0.97)
    assert "no rise in validation loss after epoch 3" in text and "§5.2" in text, text
    assert "0.030 in accuracy (1.000 on the training set, 0.970 on validation)" in text, text
    assert f"({val[-1] / 17:.3g} on the training set, {val[-1]:.3g} on validation)" in text, text
    # §5.2 gives no threshold: no ratio and no label, however far apart the losses are
    for ratio in (1.5, 17, 1000):
        shown = readings.overfitting_verdict(train_loss, val, at_lowest, noisy, fit=(val[-1] / ratio, 1.0),
                                             val_acc=0.97)
        assert "×" not in shown and "loss terms" not in shown and "without saying how large" in shown, shown
    # the same mean rise with every sample worse by about as much: far above its standard error
    steady = [v + 0.01 + rng.gauss(0, 0.001) for v in at_lowest]
    text = readings.overfitting_verdict(train_loss, val, at_lowest, steady)
    assert "consistent with the start of overfitting" in text and "within" not in text, text
    assert "from epoch 3 to 5" in text and "lowest of 5 on these same samples" in text, text
    # above the noise but the training loss did not fall: not the overfitting pattern
    text = readings.overfitting_verdict([2.0, 1.0, 0.2, 0.3, 0.25], val, at_lowest, steady)
    assert "not the pattern of overfitting" in text and "consistent with" not in text, text
    # lowest at the last epoch: nothing to judge
    assert "no rise" in readings.overfitting_verdict(train_loss, [1.0, 0.5, 0.2, 0.15, 0.1], at_lowest, steady)
    with pytest.raises(ValueError):
        readings.overfitting_verdict(train_loss, val, at_lowest, steady[:-1])


def test_sample_losses_average_to_evaluate_and_hand_the_model_back_in_its_mode():
    from torch.utils.data import DataLoader

    from helpers import DigitsCNN, load_datasets
    torch.manual_seed(0)
    model, loader = DigitsCNN().train(), DataLoader(load_datasets("digits")["val"], batch_size=64)
    got = readings.sample_losses(model, loader)
    assert len(got) == 270 and model.training
    assert abs(sum(got) / len(got) - evaluate(model, loader)["loss"]) < 1e-5


@pytest.mark.skipif(not (lesson.openmp_runtime() or "").count("libgomp"), reason="needs Linux with libgomp loaded")
def test_libgomp_reads_the_wait_policy_only_when_it_is_loaded():
    lib = lesson.openmp_runtime()
    assert lesson.libgomp_spin_count(lib, set_before_load=True) == 0
    assert lesson.libgomp_spin_count(lib, set_before_load=False) > 0


def test_the_thread_verdict_names_a_winner_only_when_the_runs_do_not_overlap():
    overlap = [(1, .21), (2, .23), (1, .22), (2, .25), (1, .30), (2, .24)]
    threads, text = lesson.threads_verdict(overlap, default=2)
    assert threads == 2 and "no clear difference" in text and "0.300" in text     # every run printed
    apart = [(1, .21), (2, .23), (1, .22), (2, .25), (1, .20), (2, .24)]
    threads, text = lesson.threads_verdict(apart, default=2)
    assert threads == 1 and "faster in every run" in text and "2 times in 20 " in text   # 3 against 3: C(6, 3)
    five = [(n, .20 + .01 * i + (.1 if n == 2 else 0)) for i in range(5) for n in (1, 2)]
    threads, text = lesson.threads_verdict(five, default=2)
    assert threads == 1 and "2 times in 252 (0.8 %)" in text, text
    assert lesson.threads_verdict([(1, .2), (1, .3)], default=1)[0] == 1
    slow_first = [(1, .155), (2, .409), (1, .157), (2, .137), (1, .138), (2, .182), (1, .155), (2, .141)]
    threads, text = lesson.threads_verdict(slow_first, default=2)   # one slow run alone makes the counts overlap
    assert threads == 2 and "(median 0.161)" in text and "(median 0.155)" in text, text
    assert "run 1 of 2 thread(s) (0.409 s, 2.5× that count's median)" in text and "run 2 of" not in text, text
    assert "over 1.5×" not in lesson.threads_verdict(overlap, default=2)[1]   # 0.30 is 1.4× its median 0.22


def test_the_thread_verdict_says_the_wait_policy_it_holds_for():
    overlap = [(1, .21), (2, .23), (1, .22), (2, .25), (1, .30), (2, .24)]
    apart = [(1, .21), (2, .23), (1, .22), (2, .25), (1, .20), (2, .24)]
    for runs, ends in ((overlap, "keeps the default"), (apart, "used for the training run below")):
        text = lesson.threads_verdict(runs, default=2, wait_policy="PASSIVE")[1]
        assert "this holds for OMP_WAIT_POLICY=PASSIVE" in text and ends in text, text
        assert "other policies are not measured here" in text, text   # the default policy is not timed
        assert "with more than one thread, a sleeping OpenMP thread must be woken" in text, text   # the waking cost
        assert "waits for its slowest thread" in text and "neither cost is measured here" in text, text   # both named
        active = lesson.threads_verdict(runs, default=2, wait_policy="ACTIVE")[1]
        assert "OMP_WAIT_POLICY=ACTIVE" in active and "woken" not in active, active
        assert "waits for its slowest thread" in active and "this cost is not measured here" in active, active
    assert "OMP_WAIT_POLICY" not in lesson.threads_verdict(apart, default=2)[1]


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


def test_the_thread_verdict_names_a_trend_in_time_and_the_exchangeability_it_assumes():
    drift = [(1, .118), (2, .145), (2, .144), (1, .116), (1, .115), (2, .103),
             (2, .103), (1, .115), (1, .120), (2, .102)]   # the first two 2-thread runs slower than all later ones
    threads, text = lesson.threads_verdict(drift, default=2)
    assert "2 thread(s), s per epoch in time order: 0.145, 0.144, 0.103, 0.103, 0.102" in text, text
    assert "the first 2 run(s) of 2 thread(s) were each slower than all 3 later ones" in text, text
    assert "so would chance, 1 time in 10 for the first 2 of 5 if the runs are exchangeable" in text, text   # C(5, 2)
    assert "of 1 thread(s) were" not in text, text   # 0.118 is not slower than the later 0.120: no trend
    assert "exchangeable" in text, text
    steady = [(1, .21), (2, .23), (1, .22), (2, .22), (1, .20), (2, .24)]
    assert "were each slower" not in lesson.threads_verdict(steady, default=2)[1]
    first_slowest = [(1, .30), (2, .31), (1, .21), (2, .22), (1, .20), (2, .23), (1, .22), (2, .21), (1, .21), (2, .22)]
    assert "were each slower" not in lesson.threads_verdict(first_slowest, default=2)[1]   # k = 1: 1 in 5 by chance
    three = [(1, .30), (1, .29), (1, .28), (1, .20), (1, .21)]   # the first 3 of 5: 1 in C(5, 3) = 10
    assert "the first 3 run(s) of 1 thread(s)" in lesson.threads_verdict(three, default=1)[1]
    assert "1 time in 10 for the first 3 of 5" in lesson.threads_verdict(three, default=1)[1]
