"""Notebook 07 (transfer learning and augmentation): its exercises."""
from __future__ import annotations

from collections import OrderedDict
from typing import Callable

from ..core.checks import Exercise
from ..core.i18n import tr

NOTEBOOK = "07_transfer_learning"


def _freeze_cases() -> list[tuple[str, object, str]]:
    """The models ``freeze_all_but`` is judged on: (what, model, head name) (07).

    The course CNN; a backbone with BatchNorm (2-d in the features, 1-d between them, named
    ``fc_bn``) and two sibling layers named ``fc`` and ``fc2`` (the head is one of them; the other
    must stay frozen, so ``startswith(head)`` without the dot is caught for parameters; and
    ``fc_bn``, outside the head ``fc`` although its name extends it, must be in evaluation mode, so
    it is caught for BatchNorm membership too), once with the head frozen before; a head that holds BatchNorm layers of its
    own (they must keep training, statistics included), one of them without parameters (``affine=False``), so
    deciding by "all its parameters are frozen" (``freeze_batchnorm_stats``'s rule, shown in the notebook) puts it in
    evaluation mode: what decides is membership in the head; in the same model a parameterless BatchNorm in the
    backbone, which must be in evaluation mode, so "has parameters, all frozen" is caught too, and a head BatchNorm
    one level below the head's children, so membership by ``head.children()`` instead of ``head.modules()`` is
    caught; a head named by a dotted path.
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
            # fc_bn: frozen, outside the head fc, and its name starts with "fc"
            self.features, self.fc, self.fc_bn, self.fc2 = body(), nn.Linear(4, 6), nn.BatchNorm1d(6), nn.Linear(6, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc2(torch.relu(self.fc_bn(self.fc(self.features(x)))))

    torch.manual_seed(0)
    frozen_before = Siblings()
    frozen_before.fc2.requires_grad_(False)  # a head frozen before: the function must make it train
    bn_head = nn.Sequential(OrderedDict(body=nn.Sequential(*body(), nn.BatchNorm1d(4, affine=False)), head=nn.Sequential(
        nn.Linear(4, 6), nn.Sequential(nn.BatchNorm1d(6)), nn.ReLU(), nn.Linear(6, 6), nn.BatchNorm1d(6, affine=False),
        nn.ReLU(), nn.Linear(6, 3))))   # a parameterless BatchNorm in the head: it trains, yet has no parameter to
    # unfreeze; one in the backbone (body.5): frozen, yet has no frozen parameter either; head.1.0: a level deeper
    dotted = nn.Sequential(OrderedDict(net=nn.Sequential(*body(), nn.Linear(4, 3))))
    return [(tr("lesson.freeze_all_but.case_cnn", "the course CNN"), DigitsCNN(), "classifier"),
            (tr("lesson.freeze_all_but.case_siblings", "a model with layers fc and fc2"), Siblings(), "fc"),
            (tr("lesson.freeze_all_but.case_frozen_head", "a model whose head fc2 was frozen before"), frozen_before,
             "fc2"),
            (tr("lesson.freeze_all_but.case_bn_head", "a model whose head holds a BatchNorm layer"), bn_head, "head"),
            (tr("lesson.freeze_all_but.case_dotted", "a model whose head is net.5"), dotted, "net.5")]


def _blocked(model):
    """Stands in for ``freeze_batchnorm_stats``'s code while the check runs (it runs with that module's globals,
    so it imports what it needs; no free variables, like the code it replaces)."""
    from helpers.core.i18n import tr as _tr

    raise RuntimeError(_tr("07.helper_blocked", "it calls the notebook's freeze_batchnorm_stats, which does the "
                           "BatchNorm half of this exercise for you: write that step yourself"))


def _frozen_bn_uses_stored_stats(model, head: str) -> str | None:
    """One forward pass: every BatchNorm layer outside the head must normalise with its stored running statistics
    (as in evaluation mode), not with the batch's; a layer told not to track statistics still uses the batch's (07)."""
    import torch
    from torch import nn

    wrong, hooks = [], []

    def hook(name):
        def check(m, inputs, out):
            ref = nn.functional.batch_norm(inputs[0], m.running_mean, m.running_var, m.weight, m.bias, False, 0.0, m.eps)
            if m.running_mean is None or not torch.allclose(out, ref, atol=1e-5):
                wrong.append(name)
        return check

    for name, m in model.named_modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm) and not (name + ".").startswith(head + "."):
            hooks.append(m.register_forward_hook(hook(name)))
    try:
        with torch.no_grad():
            model(torch.randn(8, 1, 8, 8))
    finally:
        for h in hooks:
            h.remove()
    return wrong[0] if wrong else None


def _freeze_behaviour(fn: Callable) -> str | None:
    """The student's ``freeze_all_but(model, head)``, called after ``model.train()`` as a training loop would,
    must return ``model`` itself; then two training steps: only the head's parameters and buffers may change, and they must; frozen BatchNorm
    layers must normalise with their stored statistics. The notebook's ``freeze_batchnorm_stats`` is blocked (07)."""
    from . import recipe

    helper, code = recipe.freeze_batchnorm_stats, recipe.freeze_batchnorm_stats.__code__
    helper.__code__ = _blocked.__code__  # every name the student may hold for it, in any namespace
    try:
        return _judge_freeze(fn)
    finally:
        helper.__code__ = code


