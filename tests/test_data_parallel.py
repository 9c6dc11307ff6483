"""DataParallel helpers (helpers.data_parallel): the four steps, the accounting, the variants, the exercises."""
import pytest
import torch

from helpers import DigitsCNN
from helpers import data_parallel as D
from helpers.core.checks import verify
from helpers.data_parallel import instruments as I
from helpers.data_parallel import memory as M


def test_four_steps_equal_one_device_and_report_the_path():
    res = D.run_four_steps(batch=64)
    assert res["grad_max_abs_diff"] <= res["grad_tolerance"] == 1e-6
    assert res["update_max_abs_diff"] <= res["update_tolerance"] < 1e-6
    assert set(res["times"]) == {"scatter", "replicate", "apply", "gather", "backward"}
    expected = "torch.nn.parallel on" if torch.cuda.device_count() >= 2 else "plain tensor ops"
    assert res["path"].startswith(expected)


@pytest.mark.skipif(torch.cuda.device_count() >= 2, reason="with 2 GPUs the peaks are measured, not predicted")
def test_output_device_prediction_takes_the_larger_moment_not_the_sum():
    res = D.run_four_steps(batch=64)
    acc = res["accounting"]
    assert acc["per_device_bytes"][0] - acc["per_device_bytes"][1] == acc["output_device_extra_bytes"]
    n_params = sum(1 for _ in DigitsCNN().parameters())
    # Adam: exp_avg and exp_avg_sq the size of every parameter, and one float32 step counter per parameter
    assert acc["optimizer_bytes"] == res["optimizer_bytes"] == 2 * acc["param_bytes"] + 4 * n_params
    p, opt, n = acc["param_bytes"], acc["optimizer_bytes"], acc["devices"]
    a, row, x_row = acc["activation_bytes_per_sample"], acc["output_row_bytes"], acc["input_bytes_per_sample"]
    # while the loss is computed: no gradients (zero_grad before the forward), no replica outputs (freed after gather)
    assert acc["per_device_bytes"][1] == p + a * 64 / n
    assert acc["output_device_extra_bytes"] == 64 * row + acc["loss_saved_bytes"] + 4 + opt + 32 * x_row
    # at the end of backward: no activations; replica grads + a flat buffer, and on device 0 the params, the sum, Adam
    assert acc["coalesced_buffer_bytes"] == min(p, D.COALESCE_BYTES)  # this model's gradients fit one 10 MiB buffer
    assert acc["reduction_bytes"] == [4 * p + opt + 4, 2 * p]
    lim = D.largest_batches(2_000_000, acc)
    assert lim["data_parallel"] > 0 and lim["ddp"] > 0
    # a DDP process while the loss runs: params, its all-reduce buckets (kept from construction), Adam, the loss and
    # total weight; per sample of the global batch 1/n of activations, output row, log_softmax row, target
    ddp_loss = lambda b: 2 * p + opt + 8 + b / n * (a + 2 * row + 8)  # noqa: E731
    assert ddp_loss(lim["ddp"]) <= 2_000_000 < ddp_loss(lim["ddp"] + 1)
    # DataParallel's output device while the loss runs: params, Adam, loss + total weight; its chunk's activations,
    # the rest of the batch, the gathered rows and log_softmax's rows for the whole batch, the targets
    dp_loss = lambda b: p + opt + 8 + b * (a / n + x_row * (1 - 1 / n) + 2 * row + 8)  # noqa: E731
    assert dp_loss(lim["data_parallel"]) <= 2_000_000 < dp_loss(lim["data_parallel"] + 1)
    assert lim["fixed"]["data_parallel"]["backward"] == 3 * p + min(p, D.COALESCE_BYTES) + opt + 4
    assert lim["fixed"]["ddp"]["backward"] == 3 * p + opt + 4
    assert lim["binding"] == {"data_parallel": "loss", "ddp": "loss"}
    # a budget the end of backward decides: DataParallel's output device cannot even hold its gradient copies
    tight = (lim["fixed"]["ddp"]["backward"] + lim["fixed"]["data_parallel"]["backward"]) // 2
    small = D.largest_batches(tight, acc)
    assert small["data_parallel"] == 0 and small["ddp"] == int((tight - ddp_loss(0)) / ((a + 2 * row + 8) / n))


