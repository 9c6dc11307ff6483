"""Notebook 07 (transfer learning and augmentation): its exercises."""
from __future__ import annotations

from collections import OrderedDict
from typing import Callable

from ..core.checks import Exercise
from ..core.i18n import tr

NOTEBOOK = "07_transfer_learning"


def _freeze_cases() -> list[tuple[str, object, str]]:
    """The models ``freeze_all_but`` is judged on: (what, model, head name) (07).

    The course CNN; a backbone with BatchNorm (2-d in the features, 1-d between them) and two
    sibling layers named ``fc`` and ``fc2`` (the head is one of them; the other must stay frozen,
    so ``startswith(head)`` without the dot is caught), once with the head frozen before; a head that holds a BatchNorm layer of its
    own (it must keep training, statistics included); a head named by a dotted path.
    """
    import torch
    from torch import nn

    from ..core.models import DigitsCNN

    def body() -> nn.Sequential:
        return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                             nn.AdaptiveAvgPool2d(1), nn.Flatten())

    class Siblings(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.features, self.fc, self.bn, self.fc2 = body(), nn.Linear(4, 6), nn.BatchNorm1d(6), nn.Linear(6, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc2(torch.relu(self.bn(self.fc(self.features(x)))))

    torch.manual_seed(0)
    frozen_before = Siblings()
    frozen_before.fc2.requires_grad_(False)  # a head frozen before: the function must make it train
    bn_head = nn.Sequential(OrderedDict(body=body(), head=nn.Sequential(
        nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 3))))
    dotted = nn.Sequential(OrderedDict(net=nn.Sequential(*body(), nn.Linear(4, 3))))
    return [("the course CNN", DigitsCNN(), "classifier"),
            ("a model with layers fc and fc2", Siblings(), "fc"),
            ("a model whose head fc2 was frozen before", frozen_before, "fc2"),
            ("a model whose head holds a BatchNorm layer", bn_head, "head"),
            ("a model whose head is net.5", dotted, "net.5")]


def _freeze_behaviour(fn: Callable) -> str | None:
    """The student's ``freeze_all_but(model, head)``, called after ``model.train()`` as a training loop would,
    then two training steps: only the head's parameters and buffers may change, and they must (07)."""
    import torch

    for what, model, head in _freeze_cases():
        model.train()  # what a training loop does at the start of an epoch
        before = {n: t.detach().clone() for n, t in model.state_dict().items()}
        buffers = {n for n, _ in model.named_buffers()}
        fn(model, head)
        in_head = {n for n in before if n.startswith(head + ".")}
        for name, p in model.named_parameters():
            if p.requires_grad != (name in in_head):
                return tr("07.freeze_flag", "for {what} (head {head!r}) the parameter {name!r} has requires_grad={flag}; "
                          "only the head's parameters should train", what=what, head=head, name=name, flag=p.requires_grad)
        opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
        x = torch.randn(8, 1, 8, 8)
        for _ in range(2):
            opt.zero_grad()
            model(x).square().mean().backward()
            opt.step()
        after = model.state_dict()
        for name in before:
            moved = not torch.equal(before[name], after[name])
            if name not in in_head and moved:
                if name in buffers:
                    return tr("07.frozen_bn_moved", "for {what} (head {head!r}), the frozen BatchNorm buffer {name!r} "
                              "changed in two training steps: in training mode a BatchNorm layer updates its running "
                              "statistics from every batch, whatever requires_grad says", what=what, head=head, name=name)
                return tr("07.frozen_moved", "for {what} (head {head!r}), {name!r} changed in two training steps although "
                          "it should be frozen", what=what, head=head, name=name)
            if name in in_head and name in buffers and not moved and not name.endswith("num_batches_tracked"):
                return tr("07.head_bn_still", "for {what} (head {head!r}), the head's BatchNorm buffer {name!r} did not "
                          "change in two training steps: the head trains, so its BatchNorm layers must stay in training "
                          "mode", what=what, head=head, name=name)
    return None


EXERCISES = [
    Exercise("07.head_params_resnet_mlp", "int",
             digest="540f39be30ff994d687c2cbef15f63e19ffde50f350ee47fc0aebf282646520d",
             hint="A Linear layer has a weight for every (input, output) pair and a bias for every output; ReLU has "
                  "no parameters; count each Linear layer of the new head and add them.",
             why="Even a two-layer head is about 1 % of ResNet-18's 11.7 million parameters: training only the head "
                 "is cheap."),
    Exercise("07.crop_positions_pad2", "int", digest="e2f209751e1a8f38eedcf86b80c3e8f0718c5f740f35d57905881edcb18500db",
             hint="Padding makes the image larger on every side; in how many places can an 8×8 window sit in it, "
                  "horizontally times vertically?",
             why="RandomCrop with padding is a random shift: each position is one of the shifted copies the model sees."),
    Exercise("07.freeze_all_but", "code", behaviour=_freeze_behaviour,
             hint="requires_grad_(False) works on a whole module and everything in it; model.get_submodule(name) "
                  "finds a submodule by its dotted name. Mind a head that was frozen before, and what else a "
                  "training step changes in a BatchNorm layer (section 2).",
             why="Freeze everything, unfreeze the head, then keep the frozen BatchNorm layers in evaluation mode: "
                 "nothing outside the head can move."),
]
