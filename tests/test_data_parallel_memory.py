"""Notebook 02's memory accounting (helpers/data_parallel/memory.py, helpers/core/saved.py): the output device's
moments, saved activations, coalesced buffers, the largest batches."""
import pytest
import torch

from helpers import DigitsCNN
from helpers import data_parallel as D


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