def test_largest_batches_take_the_max_of_the_moments_not_their_sum():
    acc = {"devices": 2, "param_bytes": 1000, "optimizer_bytes": 0, "input_bytes_per_sample": 0,
           "activation_bytes_per_sample": 100.0, "output_row_bytes": 0, "coalesced_buffer_bytes": 1000}
    lim = D.largest_batches(10_000, acc)
    # DataParallel: while the loss, 1000 + 8 fixed and 50 + 8 per sample; at the end of backward 4000 + 4, no samples
    assert lim["data_parallel"] == int((10_000 - 1008) / 58)  # a sum of the moments would give (10_000 - 5012) / 58
    assert lim["ddp"] == int((10_000 - 2008) / 54)


def test_ddp_buckets_default_to_a_copy_of_the_gradients():
    import inspect
    assert inspect.signature(torch.nn.parallel.DistributedDataParallel).parameters["gradient_as_bucket_view"].default is False


@pytest.mark.skipif(torch.cuda.device_count() >= 2, reason="the CPU formula")
def test_saved_activations_count_the_chunk_not_the_whole_batch():
    """The chunk x[:n] is a view of the batch: the accounting counts its rows, not the batch's storage."""
    from helpers.data_parallel.instruments import output_device_accounting
    from helpers import digits_batch
    torch.manual_seed(0)
    model = DigitsCNN()
    x, _ = digits_batch(64)
    out = model(x)
    whole = output_device_accounting(model, x, out, 2)["saved_activation_bytes_per_chunk"]
    alone = output_device_accounting(model, x[:32].clone(), out[:32], 1)["saved_activation_bytes_per_chunk"]
    assert whole == alone  # the same 32 rows, as a view or as a tensor of their own


@pytest.mark.skipif(torch.cuda.device_count() >= 2, reason="the CPU simulation's copies")
def test_copied_bytes_read_from_storages():
    res = D.run_four_steps(batch=64)
    c = res["copied_bytes"]
    # replica 0 shares the module's parameters (as DataParallel's on device_ids[0]): (n − 1) copies
    assert c == {"scatter": 0, "replicate": (2 - 1) * res["accounting"]["param_bytes"], "gather": 64 * 10 * 4}
    assert set(res["backward_threads"]) == {res["main_thread"]}  # CPU autograd: the calling thread
    assert len(res["backward_threads"]) == res["backward_nodes"] > 20  # every node ran once, both replicas' too


def test_batchnorm_makes_the_chunks_differ():
    assert D.batchnorm_gradient_gap() > 100 * I.GRAD_TOLERANCE
    gap, scale = D.batchnorm_gradient_gap(with_scale=True)  # the printed scale: the largest single-device entry
    assert gap == D.batchnorm_gradient_gap() and 0 < gap < scale


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
    monkeypatch.setattr(M, "SavedTensorTracker", no_accounting)
    D.thread_variants(batch=32, seconds=0.02, rounds=1)
    D.time_four_steps(batch=32, repeats=1)


def test_rounds_verdict_is_generated_from_every_round():
    runs = {"single": [10.0, 10.0], "a": [9.0, 8.0], "b": [11.0, 12.0], "c": [9.0, 11.0]}
    assert D.rounds_verdict(runs, "a")["verdict"].startswith("slower")
    assert D.rounds_verdict(runs, "b")["verdict"].startswith("faster")
    assert D.rounds_verdict(runs, "c")["verdict"].startswith("no clear difference")


def test_rounds_verdict_counts_a_round_at_one_as_no_difference():
    """0.76×, 0.90×, 1.00×: the last round is a tie, not a win; within the margin is no difference either way."""
    runs = {"single": [10.0, 10.0, 10.0], "tie": [7.6, 9.0, 10.0], "near": [10.2, 10.1, 9.9],
            "just_slower": [9.6, 9.0, 9.5], "just_faster": [10.4, 11.0, 12.0]}
    for name, side in (("tie", "no clear difference"), ("near", "no clear difference"),
                       ("just_slower", "slower"), ("just_faster", "faster")):
        v = D.rounds_verdict(runs, name)
        assert v["side"] == side and v["verdict"].startswith(side), (name, v)
    assert D.MARGIN == 0.03


def test_gil_by_rounds_says_no_clear_difference_when_the_rounds_straddle_one():
    rows = [{"batch_per_thread": 1, "ratios": [0.7, 0.9]}, {"batch_per_thread": 4, "ratios": [1.1, 1.2]},
            {"batch_per_thread": 16, "ratios": [0.78, 1.4]}, {"batch_per_thread": 64, "ratios": [1.2, 1.0]},
            {"batch_per_thread": 256, "ratios": [0.99, 0.98]}]
    assert D.gil_by_rounds(rows) == {"faster": [4], "slower": [1], "no clear difference": [16, 64, 256]}
    # the rule printed beside it (third read): 16's rounds are both beyond 3%, on either side, so "within 3%" is not it
    assert D.verdict_rule() == "a verdict only when every round is more than 3% beyond 1× on the same side"
    assert D.verdict_rule() in D.probe_rule()


