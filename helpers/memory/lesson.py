"""Notebook 06 (out-of-memory troubleshooting): its exercises and its benchmark."""
from __future__ import annotations

from ..core.checks import Exercise
from ..core.device import hardware_label
from .instruments import leak_curve, remedies


NOTEBOOK = "06_oom_troubleshooting"


def _leak_batch128() -> int:
    return leak_curve(False, iterations=3, batch=128)["bytes_per_iter"]


def _mean_loss_behaviour(fn) -> str | None:
    """The student's ``mean_loss(model, batches)``: the right mean, a float, and nothing kept for backward (06)."""
    import torch
    from torch import nn

    from ..core.saved import SavedTensorTracker
    from .recipe import small_mlp

    model = small_mlp()
    g = torch.Generator().manual_seed(1)
    batches = [(torch.rand(16, 64, generator=g), torch.randint(0, 10, (16,), generator=g)) for _ in range(5)]
    with torch.no_grad():
        want = sum(nn.functional.cross_entropy(model(x), y).item() for x, y in batches) / len(batches)
    with SavedTensorTracker() as one:
        nn.functional.cross_entropy(model(batches[0][0]), batches[0][1])
    with SavedTensorTracker() as tracker:
        got = fn(model, batches)  # if it raises, check() says so (checks._verify_code)
        held, peak = tracker.live_bytes(), tracker.peak
    if isinstance(got, torch.Tensor):
        return "mean_loss returned a tensor; return a Python float (a tensor with a graph keeps that graph alive)"
    if not isinstance(got, float):
        return f"mean_loss returned {type(got).__name__}; return a float"
    if abs(got - want) > 1e-5:
        return "the value is not the mean of the batches' losses"
    if peak > 2 * one.peak:
        return (f"while mean_loss ran, autograd held up to {peak / one.peak:.0f} batches' worth of saved tensors at once: "
                "each batch's graph stays alive until the end")
    if held:
        return f"after mean_loss returned, autograd still held {held:,} bytes saved for a backward that never comes"
    return None


EXERCISES = [
    Exercise("06.leak_batch128", "int", compute=_leak_batch128,
             hint="List the tensors each iteration saves (input, both ReLU outputs, the log-softmax, the targets, "
                  "one scalar): which of them grow with the batch, and by how many bytes per sample?",
             why="The leak grows linearly with the batch: a bigger batch hits the wall sooner."),
    Exercise("06.mean_loss", "code", behaviour=_mean_loss_behaviour,
             hint="Two habits each fix it: evaluate without building a graph at all, and add up numbers, not tensors.",
             why="Nothing is kept once the function returns: the memory after an evaluation loop is what it was before."),
    Exercise("06.checkpoint_n64", "int", digest="a832cc9d987dc6b16f7ad3788848204ecf9ae7619c190257e8d29acf4f15972a",
             hint="With s segments you keep each segment's input, plus the outputs of the one segment being "
                  "recomputed.",
             why="√n segments keep O(√n) activations instead of n: memory for one extra forward."),
    Exercise("06.fp16_bytes", "int", digest="bdf13d280865baba92e50868439e33ab355a535ca70ddc3f170aabd3f2c66ced",
             hint="How many bytes does one float16 number take?",
             why="Half of float32: 16-bit halves activations and weights alike."),
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
