"""Notebook 10 (beyond one machine): its exercises.

The code exercise is a training loop with dropout, Adam, a learning-rate schedule and a shuffled loader, in one
process; the student writes what it saves after each epoch and what it restores before the first. The check
stops a run after some epochs and resumes it as a new process would (from the random state ``exercise_setup``
leaves, not where the stopped run was), then compares the
resumed run with an uninterrupted one: the epochs each trained, the optimizer steps each took, the parameters.
"""
from __future__ import annotations

import os
import random
import tempfile
from typing import Callable

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from ..core.checks import Exercise
from ..core.i18n import tr

NOTEBOOK = "10_beyond_one_machine"

__all__ = ["exercise_setup"]


def exercise_setup() -> tuple[nn.Module, torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler, DataLoader]:
    """The exercise's model (with dropout), Adam, a decaying learning rate (LambdaLR) and a shuffled loader, built afresh (10).

    The weights and the data are seeded; the dropout masks and the shuffling draw from torch's global random
    state, as they do in a real run.
    """
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(64, 8, generator=g), torch.randint(0, 2, (64,), generator=g))
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.5), nn.Linear(16, 2))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda epoch: 1 / (1 + epoch))   # lr / (1 + epoch)
    return model, optimizer, scheduler, DataLoader(data, batch_size=16, shuffle=True)


RESUME_SKELETON = """\
import os
from torch import nn

def train(epochs, path, on_epoch):
    model, optimizer, scheduler, loader = exercise_setup()
    start = 0
    if os.path.exists(path):
        ...   # your code: restore what the next epoch depends on, and set start
    for epoch in range(start, epochs):
        on_epoch(epoch)
        for x, y in loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
        scheduler.step()
        ...   # your code: save what a resumed run needs
    return model
"""   # notebook 10's exercise cell, above its check(): a scaffold, so the check knows it untouched (is_skeleton)


def _run(train: Callable, epochs: int, path: str, seed: int) -> tuple[list[int], int, list[torch.Tensor]]:
    """``train(epochs, path, on_epoch)`` in a random state of its own (a new process's): epochs, steps, parameters."""
    from torch.optim.optimizer import register_optimizer_step_post_hook

    torch.manual_seed(seed)
    seen, steps = [], []
    handle = register_optimizer_step_post_hook(lambda opt, args, kwargs: steps.append(1))
    try:
        model = train(epochs, path, seen.append)
    finally:
        handle.remove()
    if not isinstance(model, nn.Module):
        raise TypeError(tr("lesson.resume.not_model", "train returned {type}, not the model: keep the skeleton's "
                           "`return model`", type=type(model).__name__))
    return seen, len(steps), [p.detach().clone() for p in model.parameters()]


def _resume_behaviour(train: Callable) -> str | None:
    """Stopped after k epochs and resumed in a fresh random state, the run must equal an uninterrupted one (10)."""
    per_epoch = 4   # 64 samples, batches of 16
    rnd = random.Random()
    for total, k in ((4, 2), (3, 1), (5, rnd.randint(1, 4))):
        with tempfile.TemporaryDirectory() as d:
            seen, steps, whole = _run(train, total, os.path.join(d, "whole.pt"), seed=rnd.randint(1, 10**6))
            if seen != list(range(total)) or steps != total * per_epoch:
                return tr("lesson.resume.uninterrupted", "an uninterrupted run of {total} epochs trained epochs {seen} "
                          "with {steps} optimizer steps; it should train 0 … {last}, {per_epoch} steps each",
                          total=total, seen=seen, steps=steps, last=total - 1, per_epoch=per_epoch)
            path = os.path.join(d, "stopped.pt")
            _run(train, k, path, seed=rnd.randint(1, 10**6))
            if not os.path.exists(path):
                return tr("lesson.resume.no_checkpoint", "after a run of {k} epochs there is no checkpoint at the path "
                          "train was given", k=k)
            seen, steps, resumed = _run(train, total, path, seed=rnd.randint(1, 10**6))
            if seen != list(range(k, total)) or steps != (total - k) * per_epoch:
                return tr("lesson.resume.resumed_epochs", "stopped after {k} of {total} epochs, the resumed run "
                          "trained epochs {seen} with {steps} optimizer steps; it should train only the epochs still "
                          "to do, {k} … {last}", k=k, total=total, seen=seen, steps=steps, last=total - 1)
            if not all(torch.equal(a, b) for a, b in zip(whole, resumed)):
                return tr("lesson.resume.params_differ", "stopped after {k} of {total} epochs and resumed, the "
                          "parameters differ from an uninterrupted run's: something the next epoch depends on was not "
                          "saved or not restored", k=k, total=total)
    return None


EXERCISES = [
    Exercise("10.resume", "code", behaviour=lambda fn: _resume_behaviour(fn), skeleton=RESUME_SKELETON,
             hint="List everything the next epoch depends on that building the model, the optimizer, the schedule "
                  "and the loader afresh does not give back.",
             why="A resumed run equals an uninterrupted one only when every state the next step reads is restored: "
                 "torch.save and torch.load of the state_dicts of model, optimizer and scheduler, the next epoch, and "
                 "torch.get_rng_state() / torch.set_rng_state() (with CUDA, torch.cuda.get_rng_state_all() too)."),
    Exercise("10.lost_minutes", "int", digest="11e509c21f246583f6b006e19a3f282ec3e9ac4adfd8634cb4cd43325a5d6a9e",
             hint="What is lost depends on when, between two checkpoints, the failure comes.",
             why="Half the interval on average, plus the restart. Checkpointing more often loses less per failure but "
                 "costs a save each time: Young's approximation puts the best interval near sqrt(2 × save time × mean "
                 "time between failures) (Young 1974, https://doi.org/10.1145/361147.361115)."),
]


def _bench() -> dict:
    from .bench import bench_resilience

    return bench_resilience()


BENCH = {"resilience": _bench}
LIMIT_S = 120   # notebook 10's run-time limit (the issue's)


def readme_figures(results: dict) -> str:
    """The key figures of notebook 10 for the README's table, from the benchmark's JSON (10)."""
    from .bench import readme_figures as figures

    return figures(results)