def test_tracker_counts_a_saved_view_by_the_bytes_it_spans():
    from helpers.core.saved import SavedTensorTracker
    w = torch.randn(16, 8, requires_grad=True)
    batch = torch.randn(100, 16)
    for views, want in (("span", 10 * 16 * 4), ("storage", 100 * 16 * 4)):
        with SavedTensorTracker(views=views) as t:
            y = batch[:10] @ w  # matmul saves its input: here a view of 10 of the batch's 100 rows
            assert t.live_bytes() == want, views
        del y
    with SavedTensorTracker(views="span") as t:  # two views: disjoint spans add up, an overlap counts once
        ys = [batch[:10] @ w, batch[5:20] @ w, batch[50:60] @ w]
        assert t.live_bytes() == (20 + 10) * 16 * 4
    del ys
    with SavedTensorTracker(views="span") as t:  # a strided view spans from its first to its last element
        y = batch[:, :4] @ w[:4]
        assert t.live_bytes() == (99 * 16 + 4) * 4
    with pytest.raises(ValueError, match="views"):
        SavedTensorTracker(views="rows")


def test_amdahl_cap_is_between_one_and_the_workers():
    assert D.amdahl_cap(0.0) == 2 and D.amdahl_cap(1.0) == 1
    assert abs(D.amdahl_cap(0.41) - 1 / (0.41 + 0.59 / 2)) < 1e-12
    assert all(1 <= D.amdahl_cap(s / 10) <= 2 for s in range(11))


def test_gil_probe_reports_the_rounds_range():
    rows = D.gil_probe(batches=(2,), seconds=0.01, rounds=2)
    r = rows[0]
    assert r["speedup_min"] <= r["speedup"] <= r["speedup_max"]
    assert r["batch_per_thread"] in D.gil_by_rounds(rows)[r["side"]]  # the row's verdict is the summary's


def test_throughput_runs_at_least_min_steps_however_short_the_time():
    from helpers.data_parallel.speed import _throughput
    calls = []
    _throughput(lambda: calls.append(1), batch=1, seconds=0.0, min_steps=7)
    assert len(calls) == 2 + 7  # two warm-up steps, then at least min_steps timed ones


def test_loss_saved_tensors_are_measured_and_charged_to_the_output_device():
    """cross_entropy saves log_softmax's output (the logits' shape), the targets and a scalar: counted on device 0."""
    from helpers import digits_batch
    from helpers.data_parallel.instruments import output_device_accounting
    torch.manual_seed(0)
    model = DigitsCNN()
    x, _ = digits_batch(64)
    out = model(x)
    acc = output_device_accounting(model, x, out, 2)
    assert acc["loss_saved_bytes"] == 64 * 10 * 4 + 64 * 8 + 4
    rest = (64 - 32) * x[0].numel() * 4
    # the gathered outputs (the loss's input), the loss's saved tensors, the loss, the rest of the batch; no gradients
    assert acc["output_device_extra_bytes"] == 64 * 10 * 4 + acc["loss_saved_bytes"] + 4 + rest


def test_largest_coalesced_buffer_follows_take_tensors():
    """Buffers fill until the next tensor would pass the limit; a tensor larger than the limit gets its own."""
    ts = [torch.zeros(15), torch.zeros(15), torch.zeros(30), torch.zeros(1)]  # 60, 60, 120, 4 bytes
    assert D.largest_coalesced_buffer(ts, limit=100) == 120  # not min(total, limit) = 100
    assert D.largest_coalesced_buffer(ts[:2] + ts[3:], limit=200) == 124


