"""DataParallel helpers (helpers.data_parallel): the four steps, the accounting, the variants, the exercises."""
import pytest
import torch

from helpers import DigitsCNN
from helpers import data_parallel as D
from helpers.core.checks import verify
from helpers.data_parallel import instruments as I


def test_four_steps_equal_one_device_and_report_the_path():
    res = D.run_four_steps(batch=64)
    assert res["grad_max_abs_diff"] <= res["grad_tolerance"] == 1e-6
    assert res["update_max_abs_diff"] <= res["update_tolerance"] < 1e-6
    assert set(res["times"]) == {"scatter", "replicate", "apply", "gather", "backward"}
    expected = "torch.nn.parallel on" if torch.cuda.device_count() >= 2 else "plain tensor ops"
    assert res["path"].startswith(expected)


@pytest.mark.skipif(torch.cuda.device_count() >= 2, reason="with 2 GPUs the peaks are measured, not predicted")
def test_output_device_prediction_counts_gradients_and_adams_state():
    res = D.run_four_steps(batch=64)
    acc = res["accounting"]
    assert acc["per_device_bytes"][0] - acc["per_device_bytes"][1] == acc["output_device_extra_bytes"]
    n_params = sum(1 for _ in DigitsCNN().parameters())
    # Adam: exp_avg and exp_avg_sq the size of every parameter, and one float32 step counter per parameter
    assert acc["optimizer_bytes"] == res["optimizer_bytes"] == 2 * acc["param_bytes"] + 4 * n_params
    assert acc["output_device_extra_bytes"] >= acc["param_bytes"] + acc["optimizer_bytes"]
    lim = D.largest_batches(2_000_000, acc)
    assert 0 < lim["data_parallel"] <= lim["ddp"]  # DDP's devices carry no gathered outputs: never fewer
    p, opt, n = acc["param_bytes"], acc["optimizer_bytes"], acc["devices"]
    ddp_load = lambda b: 2 * p + opt + 4 + b / n * (acc["per_sample_bytes"] + 8)  # noqa: E731 params, grads, Adam, chunk
    assert ddp_load(lim["ddp"]) <= 2_000_000 < ddp_load(lim["ddp"] + 1)


@pytest.mark.skipif(torch.cuda.device_count() >= 2, reason="the CPU simulation's copies")
def test_copied_bytes_read_from_storages():
    res = D.run_four_steps(batch=64)
    c = res["copied_bytes"]
    # replica 0 shares the module's parameters (as DataParallel's on device_ids[0]): (n − 1) copies
    assert c == {"scatter": 0, "replicate": (2 - 1) * res["accounting"]["param_bytes"], "gather": 64 * 10 * 4}
    assert set(res["backward_threads"]) == {res["main_thread"]}  # CPU autograd: the calling thread


def test_batchnorm_makes_the_chunks_differ():
    assert D.batchnorm_gradient_gap() > 100 * I.GRAD_TOLERANCE


