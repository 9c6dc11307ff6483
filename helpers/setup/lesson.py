"""Notebook 00 (setup): its exercises. The code it teaches is the course's core: device, data, models, train."""
from __future__ import annotations

import os
from typing import Callable

from ..core.checks import Exercise

NOTEBOOK = "00_setup"


def _params_hidden128() -> int:
    from ..core.models import DigitsCNN, count_parameters

    return count_parameters(DigitsCNN(hidden=128))["total"]


def _gpus() -> int:
    from ..core.device import gpu_count

    return gpu_count()


def _accuracy_behaviour(accuracy: Callable) -> str | None:
    """The student's ``accuracy(model, loader)`` against ``evaluate()``, and against building a graph (00)."""
    import torch

    from ..core.data import make_loaders
    from ..core.models import DigitsCNN
    from ..core.saved import SavedTensorTracker
    from ..core.train import evaluate

    loader = make_loaders(64)["val"]
    for seed in (0, 1):
        torch.manual_seed(seed)
        model = DigitsCNN()
        with SavedTensorTracker() as tracker:
            got = accuracy(model, loader)
        want = evaluate(model, loader)["acc"]
        if not isinstance(got, (float, int)) or abs(float(got) - want) > 1e-9:
            return f"for an untrained model your accuracy is {got!r}, evaluate() says {want:.4f}"
        if tracker.peak > 0:
            return (f"it kept {tracker.peak:,} bytes of activations for a backward pass that evaluation never "
                    "runs: no graph is needed here")
    return None


EXERCISES = [
    Exercise("00.cores", "int", compute=lambda: os.cpu_count(),
             hint="Python's os module can tell you; so can the device table's CPU row.",
             why="Every timing the course prints says how many cores produced it."),
    Exercise("00.gpus", "int", compute=_gpus, hint="Count the rows of kind GPU in the device table.",
             why="With none, every notebook takes its CPU path and says what a GPU would show."),
    Exercise("00.params_hidden128", "int", compute=_params_hidden128,
             hint="A convolution has in·out·k·k weights plus out biases; a Linear has in·out plus out. Which "
                  "layers change when the hidden width does?",
             why="Only the two layers around the hidden width grow: parameter counts follow from the shapes."),
    Exercise("00.batches_of_100", "int", digest="fafbeb140d2d8486d08576247adbfdd6b8aad8b0b754ff0c9709d995d4a0827b",
             hint="A loader without drop_last makes one more, smaller batch from what is left over.",
             why="The last batch is smaller: per-batch averages weigh its samples a little more."),
    Exercise("00.accuracy_no_grad", "code", behaviour=_accuracy_behaviour,
             hint="What does autograd keep while a forward runs, and which context tells it not to? Batches go "
                  "where the model is; a prediction is the class with the largest output.",
             why="Without a graph, evaluation keeps no activations: it needs a fraction of training's memory."),
]