def test_section4_sentences_say_what_the_numbers_say():
    gil = [{"batch_per_thread": 128, "speedup": 1.2}]
    below = D.amdahl_sentence({"forward": 1.0, "backward": 1.0}, False, measured=1.06)  # bound 1.33×
    assert "1.06×, is below that bound" in below and "the real cap is lower" in below
    assert "starting two threads" not in below  # no untested cause is named
    # fifth read: "below" only beyond the margin, never "well below"; the bound's scope is said
    assert "below that bound" not in D.amdahl_sentence({"forward": 1.0, "backward": 1.0}, False, measured=1.31)
    assert "well below" not in below
    assert "well below" not in D.amdahl_sentence({"forward": 1.0, "backward": 1.0}, True, measured=0.9)
    s = D.probe_vs_cut_sentence(gil, [0.6, 0.7, 0.8], rows=128)
    assert "probe 1.20×" in s and "cut in two gained 0.70×" in s and "all 256 rows" in s
    assert "did not run" in D.probe_vs_cut_sentence(gil, [0.7], rows=64)
    # fifth read: the gains' ratio split into the baselines' ratio times the two-thread runs' ratio, from the
    # run's medians; no untimed extra offered as the cause
    row = {"batch_per_thread": 128, "speedup": 1.39, "one_thread": 15287.0, "two_threads": 21268.0}
    s = D.probe_vs_cut_sentence([row], [1.88, 1.67, 1.885], rows=128, single=[12947.0, 12536.0, 13950.0],
                                cut=[23616.0, 22000.0, 24000.0])
    assert "one thread 15,287 in the probe, 12,947 in section 4 (1.181×)" in s
    assert "two threads 23,616 on the cut batch, 21,268 in the probe (1.110×)" in s
    assert "1.181 × 1.110 = 1.311×" in s and "(cut batch 1.82× / probe 1.39×, not the medians" in s
    # seventh read: samples/s of different work are compared, not speeds of the same work
    assert ("section 4's one thread reached fewer samples/s than the probe's, and the cut batch's two threads reached "
            "more samples/s than the probe's, on different work (section 4's one thread: 256 rows, an SGD step, .grad set to "
            "None every step; the probe's: 128 rows, no SGD step, .grad never zeroed") in s
    assert s.count("section 4") == 3  # the clauses paired: section 4's one thread, then the probe's
    assert "ran faster" not in s and "ran slower" not in s and ".grad never zeroed" in s and "an SGD step" in s
    flipped = D.probe_vs_cut_sentence([row], [1.4], rows=128, single=[17000.0], cut=[19000.0])
    assert "section 4's one thread reached more samples/s" in flipped and "two threads reached fewer samples/s" in flipped
    assert "SGD" in s and "sums the gradients" not in s and "Samples/s" not in D.probe_vs_cut_sentence([row], [1.8], rows=128)
    same = D.probe_vs_cut_sentence([row], [1.4], rows=128, single=[15000.0], cut=[21000.0])
    assert "Both ratios are within 3% of 1×" in same and "ran slower" not in same and "ran faster" not in same


def test_gpus_idle_hint_does_not_name_the_computation():
    from helpers.data_parallel.lesson import EXERCISES
    hint = next(e for e in EXERCISES if e.id == "02.gpus_idle_6_on_4").hint
    assert "6" not in hint and "4" not in hint and "torch.chunk" not in hint
    # fresh read (session 9): the hint points at the method, not at the outcome (that chunks can be fewer)
    assert not any(w in hint for w in ("fewer", "as many", "always", "idle", "empty"))


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


def _all_or_nothing(model, replicas):  # skips a parameter as soon as one replica has no gradient for it
    for p, *rs in zip(model.parameters(), *(r.parameters() for r in replicas)):
        if all(q.grad is not None for q in rs):
            total = torch.stack([q.grad for q in rs]).sum(0)
            p.grad = total if p.grad is None else p.grad + total


def _blind_to_none(model, replicas):
    for p, *rs in zip(model.parameters(), *(r.parameters() for r in replicas)):
        p.grad = sum(q.grad for q in rs)


def _none_for_frozen(model, replicas):  # "no replica has a gradient" read as "no gradient": drops an earlier .grad
    for p, *rs in zip(model.parameters(), *(r.parameters() for r in replicas)):
        grads = [q.grad for q in rs if q.grad is not None]
        if grads:
            total = torch.stack(grads).sum(0)
            p.grad = total if p.grad is None else p.grad + total
        else:
            p.grad = None


def _skeleton(model, replicas):
    ...


def test_reduce_gradients_accepts_the_sum():
    ok, msg = verify("02.reduce_gradients", _sum_grads)
    assert ok, msg


