"""Notebook 06's exercises: the mean loss (wrong answers and kept graphs refused), the leak, autocast's copies, the
checkpoint's measured memory."""
import pytest
import torch
import helpers

from helpers import memory as M


# --- exercise 06.mean_loss: wrong answers are refused

def _sum_losses(model, batches, reduction="sum"):
    return [torch.nn.functional.cross_entropy(model(x), y, reduction=reduction) for x, y in batches]


def _right(model, batches):
    with torch.no_grad():
        return sum(loss.item() for loss in _sum_losses(model, batches)) / sum(len(y) for _, y in batches)


def _mean_of_batch_means(model, batches):
    with torch.no_grad():
        return sum(loss.item() for loss in _sum_losses(model, batches, "mean")) / len(batches)


def _tensor_total(model, batches):
    total = 0
    for x, y in batches:
        total = total + torch.nn.functional.cross_entropy(model(x), y, reduction="sum")
    return (total / sum(len(y) for _, y in batches)).item()


_KEPT = []


def _keeps_the_last_loss(model, batches):
    value = _right(model, batches)
    x, y = batches[-1]
    _KEPT.append(torch.nn.functional.cross_entropy(model(x), y))  # a graph kept after returning
    return value


def _first_case_hard_coded(model, batches, _value=[]):
    if not _value:
        _value.append(_right(model, batches))
    return _value[0]


@pytest.mark.parametrize("wrong, why", [
    (_mean_of_batch_means, "mean of the batches' means"),
    (_tensor_total, "batches' worth of saved tensors"),
    (_keeps_the_last_loss, "still held"),
    (_first_case_hard_coded, "not the mean loss over all samples"),
    (lambda m, b: _right(m, b) * sum(len(y) for _, y in b), "not the mean loss over all samples"),
    (lambda m, b: torch.tensor(_right(m, b)), "returned a tensor"),
    (lambda m, b: helpers.evaluate(m, b)["loss"], "calls the course's evaluate()"),  # the reference, wrapped
])
def test_mean_loss_check_refuses_wrong_answers(wrong, why):
    from helpers.core.checks import verify

    ok, msg = verify("06.mean_loss", wrong)
    assert not ok and why in msg
    _KEPT.clear()


@pytest.mark.parametrize("case", range(4))
def test_mean_loss_check_catches_kept_graphs_in_every_case(case, monkeypatch):
    # every case alone refuses a tensor total (all graphs alive), not only the one with most batches
    from helpers.core.checks import verify
    from helpers.memory import lesson

    sizes = lesson.MEAN_LOSS_CASES[case]
    assert len(sizes) > 1
    monkeypatch.setattr(lesson, "MEAN_LOSS_CASES", (sizes,))
    ok, msg = verify("06.mean_loss", _tensor_total)
    assert not ok and "batches' worth of saved tensors" in msg
    assert verify("06.mean_loss", _right)[0]
    if len(set(sizes)) > 1:
        assert not verify("06.mean_loss", _mean_of_batch_means)[0]


def test_mean_loss_check_accepts_right_answers():
    from helpers.core.checks import verify

    def per_batch_weighted(model, batches):
        total, n = 0.0, 0
        for x, y in batches:
            total += torch.nn.functional.cross_entropy(model(x), y).item() * len(y)  # graph freed each batch
            n += len(y)
        return total / n

    assert verify("06.mean_loss", _right)[0] and verify("06.mean_loss", per_batch_weighted)[0]


def test_leak_exercise_refuses_each_plausible_wrong_method():
    # exercise 1: section 3's loop with hidden width 32, the largest batch whose leak stays within
    # 5,600,000 B; the budget is chosen so that each classic shortcut gives another batch
    from helpers.core.checks import verify
    from helpers.memory.lesson import LEAK_BUDGET, LEAK_HIDDEN, _leak_of

    budget, hidden = LEAK_BUDGET, LEAK_HIDDEN
    per_sample = 64 * 4 + 2 * hidden * 4 + 10 * 4 + 8        # input, two ReLU outputs, log-softmax, int64 target
    right = (budget - 4) // per_sample                       # 4 B: nll_loss's total_weight, whatever the batch
    assert verify("06.leak_largest_batch", right)[0]
    assert _leak_of(right) <= budget < _leak_of(right + 1)   # measured, not only from the shapes
    parts = lambda b: M.leak_breakdown(batch=b, hidden=hidden)  # noqa: E731
    assert parts(right)["total"] <= budget < parts(right + 1)["total"]
    leak64 = _leak_of(64)
    wrong = {
        "the 4 B constant ignored": budget // per_sample,
        "batch 64's measured leak scaled": budget * 64 // leak64,
        "each tensor rounded up to 512 B (a GPU's count)": max(b for b in range(right - 200, right + 2)
                                                               if parts(b)["rounded"] <= budget),
        "rounded up instead of down": -(-(budget - 4) // per_sample),
        "targets forgotten": (budget - 4) // (per_sample - 8),
        "targets as 4-byte ints": (budget - 4) // (per_sample - 4),
        "hidden width 256 (section 3's)": (budget - 4) // (64 * 4 + 2 * 256 * 4 + 10 * 4 + 8),
        "the leak of batch 64 in bytes": leak64,
        "5.6 MB read as 5.6 MiB": int((5.6 * 2**20 - 4) // per_sample),
    }
    for why, value in wrong.items():
        assert value != right, why
        assert not verify("06.leak_largest_batch", value)[0], why


def test_autocast_copies_exercise_counts_only_blocks_whose_input_needs_a_gradient():
    # exercise 3: deep_mlp(6, 384), first 3 blocks frozen, input without a gradient: block 4's input
    # (block 3's output) needs no gradient either, so only blocks 5 and 6 keep a 16-bit weight copy
    from helpers.core.checks import verify
    from helpers.memory.lesson import AUTOCAST_FROZEN

    copy = 384 * 384 * 2
    right = (6 - AUTOCAST_FROZEN - 1) * copy
    assert AUTOCAST_FROZEN == 3 and verify("06.autocast_copies", right)[0]
    wrong = {
        "autocast saves a copy of every weight": 6 * copy,
        "every block but the first (blocks - 1)": (6 - 1) * copy,
        "every trainable block": (6 - AUTOCAST_FROZEN) * copy,
        "the frozen blocks": AUTOCAST_FROZEN * copy,
        "float32 bytes": (6 - AUTOCAST_FROZEN - 1) * 384 * 384 * 4,
        "weights and biases": (6 - AUTOCAST_FROZEN - 1) * (384 * 384 + 384) * 2,
        "one block's copy": copy,
        "the lesson helper's answer (nothing frozen)": M.half_vs_autocast(blocks=6, width=384, batch=32)["autocast_weight_casts"],
        "copies and activations (nothing frozen)": M.half_vs_autocast(blocks=6, width=384, batch=32)["saved_autocast"],
        "the old exercise's answer (input requires grad, nothing frozen)": 6 * copy,
        "a 1000 x 1000 float16 tensor (an older exercise)": 2_000_000,
    }
    for why, value in wrong.items():
        assert value != right, why
        assert not verify("06.autocast_copies", value)[0], why


def test_checkpoint_exercise_is_measured_and_not_the_formula_for_root_n():
    from helpers.core.checks import verify

    assert verify("06.checkpoint_n64", 4 + 64 // 4)[0]
    for wrong in (2 * 8, 64 + 1, 4, 64 // 4):  # 2√n for √n segments, no checkpointing, inputs only, last segment only
        assert not verify("06.checkpoint_n64", wrong)[0]
