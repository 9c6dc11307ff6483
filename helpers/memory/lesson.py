"""Notebook 06 (out-of-memory troubleshooting): its exercises and its benchmark."""
from __future__ import annotations

from ..core.checks import Exercise
from ..core.i18n import tr
from ..core.device import hardware_label
from ..core.train import evaluate_refused
from .instruments import leak_curve, remedies


NOTEBOOK = "06_oom_troubleshooting"


# Exercise 1: section 3's loop with hidden width 32, and a budget of saved bytes per iteration at which
# ignoring the 4-byte constant, scaling batch 64's measured leak, or counting 512-byte blocks each give
# another batch than the right one (tests/test_memory_exercises.py).
LEAK_BUDGET, LEAK_HIDDEN = 5_600_000, 32


def _leak_of(batch: int, hidden: int = LEAK_HIDDEN) -> int:
    """Bytes one iteration of section 3's loop (64 → hidden → hidden → 10) leaves saved, measured."""
    import torch
    from torch import nn

    from ..core.saved import SavedTensorTracker
    from .recipe import small_mlp

    model, g = small_mlp(hidden=hidden), torch.Generator().manual_seed(0)
    with SavedTensorTracker() as tracker:
        x, y = torch.rand(batch, 64, generator=g), torch.randint(0, 10, (batch,), generator=g)
        loss = nn.functional.cross_entropy(model(x), y)
        held = tracker.live_bytes()
    del loss
    return held


def _leak_largest_batch() -> int:
    """Exercise 1's answer, measured: the largest batch whose leak per iteration stays within the budget."""
    one, two = _leak_of(1), _leak_of(2)
    per_sample = two - one
    batch = (LEAK_BUDGET - (one - per_sample)) // per_sample
    assert _leak_of(batch) <= LEAK_BUDGET < _leak_of(batch + 1)  # linear in the batch, checked at the edge
    return batch


def _checkpoint_64_in_4() -> int:
    """Exercise 2's answer, measured: block-activations ``checkpoint_sequential`` keeps for 64 blocks in 4 segments."""
    import torch
    from torch.utils.checkpoint import checkpoint_sequential

    from ..core.saved import SavedTensorTracker
    from .recipe import deep_mlp

    x = torch.randn(4, 8)
    with SavedTensorTracker() as tracker:
        out = checkpoint_sequential(deep_mlp(64, 8), 4, x, use_reentrant=False)
        kept = tracker.live_bytes()
    del out
    return kept // (x.numel() * x.element_size())


# Batch sizes of the check's cases: unequal, as a loader's last batch is, so that the mean of the
# batches' means differs from the mean over all samples.
# every case's batches together hold more than 3 × its largest batch's graph, so keeping every
# graph alive (peak > 2 × one batch's) is caught in each case, not in one alone (tests/test_memory_exercises.py)
MEAN_LOSS_CASES = ((16, 16, 16, 5), (3, 40, 40, 40), (7, 7, 7, 7, 7), (1, 30, 2, 30, 30))


AUTOCAST_FROZEN = 3  # exercise 3: deep_mlp(6, 384) with its first 3 blocks frozen, input without a gradient


def _autocast_copies_frozen() -> int:
    """Exercise 3's answer, measured: bytes of 16-bit weight copies that a float16-autocast forward of
    ``deep_mlp(6, 384)`` with its first ``AUTOCAST_FROZEN`` blocks frozen saves (input without a gradient:
    only the blocks after the first trainable one get an input that needs a gradient)."""
    import torch

    from .precision import saved_split
    from .recipe import deep_mlp

    model, x = deep_mlp(6, 384), torch.randn(32, 384)
    for p in model[:AUTOCAST_FROZEN].parameters():
        p.requires_grad_(False)
    with torch.autocast("cpu", dtype=torch.float16):
        return saved_split(lambda: model(x))["weight_casts"]


class _UsedTheReference(Exception):
    """Raised by the stand-in for the course's evaluate() while a student's mean_loss runs (06)."""


