"""Notebook 07 (transfer learning and augmentation): its exercises."""
from __future__ import annotations

from typing import Callable

from ..core.checks import Exercise

NOTEBOOK = "07_transfer_learning"


def _freeze_behaviour(fn: Callable) -> str | None:
    """The student's ``freeze_all_but(model, head)`` on two models: what trains, and what one step changes (07)."""
    import copy

    import torch
    from torch import nn

    from ..core.models import DigitsCNN

    torch.manual_seed(0)
    cases = [(DigitsCNN(), "classifier"), (nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 4)), "2")]
    cases[1][0][2].requires_grad_(False)  # a head frozen before: the function must make it train
    for model, head in cases:
        before = copy.deepcopy(model)
        try:
            fn(model, head)
        except Exception as e:  # noqa: BLE001 (a student's bug, reported in words)
            return f"freeze_all_but(model, {head!r}) raised {type(e).__name__}: {e}"
        for name, p in model.named_parameters():
            in_head = name.startswith(head + ".")
            if p.requires_grad != in_head:
                return (f"after freeze_all_but(model, {head!r}) the parameter {name!r} has requires_grad="
                        f"{p.requires_grad}; only the head's parameters should train")
        x = torch.randn(4, 1, 8, 8) if isinstance(model, DigitsCNN) else torch.randn(4, 8)
        opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
        model(x).sum().backward()
        opt.step()
        for (name, p), q in zip(model.named_parameters(), before.parameters()):
            if not name.startswith(head + ".") and not torch.equal(p, q):
                return f"{name!r} changed in a training step although it should be frozen"
    return None


EXERCISES = [
    Exercise("07.head_params_10", "int", digest="d3522682c79a5ae656f80fda140bad5c25d28b606400fb8a82e27621893a9b99",
             hint="A Linear layer has a weight for every (input, output) pair and a bias for every output; the "
                  "backbone's last hidden layer has 64 features.",
             why="A new head for 10 classes is tiny next to the backbone: training only it is cheap, and fast."),
    Exercise("07.crop_positions_pad2", "int", digest="e2f209751e1a8f38eedcf86b80c3e8f0718c5f740f35d57905881edcb18500db",
             hint="Padding makes the image larger on every side; in how many places can an 8×8 window sit in it, "
                  "horizontally times vertically?",
             why="RandomCrop with padding is a random shift: each position is one of the shifted copies the model sees."),
    Exercise("07.freeze_all_but", "code", behaviour=_freeze_behaviour,
             hint="requires_grad_(False) works on a whole module and everything in it; model.get_submodule(name) "
                  "finds the head by its name. Mind a head that was frozen before.",
             why="Freeze everything, then unfreeze what should train: two lines, and it cannot miss a layer."),
]
