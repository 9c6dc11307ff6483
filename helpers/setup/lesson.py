"""Notebook 00 (setup): its exercises. The code it teaches is the course's core: device, data, models, train."""
from __future__ import annotations

from typing import Callable

from ..core.checks import Exercise
from ..core.i18n import tr
from .readings import libgomp_spin_count, openmp_runtime  # noqa: F401  (section 3's OpenMP check)
from .verdicts import cpu_pressure_total, pressure_meaning, threads_verdict  # noqa: F401  (section 3's readings)

NOTEBOOK = "00_setup"


class _UsedTheReference(Exception):
    """Raised by the stand-in for the course's evaluate() while a student's accuracy() runs."""


def _accuracy_behaviour(accuracy: Callable) -> str | None:
    """The student's ``accuracy(model, loader)`` on several models and loaders, counted by rule, with the course's
    ``evaluate`` out of reach and autograd watched (00). One model has BatchNorm and is handed over in training mode
    (a function without ``model.eval()`` answers differently), and again in evaluation mode, to go back in it (an
    unconditional ``model.train()`` at the end fails); one DigitsCNN comes with its ``features`` frozen
    (``requires_grad=False``, as notebook 07 freezes a backbone), and must go back so: a function that freezes every
    parameter and then unfreezes them all fails; where a GPU or MPS exists, one model sits there (a function that
    does not send batches to the model's device fails). Each model must come back on the device, and with the
    parameter values and dtypes, and the buffers (BatchNorm's running statistics), it came with (``model.to("cpu")``
    fails where a GPU exists). Every expected fraction is counted before the student's function runs, by a local
    loop that no module exposes."""
    import copy

    import torch
    from torch import nn
    from torch.utils.data import DataLoader, Subset

    from ..core.data import load_datasets
    from ..core.device import get_device, model_device
    from ..core.models import MLP, DigitsCNN
    from ..core.saved import SavedTensorTracker

    def counted(model, loader) -> tuple[float, float]:   # (eval mode, train mode) on a copy: BatchNorm stats kept
        model = copy.deepcopy(model)
        dev = next(model.parameters()).device
        out = []
        for mode in (False, True):
            model.train(mode)
            right = seen = 0
            with torch.no_grad():
                for x, y in loader:
                    right += (model(x.to(dev)).argmax(1).cpu() == y).sum().item()
                    seen += len(y)
            out.append(right / seen)
        return out[0], out[1]

    def frozen_features() -> nn.Module:   # a frozen backbone and a trainable head, as notebook 07 trains one
        model = DigitsCNN()
        model.features.requires_grad_(False)
        return model

    def with_batchnorm() -> nn.Module:
        return nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 10))

    ds = load_datasets("digits")
    accel = get_device()
    cases = [(lambda: DigitsCNN(), DataLoader(ds["val"], batch_size=64),
              tr("lesson.accuracy_no_grad.case_cnn", "an untrained DigitsCNN, batches of 64"), True),
             (lambda: MLP(), DataLoader(ds["test"], batch_size=100),
              tr("lesson.accuracy_no_grad.case_mlp", "an untrained MLP, batches of 100"), True),
             (lambda: DigitsCNN(hidden=16), DataLoader(Subset(ds["train"], range(77)), batch_size=32),
              tr("lesson.accuracy_no_grad.case_small", "a small DigitsCNN on 77 samples, batches of 32"), True),
             (with_batchnorm, DataLoader(ds["val"], batch_size=50), tr("lesson.accuracy_no_grad.case_bn_train",
              "an untrained MLP with BatchNorm, handed over in training mode, batches of 50"), True),
             (with_batchnorm, DataLoader(ds["test"], batch_size=128), tr("lesson.accuracy_no_grad.case_bn_eval",
              "an untrained MLP with BatchNorm, handed over in evaluation mode, batches of 128"), False),
             (frozen_features, DataLoader(ds["val"], batch_size=64), tr("lesson.accuracy_no_grad.case_frozen",
              "a DigitsCNN whose features are frozen (requires_grad=False), batches of 64"), True)]
    if accel.type != "cpu":
        cases.append((lambda: DigitsCNN().to(accel), DataLoader(ds["val"], batch_size=64),
                      tr("lesson.accuracy_no_grad.case_accel", "an untrained DigitsCNN on {device}, batches of 64 "
                         "from a loader on the CPU", device=str(accel)), True))
    models, expected = [], []
    for seed, (make, loader, what, _) in enumerate(cases):
        torch.manual_seed(seed)
        models.append(make())
        expected.append(counted(models[-1], loader))
    from ..core.train import evaluate_refused  # imported here: importing the lesson stays light
    with evaluate_refused(_UsedTheReference) as calls:
        for model, (eval_frac, train_frac), (_, loader, what, came_training) in zip(models, expected, cases):
            model.train(came_training)
            came_on = model_device(model)
            came_as = [(p.device, p.dtype, p.detach().clone()) for p in model.parameters()]
            came_grad = [p.requires_grad for p in model.parameters()]
            came_bufs = [(b.device, b.dtype, b.detach().clone()) for b in model.buffers()]   # BatchNorm's statistics
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
            bufs_changed = any(b.device != d or b.dtype != t or not torch.equal(b.detach(), v)
                               for b, (d, t, v) in zip(model.buffers(), came_bufs))
            changed_bufs = tr("00.changed_buffers", "for {what}, your function changed the model's buffers "
                              "(BatchNorm's running statistics, which a forward in training mode updates): "
                              "evaluation only reads them. Hand them back as they came", what=what)
            if abs(got - eval_frac) > 1e-9:
                if abs(got - train_frac) <= 1e-9 and abs(eval_frac - train_frac) > 1e-9:
                    return tr("00.train_mode", "for {what}, your function returned what the model predicts in "
                              "training mode; which mode does evaluation use?", what=what)
                if bufs_changed:
                    return changed_bufs
                return tr("00.not_the_fraction", "for {what}, your function returned {got:.4g}, which is not the "
                          "fraction of those samples whose largest output is the label", what=what, got=float(got))
            if tracker.peak > 0:
                return tr("00.kept_graph", "it kept {bytes:,} bytes of activations for a backward pass that "
                          "evaluation never runs: no graph is needed here", bytes=tracker.peak)
            if not came_training and any(m.training for m in model.modules()):
                return tr("00.left_train", "for {what}, your function handed the model back in training mode; it "
                          "came in evaluation mode, as a model that is only being evaluated does. Hand it back in the "
                          "mode it came in", what=what)
            if came_training and not all(m.training for m in model.modules()):
                return tr("00.left_eval", "for {what}, your function handed the model back in evaluation mode; "
                          "it came in training mode, and the training that goes on after your function would run "
                          "its layers as in evaluation. Hand it back in the mode it came in", what=what)
            now_grad = [p.requires_grad for p in model.parameters()]
            frozen = sum(was and not now for was, now in zip(came_grad, now_grad))
            unfrozen = sum(now and not was for was, now in zip(came_grad, now_grad))
            if unfrozen:
                return tr("00.unfroze_params", "for {what}, your function handed {n} of the model's parameter tensors "
                          "back with requires_grad=True; they came frozen (requires_grad=False), and training would "
                          "now update them, as it would a backbone that notebook 07 freezes. Leave each parameter's "
                          "requires_grad as it came", what=what, n=unfrozen)
            if frozen:
                return tr("00.froze_params", "for {what}, your function left {n} of the model's parameter tensors "
                          "with requires_grad=False: training would no longer update them. Leave the model's "
                          "parameters as they came", what=what, n=frozen)
            if model_device(model) != came_on:
                return tr("00.moved_model", "for {what}, your function handed the model back on {now}; it came on "
                          "{came}, where the training that goes on after your function expects it. Send the batches "
                          "to the model's device, not the model to where the batches are", what=what,
                          now=str(model_device(model)), came=str(came_on))
            if any(p.device != d or p.dtype != t or not torch.equal(p.detach(), v)
                   for p, (d, t, v) in zip(model.parameters(), came_as)):
                return tr("00.changed_params", "for {what}, your function changed the model's parameters (their "
                          "values, dtype or device): evaluation only reads them. Hand them back as they came", what=what)
            if bufs_changed:
                return changed_bufs
    return None