@pytest.mark.parametrize("wrong", [_mean_grads, _first_replica_only, _all_but_the_last, _sum_into_the_first_replica, _overwrite_the_earlier_grad,
                                   _alias_a_replicas_grad, _zeros_for_frozen, _none_for_frozen, _blind_to_none, _all_or_nothing,
                                   _skeleton],
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


def test_generated_sentences_say_what_the_numbers_say():
    s = D.amdahl_sentence({"forward": 1.0, "backward": 1.0}, slower=False)
    assert f"{1 / (0.5 + 0.25):.2f}×" in s and "shortfall" not in s
    assert "shortfall below 1×" in D.amdahl_sentence({"forward": 1.0, "backward": 1.0}, slower=True)
    # a measured gain above the bound is said, not left beside the bound as if they agreed
    assert "1.40×, is above that bound" in D.amdahl_sentence({"forward": 1.0, "backward": 1.0}, False, measured=1.4)
    assert "above that bound" not in D.amdahl_sentence({"forward": 1.0, "backward": 1.0}, False, measured=1.3)
    s = D.processes_sentence({1: [10.0, 10.0, 10.0], 2: [7.3, 9.0, 9.5]})
    assert "0.730×, 0.900×, 0.950×: slower than one DDP process in every round" in s
    # one round on the other side, or within the margin: no verdict
    assert "no clear difference" in D.processes_sentence({1: [10.0, 10.0, 10.0], 2: [12.0, 12.0, 9.0]})
    assert "no clear difference" in D.processes_sentence({1: [10.0, 10.0, 10.0], 2: [10.2, 12.0, 12.0]})
    assert "faster than one DDP process in every round" in D.processes_sentence({1: [10.0, 9.0, 11.0], 2: [18.0, 9.5, 12.0]})
    # sixth read: the one-DDP-process baseline is a one-rank DDP group; both medians are also set against the plain thread
    s = D.processes_sentence({1: [14968.0, 14429.0, 15042.0], 2: [20756.0, 20000.0, 21000.0]}, single=[18344.0, 16600.0, 18482.0])
    assert "a one-rank group with the same hooks and buckets" in s
    assert "one DDP process 14,968 samples/s = 0.82× its 18,344, two DDP processes 20,756 = 1.13×" in s
    assert "plain 1 thread" not in D.processes_sentence({1: [10.0], 2: [12.0]})
    # sixth read: the share is printed precisely enough that the bound follows from it (49.4% → 1.34×, not "50%")
    a = D.amdahl_sentence({"forward": 0.506, "backward": 0.494}, slower=True)
    assert "49.4% of" in a and f"{1 / (0.494 + 0.506 / 2):.2f}×" in a
    # sixth read: the table says which ratio is the ratio of medians and which the median of per-round ratios
    line = D.throughput_lines({"single": [10.0, 20.0, 30.0], "threads_forward_backward": [10.0, 8.0, 30.0]},
                              {"threads_forward_backward": [1.0, 0.4, 1.0]}, {"threads_forward_backward": "single"})[1]
    assert "ratio of medians 0.50×" in line and "median of per-round ratios 1.00×" in line


@pytest.mark.skipif(torch.cuda.device_count() >= 2, reason="the CPU formula")
def test_memory_sentences_count_both_designs_moments_and_follow_the_classes():
    acc = D.run_four_steps(batch=64)["accounting"]
    p = acc["param_bytes"]
    lim = D.largest_batches(2_000_000, acc)
    assert lim["fixed"]["ddp"]["loss"] - lim["fixed"]["data_parallel"]["loss"] == p  # DDP's buckets, kept
    lines = D.memory_sentences(2_000_000, acc)
    ratio = lim["ddp"] / lim["data_parallel"]
    assert f"({ratio:.2f}×)" in lines[0] and ("DDP fits fewer" in lines[0]) == (ratio < 0.97)
    assert "DataParallel while the loss is computed" in lines[0]
    # fifth read: a budget verdict that the per-sample bytes do not carry gives its reason in the same sentence
    per0 = lim["per_sample"]["data_parallel"] / lim["per_sample"]["ddp"]
    assert ("the fixed bytes decide" in lines[0].split(". The fullest")[0]) == (abs(per0 - 1) <= 0.03 and abs(ratio - 1) > 0.03)
    if "the fixed bytes decide" in lines[0]:  # sixth read: the reason before the verdict
        assert lines[0].index("the fixed bytes decide") < lines[0].index("DDP fits")
    assert f"the difference, {p:,} B: DDP's all-reduce buckets" in lines[1]
    same = {**acc, "param_bytes": 0, "coalesced_buffer_bytes": 0}  # no gradient bytes: only the per-sample terms, close at 10 classes
    assert "about the same" in D.memory_sentences(2_000_000, same)[0]
    big = D.largest_batches(2_000_000, acc, out_row_bytes=4 * 50_000)["per_sample"]
    assert big["data_parallel"] > 1.9 * big["ddp"]  # the gathered outputs decide with a vocabulary's classes
    # per sample: the output device's chunk share, every gathered row and log_softmax's row for the whole batch (its
    # replica's own output row is freed before the loss); a DDP device its chunk's activations, rows, log_softmax rows
    a = acc["activation_bytes_per_sample"]
    assert big["data_parallel"] == pytest.approx(a / 2 + 2 * 200_000 + 8 + acc["input_bytes_per_sample"] / 2)
    assert big["ddp"] == pytest.approx((a + 2 * 200_000 + 8) / 2)
    text = "\n".join(lines)
    assert "exercise 2" not in text and "toy budget" in lines[0] and "end of backward" in lines[2]
    per = lim["per_sample"]["data_parallel"] / lim["per_sample"]["ddp"]
    assert ("about the same per sample" in lines[3]) == (abs(per - 1) <= 0.03)
    far = D.largest_batches(16 * 2**30, acc)
    assert f"({far['ddp'] / far['data_parallel']:.2f}×)" in lines[4]
    assert f"{2 * 200_000 / big['data_parallel']:.0%} of DataParallel's" in lines[5]
    with_grad = (big["data_parallel"] + 200_000) / (big["ddp"] + 100_000)  # log_softmax's backward: one more row
    assert f"the ratio would be {with_grad:.1f}×" in lines[5]
    assert "gradient_as_bucket_view=True" in lines[1] and "not this extra" in lines[1]
    # the lecture's claim judged from the per-sample bytes: not supported at 10 classes, supported at 50,000
    claim = "supported" if per > 1.03 else "not supported" if per >= 0.97 else "contradicted"
    assert lines[6].startswith(f"the lecture's claim, that the output device forces a smaller batch than DDP: {claim} here")
    assert "Supported in the 50,000-class what-if" in lines[6]
    heavy = {**acc, "output_row_bytes": 4 * 50_000}  # a model whose own rows are large: the claim holds for it
    assert ": supported here" in D.memory_sentences(2_000_000, heavy)[6]


def test_probe_sentences_follow_the_rule_and_the_peak():
    rows = [{"batch_per_thread": b, "speedup": s, "speedup_min": lo, "speedup_max": hi, "side": side}
            for b, s, lo, hi, side in ((1, 0.80, 0.69, 1.03, "no clear difference"), (64, 1.44, 1.31, 1.64, "faster"),
                                       (128, 1.50, 1.40, 1.66, "faster"), (256, 1.24, 1.21, 1.28, "faster"))]
    assert D.probe_verdict(rows[1]) == "faster in every round"
    v = D.probe_verdict(rows[0])
    assert v.startswith("no clear difference") and "0.690–1.030×" in v and "the median alone decides nothing" in v
    v = D.probe_verdict({**rows[0], "ratios": [0.75, 0.99, 0.79], "speedup_min": 0.75, "speedup_max": 0.99})
    assert "1 of the 3 rounds within 3% of 1×" in v  # why a median of 0.79× gives no verdict
    # every round printed with 3 decimals, so a reader can check which lie within 3% (1.027 does, 1.031 not)
    v = D.probe_verdict({**rows[0], "ratios": [1.0274, 1.0312, 1.171], "speedup_min": 1.0274, "speedup_max": 1.171})
    assert "the rounds ran 1.027×, 1.031×, 1.171×; 1 of the 3 rounds within 3% of 1×" in v
    v = D.probe_verdict({**rows[0], "ratios": [0.8, 1.2, 0.9], "speedup_min": 0.8, "speedup_max": 1.2})
    assert "rounds on both sides of 1×" in v
    s = D.probe_peak_sentence(rows)
    assert "largest at 128 rows per thread (1.50×; rounds 1.40–1.66×)" in s and "256 (1.24×;" in s
    assert "did not keep growing" in s  # 256's rounds (1.21–1.28×) all below 128's (1.40–1.66×)
    assert "the largest batch probed" in D.probe_peak_sentence(rows[:3])
    assert D.amdahl_sentence({"forward": 1.0, "backward": 1.0}, slower=True).endswith(".")


def test_process_rounds_time_one_and_two_processes_in_turns():
    r = D.process_rounds(batch=64, seconds=0.05, rounds=2)
    assert set(r) == {1, 2} and len(r[1]) == len(r[2]) == 2 and min(r[1] + r[2]) > 0


def test_process_rounds_stay_on_gloo_and_the_cpu_with_gpus(monkeypatch):
    """With 2 GPUs choose_backend(2) says nccl; the processes compared with CPU threads must stay on gloo/CPU."""
    from helpers.data_parallel import processes as P
    from helpers.dist import ranks
    monkeypatch.setattr(ranks, "gpu_count", lambda: 2)
    monkeypatch.setattr(ranks.dist, "is_nccl_available", lambda: True)
    assert ranks.choose_backend(2) == "nccl"  # the mock took: the automatic choice would move them to the GPUs
    seen = {}

    def fake_launch(fn, nprocs, args=(), backend=None, **kw):
        seen.update(fn=fn, nprocs=nprocs, backend=backend)
        return [{1: [1.0], 2: [1.0]}, {1: [], 2: [1.0]}]

    monkeypatch.setattr(P, "launch", fake_launch)
    assert P.process_rounds(batch=8, seconds=0.01, rounds=1) == {1: [1.0], 2: [1.0]}
    assert seen["backend"] == P.PROCESS_BACKEND == "gloo" and seen["nprocs"] == 2
    assert ranks.local_device("gloo").type == "cpu"  # what the launcher and agree() give each rank under gloo
    import inspect
    assert "cuda" not in inspect.getsource(P.rounds_worker)  # the worker moves nothing to a GPU


def test_time_four_steps_cpu_runs_the_simulation_with_gpus_counted(monkeypatch):
    """Section 4's CPU sentences take CPU times: time_four_steps(cpu=True) never takes the GPU path."""
    from helpers.data_parallel import speed
    monkeypatch.setattr(speed, "gpu_count", lambda: 2)
    monkeypatch.setattr(speed, "four_steps_gpu", lambda *a, **k: (_ for _ in ()).throw(AssertionError("GPU path")))
    res = D.time_four_steps(batch=16, repeats=1, cpu=True)
    assert res["path"].startswith("plain tensor ops") and set(res["one_worker_seconds"]) == {"forward", "backward"}


def _omp_or_skip():
    get = I._omp_max_threads()
    if get is None:
        pytest.skip("OpenMP's omp_get_max_threads cannot be read here")
    return get


def test_a_fresh_thread_gets_one_intraop_thread_only_when_set_in_it():
    _omp_or_skip()
    seen = D.omp_threads_at_thread_start()
    assert seen["set_in_thread"] == 1
    if torch.get_num_threads() > 1:  # the default is above 1: a thread that does not set it starts there
        assert seen["plain"] > 1


def test_every_worker_thread_computes_on_one_intraop_thread(monkeypatch):
    """four_steps_cpu's threads, thread_variants' and gil_probe's: the first operator of each sees 1 OpenMP thread."""
    from helpers.core.measure import torch_threads
    from helpers.data_parallel import speed
    get = _omp_or_skip()
    seen: list[int] = []

    class Probe(DigitsCNN):
        def forward(self, x):
            seen.append(get())  # before the thread's first operator
            return super().forward(x)

    x, y = torch.randn(8, 1, 8, 8), torch.randint(0, 10, (8,))
    with torch_threads(1):
        D.four_steps_cpu(Probe(), x, y, n=2)
    monkeypatch.setattr(speed, "DigitsCNN", Probe)
    D.thread_variants(batch=8, seconds=0.005, rounds=1)
    D.gil_probe(batches=(2,), seconds=0.005, rounds=1, min_steps=1)
    assert seen and set(seen) == {1}


def test_saves_its_output_reads_what_autograd_keeps():
    x = torch.randn(4, 1, 8, 8)
    assert not D.saves_its_output(DigitsCNN(), x)  # a Linear last: it saves its input and weight
    assert D.saves_its_output(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 3), torch.nn.Sigmoid()), x)


