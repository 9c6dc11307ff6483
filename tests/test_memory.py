"""OOM helpers (helpers.memory): the tracker, the leak, the remedies, the batch search."""
import pytest
import torch

from helpers import memory as M


def test_tracker_counts_saved_activations_not_parameters():
    lin = torch.nn.Linear(32, 32)
    x = torch.randn(8, 32)
    with M.SavedTensorTracker() as t:
        out = torch.relu(lin(x))
        held = t.live_bytes()
    assert held == 8 * 32 * 4 * 2  # the input and the ReLU output; the weight is not counted
    del out
    assert t.live_bytes() == 0


def test_leak_grows_exactly_and_fix_is_flat():
    bug, fix = M.leak_curve(False, iterations=5), M.leak_curve(True, iterations=5)
    assert bug["constant_growth"] and bug["bytes_per_iter"] == 150_532
    assert fix["held_bytes"] == [0] * 5


def test_remedies_save_what_they_promise():
    rem = M.remedies(blocks=4, width=64, batch=256)
    assert rem["plain"] == rem["plain_expected"]
    assert rem["no_grad"] == rem["inference_mode"] == 0
    assert rem["autocast"] < rem["plain"] and rem["checkpoint"] == rem["checkpoint_expected"]


def test_autocast_costs_more_than_it_saves_on_tiny_batches():
    # autocast keeps 16-bit copies of the weights: with few rows they outweigh the halved activations
    rem = M.remedies(blocks=4, width=64, batch=8)
    assert rem["autocast"] > rem["plain"]


def test_accumulation_gives_the_big_batch_gradient():
    res = M.accumulation_check(batch=64, steps=4, width=32)
    assert res["max_abs_diff"] < 1e-6 and res["peak_accumulated"] < res["peak_big_batch"]


def test_budget_raises_an_oom_like_error():
    with pytest.raises(M.BudgetExceeded, match="out of memory"):
        with M.SavedTensorTracker(budget_bytes=1000):
            torch.relu(torch.nn.Linear(64, 64)(torch.randn(64, 64)))


def test_find_largest_batch_against_a_known_limit():
    def step(bs):
        if bs > 300:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (simulated)")

    res = M.find_largest_batch(step, start=1024)
    assert 296 <= res.batch_size <= 300 and res.tried[0] == (1024, False)


def test_find_largest_batch_does_not_swallow_real_bugs():
    def step(bs):
        raise ValueError("a real bug")

    with pytest.raises(ValueError, match="a real bug"):
        M.find_largest_batch(step)
    with pytest.raises(ValueError, match="positive ints"):
        M.find_largest_batch(step, start=0)
    with pytest.raises(RuntimeError, match="even batch size 1 does not fit"):
        M.find_largest_batch(lambda bs: (_ for _ in ()).throw(M.BudgetExceeded("out of memory")), start=4)


def test_no_gpu_answers_are_clean():
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert "no GPU" in M.gpu_status_line(1)
    assert "KeyError" in M.cuda_memory_summary()
    with pytest.raises(RuntimeError, match="needs a GPU"):
        M.cuda_memory()


def test_bad_budget():
    with pytest.raises(ValueError, match="budget_bytes"):
        M.SavedTensorTracker(budget_bytes=-5)