def test_tf32_is_off_for_the_comparison_and_restored(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    before = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = True
    try:
        with I._full_float32():
            assert not torch.backends.cudnn.allow_tf32 and not torch.backends.cuda.matmul.allow_tf32
        assert torch.backends.cudnn.allow_tf32
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = before


@pytest.mark.skipif(not torch.cuda.is_available(), reason="torch.nn.parallel needs CUDA")
def test_the_gpu_path_matches_one_device_in_float32():
    res = D.run_four_steps(batch=64, device_ids=[0, 0])  # two replicas on one GPU: the same primitives
    assert res["path"].startswith("torch.nn.parallel")
    assert res["grad_max_abs_diff"] <= res["grad_tolerance"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU machine DataParallel uses the GPUs")
def test_data_parallel_is_a_pass_through_without_gpus():
    dp = D.wrap_data_parallel(torch.nn.Linear(3, 2))
    x = torch.randn(4, 3)
    assert dp.device_ids == [] and torch.equal(dp(x), dp.module(x))


def test_thread_variants_take_turns_for_every_round():
    res = D.thread_variants(batch=32, seconds=0.02, rounds=2)
    assert set(res) == {"single", "threads_forward_only", "threads_forward_backward"}
    assert all(len(v) == 2 and all(s > 0 for s in v) for v in res.values())


def test_forward_only_times_the_step_and_nothing_else(monkeypatch):
    """The timing bug: the accounting (an extra forward under saved-tensor hooks) ran in every timed step."""
    def no_accounting(*a, **k):
        raise AssertionError("output_device_accounting ran inside a timed step")

    monkeypatch.setattr(I, "output_device_accounting", no_accounting)
    monkeypatch.setattr(I, "SavedTensorTracker", no_accounting)
    D.thread_variants(batch=32, seconds=0.02, rounds=1)
    D.time_four_steps(batch=32, repeats=1)


def test_rounds_verdict_is_generated_from_every_round():
    runs = {"single": [10.0, 10.0], "a": [9.0, 8.0], "b": [11.0, 12.0], "c": [9.0, 11.0]}
    assert D.rounds_verdict(runs, "a")["verdict"].startswith("slower")
    assert D.rounds_verdict(runs, "b")["verdict"].startswith("faster")
    assert "some rounds" in D.rounds_verdict(runs, "c")["verdict"]


def test_gil_by_rounds_says_no_clear_difference_when_the_rounds_straddle_one():
    rows = [{"batch_per_thread": 1, "ratios": [0.7, 0.9]}, {"batch_per_thread": 4, "ratios": [1.1, 1.2]},
            {"batch_per_thread": 16, "ratios": [0.78, 1.4]}]
    assert D.gil_by_rounds(rows) == {"faster": [4], "slower": [1], "no clear difference": [16]}


def test_amdahl_cap_never_below_one():
    assert D.amdahl_cap(0.0) == 2 and D.amdahl_cap(1.0) == 1
    assert abs(D.amdahl_cap(0.41) - 1 / (0.41 + 0.59 / 2)) < 1e-12
    assert all(1 <= D.amdahl_cap(s / 10) <= 2 for s in range(11))


def test_gil_probe_reports_the_rounds_range():
    rows = D.gil_probe(batches=(2,), seconds=0.01, rounds=2)
    r = rows[0]
    assert r["speedup_min"] <= r["speedup"] <= r["speedup_max"]


# --- the exercises: right answers pass, plausible wrong ones are refused -----------------------------------

def _sum_grads(model, replicas):  # added to what .grad holds, as autograd accumulates
    for p, *rs in zip(model.parameters(), *(r.parameters() for r in replicas)):
        grads = [q.grad for q in rs if q.grad is not None]
        if grads:
            total = torch.stack(grads).sum(0)
            p.grad = total if p.grad is None else p.grad + total


def _overwrite_the_earlier_grad(model, replicas):  # right sum, but it drops what .grad held before
    for p, *rs in zip(model.parameters(), *(r.parameters() for r in replicas)):
        grads = [q.grad for q in rs if q.grad is not None]
        if grads:
            p.grad = torch.stack(grads).sum(0)


def _mean_grads(model, replicas):  # the classic mistake: averaging what DataParallel sums
    for p, *rs in zip(model.parameters(), *(r.parameters() for r in replicas)):
        grads = [q.grad for q in rs if q.grad is not None]
        if grads:
            p.grad = torch.stack(grads).mean(0)


def _first_replica_only(model, replicas):
    for p, q in zip(model.parameters(), replicas[0].parameters()):
        if q.grad is not None:
            p.grad = q.grad.clone()


def _all_but_the_last(model, replicas):
    _sum_grads(model, replicas[:-1] if len(replicas) > 1 else replicas)


def _sum_into_the_first_replica(model, replicas):  # changes a replica's gradients
    for p, *rs in zip(model.parameters(), *(r.parameters() for r in replicas)):
        if rs[0].grad is not None:
            for q in rs[1:]:
                rs[0].grad += q.grad
            p.grad = rs[0].grad


def _alias_a_replicas_grad(model, replicas):
    for p, *rs in zip(model.parameters(), *(r.parameters() for r in replicas)):
        if rs[0].grad is not None:
            p.grad = rs[0].grad if len(rs) == 1 else sum(q.grad for q in rs)


def _zeros_for_frozen(model, replicas):
    for p, *rs in zip(model.parameters(), *(r.parameters() for r in replicas)):
        p.grad = sum((q.grad for q in rs if q.grad is not None), torch.zeros_like(p))


def _blind_to_none(model, replicas):
    for p, *rs in zip(model.parameters(), *(r.parameters() for r in replicas)):
        p.grad = sum(q.grad for q in rs)


def _skeleton(model, replicas):
    ...


def test_reduce_gradients_accepts_the_sum():
    ok, msg = verify("02.reduce_gradients", _sum_grads)
    assert ok, msg


@pytest.mark.parametrize("wrong", [_mean_grads, _first_replica_only, _all_but_the_last, _sum_into_the_first_replica, _overwrite_the_earlier_grad,
                                   _alias_a_replicas_grad, _zeros_for_frozen, _blind_to_none, _skeleton],
                         ids=lambda f: f.__name__.strip("_"))
def test_reduce_gradients_refuses_wrong_answers(wrong):
    ok, msg = verify("02.reduce_gradients", wrong)
    assert not ok and "Hint" in msg


def test_gathered_bytes_needs_both_the_own_chunk_and_the_gather():
    gpus, batch, classes = 4, 1024, 50_000
    chunk = len(torch.empty(batch, 0).chunk(gpus)[0])
    own, gathered = chunk * classes * 4, batch * classes * 4
    assert verify("02.gathered_bytes", [own + gathered, own])[0]
    for wrong in ([gathered, own], gathered, own + gathered, [own, own + gathered], [own + gathered, 0],
                  [gathered + own, gathered]):
        assert not verify("02.gathered_bytes", wrong)[0], wrong


def test_gpus_idle_follows_torch_chunk():
    idle = 4 - len(torch.arange(6).chunk(4))
    assert verify("02.gpus_idle_6_on_4", idle)[0]
    for wrong in (0, 2, 6 % 4 + 1, 4):  # 6 ≥ 4 so "none"; 6 mod 4; …; "all"
        if wrong != idle:
            assert not verify("02.gpus_idle_6_on_4", wrong)[0], wrong