def _mean_loss_behaviour(fn) -> str | None:
    """The student's ``mean_loss(model, batches)``: the per-sample mean, a float, nothing kept for backward (06)."""
    import torch
    from torch import nn

    from ..core.saved import SavedTensorTracker
    from .recipe import small_mlp

    for case, sizes in enumerate(MEAN_LOSS_CASES):
        model = small_mlp(seed=case)
        g = torch.Generator().manual_seed(100 + case)
        batches = [(torch.rand(n, 64, generator=g), torch.randint(0, 10, (n,), generator=g)) for n in sizes]
        with torch.no_grad():
            want = (sum(nn.functional.cross_entropy(model(x), y, reduction="sum").item() for x, y in batches)
                    / sum(sizes))
            batch_means = sum(nn.functional.cross_entropy(model(x), y).item() for x, y in batches) / len(batches)
        one = 0
        for x, y in batches:  # the most one batch's graph holds: the largest batch's
            with SavedTensorTracker() as t:
                nn.functional.cross_entropy(model(x), y)
            one = max(one, t.peak)
        with SavedTensorTracker() as tracker, evaluate_refused(_UsedTheReference) as calls:
            try:
                got = fn(model, list(batches))  # if it raises, check() says so (checks._verify_code)
            except _UsedTheReference:
                got = None
            held, peak = tracker.live_bytes(), tracker.peak
        if calls:
            return tr("06.uses_evaluate", "your function calls the course's evaluate(): the exercise is to write "
                      "the evaluation loop yourself")
        label = ", ".join(map(str, sizes))
        if isinstance(got, torch.Tensor):
            return tr("06.returned_tensor", "mean_loss returned a tensor; return a Python float (a tensor with a graph "
                      "keeps that graph alive)")
        if not isinstance(got, float):
            return tr("06.not_float", "mean_loss returned {type}; return a float", type=type(got).__name__)
        if abs(got - want) > 1e-5 * max(1.0, abs(want)):
            if len(set(sizes)) > 1 and abs(got - batch_means) <= 1e-5 * max(1.0, abs(batch_means)):
                return tr("06.batch_means", "with batches of {sizes} samples, you returned the mean of the batches' "
                          "means: every sample must weigh the same, and a smaller batch holds fewer samples", sizes=label)
            return tr("06.not_the_mean", "with batches of {sizes} samples, the value is not the mean loss over all "
                      "samples", sizes=label)
        if peak > 2 * one:
            return tr("06.graphs_alive", "with batches of {sizes} samples, autograd held up to {n:.0f} batches' worth "
                      "of saved tensors at once while mean_loss ran: each batch's graph stays alive until the end",
                      sizes=label, n=peak / one)
        if held:
            return tr("06.kept_after", "with batches of {sizes} samples, after mean_loss returned autograd still held "
                      "{bytes:,} bytes saved for a backward that never comes", sizes=label, bytes=held)
    return None


EXERCISES = [
    Exercise("06.leak_largest_batch", "int", compute=_leak_largest_batch,
             hint="Which of the tensors one iteration saves grow with the batch, and by how many bytes per sample? "
                  "Which one does not?",
             why="The leak is linear in the batch: bytes per sample × batch, plus what does not depend on it."),
    Exercise("06.mean_loss", "code", behaviour=_mean_loss_behaviour,
             hint="Two habits each fix it: evaluate without building a graph at all, and add up numbers, not tensors. "
                  "Batches can differ in size, and every sample counts the same.",
             why="Nothing is kept once the function returns: the memory after an evaluation loop is what it was before."),
    Exercise("06.checkpoint_n64", "int", compute=_checkpoint_64_in_4,
             hint="checkpoint_sequential keeps each segment's input, and runs its last segment normally, so that "
                  "segment keeps its blocks' outputs too.",
             why="s segments of n blocks keep s + n/s activations, fewest at s = √n: 2√n instead of n + 1."),
    Exercise("06.autocast_copies", "int", compute=_autocast_copies_frozen,
             hint="A matmul saves its weight's 16-bit copy only for one gradient. Which one, and which blocks' "
                  "inputs need it?",
             why="The copy serves the gradient of the matmul's input: a layer whose input needs a gradient keeps "
                 "it, whatever the batch."),
]


def bench_memory(blocks: int = 16) -> dict:
    """The leak's bytes per iteration (bug, fix) and the saved bytes of each remedy (06)."""
    bug, fix = leak_curve(False), leak_curve(True)
    rem = remedies(blocks=blocks)
    return {"device": hardware_label("cpu"), "measured_with": "SavedTensorTracker (saved_tensors_hooks)",
            "leak_bytes_per_iter": {"bug": bug["bytes_per_iter"], "fix": fix["bytes_per_iter"]},
            "saved_activation_bytes": {k: rem[k] for k in ("plain", "no_grad", "inference_mode", "autocast", "checkpoint")},
            "checkpoint_blocks": rem["checkpoint_blocks"], "checkpoint_segments": rem["checkpoint_segments"],
            "checkpoint_expected_bytes": rem["checkpoint_expected"], "autocast_dtype": rem["autocast_dtype"]}


BENCH = {"memory": bench_memory}


def readme_figures(results: dict) -> str:
    """The key figures of notebook 06 for the README's table, from ``bench_memory``'s JSON."""
    m = results["memory"]
    b = m["saved_activation_bytes"]
    return (f"leak {m['leak_bytes_per_iter']['bug']:,} B/iteration, fix {m['leak_bytes_per_iter']['fix']} B; one forward "
            f"of {m['checkpoint_blocks']} blocks keeps {b['plain'] / 1e6:.1f} MB plain, {b['no_grad']} under no_grad, "
            f"{b['autocast'] / b['plain']:.0%} under {m['autocast_dtype']} autocast, {b['checkpoint'] / b['plain']:.0%} "
            f"with {m['checkpoint_segments']} checkpoint segments")
