"""DataParallel helpers (helpers.data_parallel): the four steps, the accounting, the variants."""
import pytest
import torch

from helpers import data_parallel as D


def test_four_steps_equal_one_device_and_report_the_path():
    res = D.run_four_steps(batch=64)
    assert res["grad_max_abs_diff"] < 1e-6
    assert set(res["times"]) == {"scatter", "replicate", "apply", "gather", "backward"}
    expected = "torch.nn.parallel on" if torch.cuda.device_count() >= 2 else "plain tensor ops"
    assert res["path"].startswith(expected)


@pytest.mark.skipif(torch.cuda.device_count() >= 2, reason="with 2 GPUs the peaks are measured, not accounted")
def test_output_device_carries_more_and_limits_the_batch():
    res = D.run_four_steps(batch=64)
    acc = res["accounting"]
    assert acc["per_device_bytes"][0] - acc["per_device_bytes"][1] == acc["output_device_extra_bytes"]
    lim = D.largest_batches(2_000_000, acc)
    assert 0 < lim["data_parallel"] < lim["if_balanced"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU machine DataParallel uses the GPUs")
def test_data_parallel_is_a_pass_through_without_gpus():
    dp = D.wrap_data_parallel(torch.nn.Linear(3, 2))
    x = torch.randn(4, 3)
    assert dp.device_ids == [] and torch.equal(dp(x), dp.module(x))


def test_thread_variants_train_the_same_model():
    res = D.thread_variants(batch=32, seconds=0.1)
    assert set(res) == {"single", "threads_forward_only", "threads_forward_backward"}
    assert all(v > 0 for v in res.values())