def _judge_freeze(fn: Callable) -> str | None:
    import torch

    for what, model, head in _freeze_cases():
        model.train()  # what a training loop does at the start of an epoch
        before = {n: t.detach().clone() for n, t in model.state_dict().items()}
        buffers = {n for n, _ in model.named_buffers()}
        returned = fn(model, head)
        if returned is not model:
            return tr("07.returns_model", "for {what} (head {head!r}), your function returned {got}, not the model it "
                      "was given: return model, so that a loop can write model = freeze_all_but(model, head)",
                      what=what, head=head, got=type(returned).__name__)
        if set(model.state_dict()) != set(before):
            return tr("07.layers_replaced", "for {what} (head {head!r}), the model's state_dict lost or gained entries "
                      "({names}): your function replaced layers (e.g. a BatchNorm by a FrozenBatchNorm2d). A training "
                      "loop calls it every epoch on the same model: keep the layers, and set requires_grad and each "
                      "layer's mode instead", what=what, head=head,
                      names=", ".join(sorted(set(model.state_dict()) ^ set(before))[:3]))
        in_head = {n for n in before if n.startswith(head + ".")}
        for name, p in model.named_parameters():
            if p.requires_grad != (name in in_head):
                return tr("07.freeze_flag", "for {what} (head {head!r}) the parameter {name!r} has requires_grad={flag}; "
                          "only the head's parameters should train", what=what, head=head, name=name, flag=p.requires_grad)
        batch_stats = _frozen_bn_uses_stored_stats(model, head)
        if batch_stats:
            return tr("07.frozen_bn_batch_stats", "for {what} (head {head!r}), the frozen BatchNorm layer {name!r} "
                      "normalises with the batch's statistics, not its stored ones: in training mode it does so even "
                      "when it no longer tracks them; a frozen layer must compute what the pretrained one did",
                      what=what, head=head, name=batch_stats)
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
             why="Compare it with the ResNet-18 counts printed in section 2: even a two-layer head is a small "
                 "fraction of the model's parameters. A step is cheaper mainly because the backward stops at the head "
                 "(section 3); the forward still runs the whole backbone."),
    Exercise("07.crop_positions_pad2", "int", digest="e2f209751e1a8f38eedcf86b80c3e8f0718c5f740f35d57905881edcb18500db",
             hint="Padding makes the image larger on every side; in how many places can an 8×8 window sit in it, "
                  "horizontally times vertically?",
             why="RandomCrop with padding is a random shift: each position is one of the shifted copies the model sees."),
    Exercise("07.freeze_all_but", "code", behaviour=_freeze_behaviour,
             hint="requires_grad_(False) works on a whole module and everything in it; model.get_submodule(name) "
                  "finds a submodule by its dotted name. Mind a head that was frozen before, and what a BatchNorm "
                  "layer does in training mode besides its weights (section 2); write that step yourself (the "
                  "check blocks freeze_batchnorm_stats).",
             why="Freeze everything, unfreeze the head, then keep the frozen BatchNorm layers in evaluation mode: "
                 "nothing outside the head can move."),
]
