"""Notebook 00 (setup): its exercises. The code it teaches is the course's core: device, data, models, train."""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Callable, Iterator

from ..core.checks import Exercise
from ..core.i18n import tr

NOTEBOOK = "00_setup"


def _params_hidden128() -> int:
    from ..core.models import DigitsCNN, count_parameters

    return count_parameters(DigitsCNN(hidden=128))["total"]


def _threads_two_processes() -> int:
    return max(1, (os.cpu_count() or 1) // 2)


def _gpus_visible_0() -> int:
    """GPUs torch would report in a process started with CUDA_VISIBLE_DEVICES=0: GPU 0 alone, if there is one."""
    from ..core.device import gpu_count, nvml_gpus

    return 1 if (nvml_gpus() or gpu_count()) else 0


class _UsedTheReference(Exception):
    """Raised by the stand-in for the course's evaluate() while a student's accuracy() runs."""


@contextmanager
def _reference_hidden(fn: Callable) -> Iterator[list]:
    """While the block runs, the course's ``evaluate`` (wherever the student's code could reach it: the
    function's globals, ``helpers`` and its modules) is a stand-in that records the call and raises."""
    from ..core import train as train_module

    reference, calls = train_module.evaluate, []

    def stand_in(*args, **kwargs):
        calls.append(args)
        raise _UsedTheReference("the course's evaluate() is not available inside this exercise")

    spots = [(vars(m), name) for m in list(sys.modules.values())
             if getattr(m, "__name__", "").split(".")[0] == "helpers"
             for name, value in list(vars(m).items()) if value is reference]
    spots += [(fn.__globals__, name) for name, value in list(getattr(fn, "__globals__", {}).items())
              if value is reference]
    for space, name in spots:
        space[name] = stand_in
    try:
        yield calls
    finally:
        for space, name in spots:
            space[name] = reference


def _right_fraction(model, loader) -> float:
    """The fraction of ``loader``'s samples whose largest output is the label: counted here, by rule."""
    import torch

    right, seen = 0, 0
    with torch.no_grad():
        for x, y in loader:
            right += (model(x).argmax(1) == y).sum().item()
            seen += len(y)
    return right / seen


def _accuracy_behaviour(accuracy: Callable) -> str | None:
    """The student's ``accuracy(model, loader)`` on several models and loaders, counted by rule, with the course's
    ``evaluate`` out of reach and autograd watched (00)."""
    import torch
    from torch.utils.data import DataLoader, Subset

    from ..core.data import load_datasets
    from ..core.models import MLP, DigitsCNN
    from ..core.saved import SavedTensorTracker

    ds = load_datasets("digits")
    cases = [(lambda: DigitsCNN(), DataLoader(ds["val"], batch_size=64), "an untrained DigitsCNN, batches of 64"),
             (lambda: MLP(), DataLoader(ds["test"], batch_size=100), "an untrained MLP, batches of 100"),
             (lambda: DigitsCNN(hidden=16), DataLoader(Subset(ds["train"], range(77)), batch_size=32),
              "a small DigitsCNN on 77 samples, batches of 32")]
    with _reference_hidden(accuracy) as calls:
        for seed, (make, loader, what) in enumerate(cases):
            torch.manual_seed(seed)
            model = make()
            try:
                with SavedTensorTracker() as tracker:
                    got = accuracy(model, loader)
            except _UsedTheReference:
                got = None
            if calls:
                return tr("00.uses_evaluate", "your function calls the course's evaluate(): the exercise is to "
                          "write what evaluate() does, with your own loop")
            if not isinstance(got, (float, int)) or isinstance(got, bool):
                return tr("00.not_a_number", "for {what}, your function returned a {type}; return a Python number "
                          "(a one-element tensor's .item() is one)", what=what, type=type(got).__name__)
            if abs(got - _right_fraction(model, loader)) > 1e-9:
                return tr("00.not_the_fraction", "for {what}, your function returned {got:.4g}, which is not the "
                          "fraction of those samples whose largest output is the label", what=what, got=float(got))
            if tracker.peak > 0:
                return tr("00.kept_graph", "it kept {bytes:,} bytes of activations for a backward pass that "
                          "evaluation never runs: no graph is needed here", bytes=tracker.peak)
    return None


EXERCISES = [
    Exercise("00.threads_two_processes", "int", compute=_threads_two_processes,
             hint="The threads of every process share the same cores: how many cores does the device table count, "
                  "and how many does that leave for each process?",
             why="More threads than cores take turns on them; the course's launcher gives each process 1 thread "
                 "unless told otherwise."),
    Exercise("00.gpus_visible_0", "int", compute=_gpus_visible_0,
             hint="The variable lists the indices of the GPUs a process may see; which GPUs does this machine have?",
             why="Launchers such as Ray give each worker its GPU this way: inside, that GPU is cuda:0."),
    Exercise("00.params_hidden128", "int", compute=_params_hidden128,
             hint="A convolution has in·out·k·k weights plus out biases; a Linear has in·out plus out. Which "
                  "layers change when the hidden width does?",
             why="Only the two layers around the hidden width grow: parameter counts follow from the shapes."),
    Exercise("00.batches_of_100", "int", digest="fafbeb140d2d8486d08576247adbfdd6b8aad8b0b754ff0c9709d995d4a0827b",
             hint="A loader without drop_last makes one more, smaller batch from what is left over.",
             why="The last batch is smaller: per-batch averages weigh its samples a little more."),
    Exercise("00.accuracy_no_grad", "code", behaviour=_accuracy_behaviour,
             hint="What does autograd keep while a forward runs, and which context tells it not to? Batches go "
                  "where the model is; a prediction is the class with the largest output, and the last batch can "
                  "be smaller than the others.",
             why="Without a graph, evaluation keeps no activations: it needs a fraction of training's memory."),
]
