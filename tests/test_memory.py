"""OOM helpers (helpers.memory): the tracker, the leak, the remedies, the batch search, the held bytes and step peaks,
and what notebook 06 expects of a GPU."""
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
    assert "no NVIDIA GPU to watch" in M.gpu_status_line(1)
    assert ", so torch.cuda.memory_summary() raised KeyError" in M.cuda_memory_summary()
    with pytest.raises(RuntimeError, match="needs a GPU"):
        M.cuda_memory()


def test_a_failure_before_the_stats_are_read_is_not_blamed_on_the_empty_dict(monkeypatch):
    """Where MPS is available, memory_summary() raises AttributeError looking up the current device (06's read 26)."""
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    monkeypatch.setattr(torch.cuda, "memory_summary", lambda **k: getattr(torch.mps, "current_device"))
    said = M.cuda_memory_summary()
    assert ", and torch.cuda.memory_summary() raised AttributeError" in said and "{}, so" not in said


def test_bad_budget():
    with pytest.raises(ValueError, match="budget_bytes"):
        M.SavedTensorTracker(budget_bytes=-5)


def test_leak_breakdown_sums_to_the_measured_leak():
    b = M.leak_breakdown()
    assert b["total"] == M.leak_curve(False, iterations=3)["bytes_per_iter"]
    assert b["rounded"] % 512 == 0 and b["rounded"] >= b["total"]


def test_half_weights_are_measured():
    h = M.half_vs_autocast(blocks=3, width=8, batch=4)
    # 3 blocks of 8 × 8 weights and 8 biases: 216 numbers, 4 B each in float32 and 2 B after .half()
    assert (h["params_fp32"], h["params_half"]) == (216 * 4, 216 * 2)


def test_find_largest_batch_from_a_start_that_is_no_power_of_two(monkeypatch):
    # each failed size is followed by one gc.collect (counted, not run: a full collection of the test
    # process per failure made this test 36 s long)
    from helpers.memory import recipe
    collects = []
    monkeypatch.setattr(recipe, "gc", type("GC", (), {"collect": staticmethod(lambda: collects.append(1))}))
    # 4097 fails, 2048 fits: the limit lies below 4097, not below 2 × 2048 = 4096, so 4096 must be tried
    # (bisecting between 2048 and 4096 stopped at 4095, below the true limit)
    res = M.find_largest_batch(_limit_step(4096), start=4097, tolerance=1)
    assert res.batch_size == 4096 and (4096, True) in res.tried and (4097, False) in res.tried
    assert len(collects) == sum(not ok for _, ok in res.tried) >= 1
    for limit in (1, 2, 3, 5, 100, 1000, 2047, 3000, 5000):  # every limit below the start, from odd starts
        for start in (limit + 1, 2 * limit + 1, 3 * limit + 2):
            got = M.find_largest_batch(_limit_step(limit), start=start, tolerance=1).batch_size
            assert got == limit, (limit, start, got)


def _limit_step(limit):
    def step(bs):
        if bs > limit:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (simulated)")
    return step


# --- what notebook 06 expects of a GPU (tests/gpu/run.sh runs these; skipped without CUDA)



@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run tests/gpu/run.sh there)")
def test_del_and_empty_cache_on_a_gpu():
    start = torch.cuda.memory_allocated()
    x = torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda")
    reserved = torch.cuda.memory_reserved()
    assert torch.cuda.memory_allocated() - start >= 256 * 2**20
    del x
    assert torch.cuda.memory_allocated() == start and torch.cuda.memory_reserved() == reserved
    torch.cuda.empty_cache()
    assert torch.cuda.memory_reserved() <= reserved - 256 * 2**20


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run tests/gpu/run.sh there)")
def test_leak_on_a_gpu_is_the_breakdown_rounded_to_512_bytes():
    bug = M.leak_curve(False, device="cuda")
    assert bug["cuda_allocated"][-1] - bug["cuda_allocated"][-2] == M.leak_breakdown()["rounded"]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run tests/gpu/run.sh there)")
def test_autocast_on_a_gpu_saves_half_activations_plus_weight_copies():
    rem = M.remedies(blocks=4, width=64, batch=256, device="cuda")
    assert rem["autocast_activations"] * 2 == rem["plain"] and rem["autocast_weight_casts"] > 0


def test_held_bytes_counts_what_is_made_until_it_is_freed():
    w = torch.ones(1000)                        # made before: not counted, nor its views
    with M.HeldBytes() as held:
        a = torch.empty(1000)                   # 4,000 B
        b = a.exp_()                            # in place: a's storage again
        v = w.view(10, 100)                     # a view of a tensor made before
        c = torch.ones(500, dtype=torch.float16)  # 1,000 B
        assert held.now == 5000
        del a, b, c
        assert held.now == 0 and held.peak == 5000
    del v


def test_step_peaks_agree_with_the_saved_tensor_tracker():
    rem, pk = M.remedies(blocks=4, width=32, batch=16), M.step_peaks(blocks=4, width=32, batch=16)
    assert pk["plain"]["after_forward"] == rem["plain"] and pk["checkpoint"]["after_forward"] == rem["checkpoint"]
    assert pk["autocast"]["after_forward"] == rem["autocast"] + pk["input_bytes"]
    for k in ("plain", "autocast", "checkpoint"):
        assert pk[k]["left"] == pk["grad_bytes"] == 4 * (32 * 32 + 32) * 4   # the float32 gradients stay
        assert pk[k]["peak"] > pk[k]["forward_peak"] >= pk[k]["after_forward"]  # the backward needs more


def test_only_small_segments_are_called_2_mib_segments():
    # 4 MiB reserved can only be two 2 MiB small-pool segments; 20 MiB may be one large segment (a
    # request between 1 and 10 MiB), and 12 MiB one of a 12 MiB request: even alone is not enough
    assert M.small_segments_only(4.0) and M.small_segments_only(2.0) and M.small_segments_only(8.0)
    for mib in (20.0, 12.0, 10.0, 40.0, 3.0, 0.0, 4.5):
        assert not M.small_segments_only(mib), mib