def test_section4_sentences_say_the_rule_once_and_name_their_source():
    row = {"batch_per_thread": 4, "speedup": 1.0, "speedup_min": 0.9, "speedup_max": 1.1, "side": "no clear difference",
           "ratios": [0.9, 1.1, 1.0]}
    short = D.probe_verdict(row, explain=False)
    assert short.startswith("no clear difference") and D.probe_rule() not in short and D.probe_rule() in D.probe_verdict(row)
    cpu = "the CPU simulation of section 3"
    assert f"of {cpu}'s one-thread forward+backward pass, not of the two-thread step" in D.amdahl_sentence({"forward": 1.0, "backward": 1.0}, False, where=f"{cpu}'s")


def test_probe_peak_says_no_gain_when_every_median_is_below_one():
    rows = [{"batch_per_thread": b, "speedup": s, "speedup_min": s - 0.02, "speedup_max": s + 0.02}
            for b, s in ((16, 0.72), (128, 0.85), (256, 0.75))]
    s = D.probe_peak_sentence(rows)
    assert s.startswith("by the median, two threads gained at no batch probed") and "gain" not in s.split("; ", 1)[1]
    assert "median ratio was largest at 128 rows per thread (0.85×;" in s and "the ratio did not keep growing" in s
    assert "median gain was largest at 64" in D.probe_peak_sentence([{"batch_per_thread": 64, "speedup": 1.2}])


