"""Notebook 00 (setup): its exercises. The code it teaches is the course's core: device, data, models, train."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

from ..core.checks import Exercise
from ..core.i18n import tr

NOTEBOOK = "00_setup"


def _params_hidden128() -> int:
    from ..core.models import DigitsCNN, count_parameters

    return count_parameters(DigitsCNN(hidden=128))["total"]


class _UsedTheReference(Exception):
    """Raised by the stand-in for the course's evaluate() while a student's accuracy() runs."""


@contextmanager
def _reference_hidden(fn: Callable) -> Iterator[list]:
    """While the block runs, the course's ``evaluate`` records each call and raises, however the student's code
    reached it (a global, an import, a default argument, a closure, a partial): the refusal sits inside
    ``evaluate`` itself (``helpers.core.train._REFUSE``)."""
    from ..core import train as train_module

    calls: list = []

    def refuse(args):
        calls.append(args)
        raise _UsedTheReference("the course's evaluate() is not available inside this exercise")

    train_module._REFUSE.append(refuse)
    try:
        yield calls
    finally:
        train_module._REFUSE.remove(refuse)


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
            finally:
                grad_was_on = torch.is_grad_enabled()
                torch.set_grad_enabled(True)
            if calls:
                return tr("00.uses_evaluate", "your function calls the course's evaluate(): the exercise is to "
                          "write what evaluate() does, with your own loop")
            if not grad_was_on:
                return tr("00.left_grad_off", "your function switched autograd off and left it off: after it "
                          "returns, no training step anywhere in this process would build a graph. Switch it "
                          "off only inside your function (a with block restores it)")
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
    Exercise("00.threads_3_on_16", "int",
             digest="fa80b2475d6f28ed7f9b935f72876aaf7a3f536ea60c351a5bd62cde480fd2c6",
             hint="Every thread of every process needs a core of its own: how many threads in all may the processes "
                  "run, and what share of them may each take without going over?",
             why="More threads than cores take turns on them; the rounding goes down, leaving a core idle rather "
                 "than oversubscribed."),
    Exercise("00.gpus_visible_2_3", "ints",
             digest="dfd04ba224ed0b7c04dc2497d40866ac53782fd1677234fa8e7a198c61f8b8ae",
             hint="Inside the process, torch numbers only the GPUs the variable lists, from 0, in the order listed.",
             why="Launchers such as Ray give each worker its GPUs this way: inside, the first one listed is cuda:0."),
    Exercise("00.params_hidden128", "int", compute=_params_hidden128,
             hint="A convolution has in·out·k·k weights plus out biases; a Linear has in·out plus out. Which "
                  "layers change when the hidden width does?",
             why="Only the two layers around the hidden width grow: parameter counts follow from the shapes."),
    Exercise("00.batches_of_100", "int", digest="fafbeb140d2d8486d08576247adbfdd6b8aad8b0b754ff0c9709d995d4a0827b",
             hint="How many training samples are there, and what does a loader do with the samples that do not fill "
                  "a whole batch (see its drop_last argument)?",
             why="The last batch is smaller: per-batch averages weigh its samples a little more."),
    Exercise("00.accuracy_no_grad", "code", behaviour=_accuracy_behaviour,
             hint="What does autograd keep while a forward runs, and which context tells it not to? Batches go "
                  "where the model is; a prediction is the class with the largest output, and the last batch can "
                  "be smaller than the others.",
             why="Without a graph, evaluation keeps no activations: it needs a fraction of training's memory."),
]


def threads_verdict(runs: list[tuple[int, float]], default: int) -> tuple[int, str]:
    """Section 3's reading of ``(threads, seconds)`` runs: every run printed, and a winner only when the faster
    count's slowest run beats the other count's fastest; otherwise no clear difference, and ``default`` (00)."""
    by = {}
    for n, s in runs:
        by.setdefault(n, []).append(s)
    shown = "; ".join(f"{n} thread(s): " + ", ".join(f"{s:.3f}" for s in ss) + " s per epoch" for n, ss in by.items())
    if len(by) < 2:
        return default, f"{shown}: one count only, nothing to compare; training keeps {default} thread(s)"
    fast, slow = sorted(by, key=lambda n: min(by[n]))
    if max(by[fast]) < min(by[slow]):
        return fast, (f"{shown}\n{fast} thread(s) faster in every run ({max(by[fast]):.3f} s slowest against "
                      f"{min(by[slow]):.3f} s fastest): used for the training run below")
    return default, (f"{shown}\nno clear difference (the runs overlap): the training run below keeps the "
                     f"default, {default} thread(s)")