EXERCISES = [
    Exercise("00.threads_3_on_16", "int", digest="fa80b2475d6f28ed7f9b935f72876aaf7a3f536ea60c351a5bd62cde480fd2c6",
             hint="Every thread of every process needs a core of its own: how many threads in all may the processes "
                  "run, and what share of them may each take without going over?",
             why="More threads than cores take turns on them; the rounding goes down, leaving a core idle rather "
                 "than oversubscribed."),
    Exercise("00.gpus_visible_2_0_3", "ints", digest="24dcb037b85061247d7376a490d08ac869f5f0fff3fc5bc96b8a318bd3c68a4a",
             hint="Write down the list of GPUs this process can see, in the variable's order; then count and number "
                  "that list the way section 2 says torch does.",
             why="Launchers such as Ray give each worker its GPUs this way: inside, torch numbers the listed GPUs "
                 "from 0 in the listed order, whatever their numbers outside."),
    Exercise("00.params_hidden128", "int", digest="87f5a9c253ba0d5f7aa79c59027ee19bc43f32d9d83f422477e20ac25383b545",
             hint="In print(model), which layer's input size comes from the pooled feature maps? Work out the shape "
                  "Flatten would hand it without the pool; a Linear has in·out weights plus out biases.",
             why="The 2×2 pool quarters what the first Linear (`features.6`, just before the ReLU that ends "
                 "`features`) sees, and that Linear holds most of the model's parameters."),
    Exercise("00.batches_of_100", "int", digest="4ece535d08f61c2076c37aaf4e2a68b64213ce729ebb5f051d1269cc8f58590a",
             hint="How many training samples are there, and how many whole batches of 100 do they fill? See what "
                  "DataLoader's drop_last argument does with the rest.",
             why="With drop_last=True every batch is full, and the samples left over are skipped; the shuffle "
                 "decides which ones, so each epoch skips different ones."),
    Exercise("00.accuracy_no_grad", "code", behaviour=_accuracy_behaviour,
             hint="What does autograd keep while a forward runs, and which context tells it not to? Batches go "
                  "where the model is; a prediction is the class with the largest output, and the last batch can "
                  "be smaller than the others. Which of a model's layers behave differently in evaluation?",
             why="Without a graph, evaluation keeps no activations for a backward pass (the check measured what "
                 "autograd kept while your function ran). "
                 "On a machine with no GPU or MPS, the check had no second device to put a model on, so it could not "
                 "test that your batches go where the model is; on one that has, it does."),
]