def test_probe_peak_applies_the_rounds_rule_to_a_lower_median():
    """Review of 02 (fresh read 2): a lower median at a larger batch was called 'did not keep growing'
    right after 'the median alone decides nothing'; overlapping rounds now give no clear difference."""
    peak = {"batch_per_thread": 128, "speedup": 1.25, "speedup_min": 1.20, "speedup_max": 1.31}
    overlap = {"batch_per_thread": 256, "speedup": 1.20, "speedup_min": 1.12, "speedup_max": 1.22}
    s = D.probe_peak_sentence([peak, overlap])
    assert "did not keep growing" not in s and "no clear difference" in s and "rounds 1.12–1.22×" in s
    assert "rounds 1.20–1.31×" in s
    below = {**overlap, "speedup_max": 1.19}
    s = D.probe_peak_sentence([peak, below])
    assert "every round was below every round at 128" in s and "did not keep growing" in s
    s = D.probe_peak_sentence([peak, below, {**overlap, "batch_per_thread": 512}])
    assert "did not keep growing" in s and "at 512" in s and "no clear difference" in s
    assert "not given" in D.probe_peak_sentence([{"batch_per_thread": 64, "speedup": 1.2},
                                                 {"batch_per_thread": 128, "speedup": 1.1}])


def test_amdahl_names_no_cause_for_a_shortfall():
    """Review of 02 (fresh read 2): the Amdahl line must not blame costs that section 3's own timing contains."""
    a = D.amdahl_sentence({"forward": 1.0, "backward": 1.0}, slower=True, measured=0.86)
    assert "not explained" in a and "functional_call" not in a and "GIL" not in a and "starting" not in a
    # seventh read: a median below 1× without an every-round verdict gets the same clause, not "below that bound"
    b = D.amdahl_sentence({"forward": 1.0, "backward": 1.0}, slower=False, measured=0.86)
    assert "0.86×, is below 1× (the rounds give no verdict" in b and "not explained" in b and "below that bound" not in b
    assert "not explained" not in D.amdahl_sentence({"forward": 1.0, "backward": 1.0}, slower=False, measured=1.06)


def test_time_four_steps_starts_both_backwards_from_no_gradients(monkeypatch):
    """Fifth read of 02: the one-thread backward added into the gradients the four steps had just set."""
    from helpers.data_parallel import speed
    made, seen = [], []
    monkeypatch.setattr(speed, "DigitsCNN", lambda: made.append(DigitsCNN()) or made[-1])
    real = speed.timed

    def timed(times, name, fn):
        if name == "backward":
            seen.append(all(p.grad is None for p in made[0].parameters()))
        return real(times, name, fn)

    monkeypatch.setattr(speed, "timed", timed)
    monkeypatch.setattr(I, "timed", timed)
    D.time_four_steps(batch=16, repeats=1)
    assert len(seen) == 6 and all(seen)  # 3 passes (2 warm-up), each with the four steps' and one thread's backward


def test_sync_waits_for_every_gpu(monkeypatch):
    """Review of 02 (fresh read 2): torch.cuda.synchronize() with no argument waits for the current
    device only, so on several GPUs the apply/gather split was timed before the other GPUs finished."""
    from helpers.data_parallel import timing
    waited = []
    monkeypatch.setattr(timing.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(timing.torch.cuda, "device_count", lambda: 3)
    monkeypatch.setattr(timing.torch.cuda, "synchronize", lambda device=None: waited.append(device))
    timing.sync()
    assert sorted(waited) == [0, 1, 2]
    waited.clear()
    times = {}
    assert timing.timed(times, "x", lambda: 5) == 5
    assert waited == [0, 1, 2, 0, 1, 2] and times["x"] >= 0
    monkeypatch.setattr(timing.torch.cuda, "is_available", lambda: False)
    waited.clear()
    timing.sync()
    assert waited == []


def test_parallel_apply_here_names_the_line_it_came_through():
    """The notebook says what parallel_apply's traceback shows, not a guessed cause (02)."""
    if torch.cuda.is_available():
        pytest.skip("parallel_apply runs with a GPU")
    s = D.parallel_apply_here()
    assert "raised through parallel_apply.py line " in s, s
