"""Notebook 07's exercises: the head's parameters, the crop positions, and freeze_all_but, whose check accepts right
answers and refuses plausible wrong ones."""
import pytest
import torch

from helpers import transfer as TR


# --- exercises ---

def test_head_params_exercise_answer_is_the_heads_count_and_wrong_ones_are_refused():
    from torch import nn
    from helpers.core.checks import verify
    head = nn.Sequential(nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 10))
    right = sum(p.numel() for p in head.parameters())
    assert verify("07.head_params_resnet_mlp", right)[0]
    wrong = [512 * 256 + 256 * 10,                      # no biases
             256 * 10 + 10,                             # the last layer only
             512 * 256 + 256,                           # the first layer only
             512 * 256 + 256 + 256 * 5 + 5,             # 5 classes, as in section 2
             512 * 10 + 10,                             # a one-layer head
             right + 11_176_512]                        # the frozen backbone counted too
    for w in wrong:
        ok, message = verify("07.head_params_resnet_mlp", w)
        assert not ok and str(right) not in message


def test_crop_positions_exercise():
    from helpers.core.checks import verify
    from torchvision.transforms import v2
    x = torch.arange(64.0).reshape(1, 8, 8)
    torch.manual_seed(0)
    crop = v2.RandomCrop(8, padding=2)
    seen = {crop(x).flatten().tolist().__repr__() for _ in range(3000)}
    assert verify("07.crop_positions_pad2", len(seen))[0]
    for w in (5, 9, 16, 36, 4):   # one axis only, padding on one side, off by one either way, 2 × padding
        assert not verify("07.crop_positions_pad2", w)[0]


def _bn_eval(model):                               # the student's own BatchNorm step (the helper is blocked)
    from torch import nn
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm) and not any(p.requires_grad for p in m.parameters()):
            m.eval()
    return model


def _ref(model, head):                             # decides by membership in the head
    from torch import nn
    model.requires_grad_(False)
    model.get_submodule(head).requires_grad_(True)
    for name, m in model.named_modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm) and not (name + ".").startswith(head + "."):
            m.eval()
    return model


def _copied_loop(model, head):                     # freeze_batchnorm_stats's loop, copied from the notebook: a
    model.requires_grad_(False)                    # parameterless BatchNorm in the head counts as frozen
    model.get_submodule(head).requires_grad_(True)
    return _bn_eval(model)


def _frozen_bn_swap(model, head):                  # swaps BatchNorm2d for FrozenBatchNorm2d: other state_dict keys
    from torch import nn
    from torchvision.ops import FrozenBatchNorm2d
    _ref(model, head)
    for name, m in list(model.named_modules()):
        for child, sub in list(m.named_children()):
            if isinstance(sub, nn.BatchNorm2d):
                fb = FrozenBatchNorm2d(sub.num_features)
                fb.weight.copy_(sub.weight.detach()); fb.bias.copy_(sub.bias.detach())
                fb.running_mean.copy_(sub.running_mean); fb.running_var.copy_(sub.running_var)
                setattr(m, child, fb)
    return model


def _eval_all_but_head(model, head):
    model.requires_grad_(False)
    model.eval()
    h = model.get_submodule(head)
    h.requires_grad_(True)
    h.train()
    return model


def _by_names(model, head):
    from torch import nn
    for n, p in model.named_parameters():
        p.requires_grad_(n.startswith(head + "."))
    for name, m in model.named_modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm) and not name.startswith(head + "."):
            m.eval()
    return model


@pytest.mark.parametrize("fn", [_ref, _eval_all_but_head, _by_names], ids=["reference", "eval-backbone", "by-names"])
def test_freeze_all_but_accepts_right_answers(fn):
    from helpers.core.checks import verify
    ok, message = verify("07.freeze_all_but", fn)
    assert ok, message


def _old_recipe(model, head):                      # requires_grad only: frozen BatchNorm statistics drift
    model.requires_grad_(False)
    model.get_submodule(head).requires_grad_(True)
    return model


def _no_dot(model, head):                          # startswith(head): fc2 trains when the head is fc
    for n, p in model.named_parameters():
        p.requires_grad_(n.startswith(head))
    return _bn_eval(model)


def _substring(model, head):                       # head in name
    for n, p in model.named_parameters():
        p.requires_grad_(head in n)
    return _bn_eval(model)


def _all_eval(model, head):                        # the head's own BatchNorm stops learning its statistics
    _old_recipe(model, head)
    return model.eval()


def _all_batchnorm_eval(model, head):              # every BatchNorm in eval, the head's too
    from torch import nn
    _old_recipe(model, head)
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.eval()
    return model


def _only_2d(model, head):                         # BatchNorm2d in eval, a frozen BatchNorm1d left training
    from torch import nn
    _old_recipe(model, head)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.eval()
    return model


def _getattr(model, head):                         # a dotted name is not an attribute
    model.requires_grad_(False)
    getattr(model, head).requires_grad_(True)
    return _bn_eval(model)


def _freeze_others_only(model, head):              # a head frozen before stays frozen
    for n, p in model.named_parameters():
        if not n.startswith(head + "."):
            p.requires_grad_(False)
    return _bn_eval(model)


def _bn_no_dot(model, head):                       # BatchNorm membership by startswith(head): fc_bn, outside the
    from torch import nn                           # head fc, keeps training its statistics
    model.requires_grad_(False)
    model.get_submodule(head).requires_grad_(True)
    for name, m in model.named_modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm) and not name.startswith(head):
            m.eval()
    return model


def _train_at_the_end(model, head):                # undoes its own fix
    _ref(model, head)
    return model.train()


def _children_only(model, head):                   # top-level children by name: no dotted names
    model.requires_grad_(False)
    dict(model.named_children())[head].requires_grad_(True)
    return _bn_eval(model)


def _uses_helper(model, head):                     # the notebook's helper does the BatchNorm half: blocked
    model.requires_grad_(False)
    model.get_submodule(head).requires_grad_(True)
    return TR.freeze_batchnorm_stats(model)


def _track_off(model, head):                       # no running statistics kept, but batch statistics used
    from torch import nn
    _old_recipe(model, head)
    for name, m in model.named_modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm) and not (name + ".").startswith(head + "."):
            m.track_running_stats = False
    return model


def _bn_with_params_all_frozen(model, head):       # eval only for a BatchNorm that has parameters, all frozen: a
    from torch import nn                           # parameterless BatchNorm in the backbone keeps training
    _old_recipe(model, head)
    for m in model.modules():
        ps = list(m.parameters())
        if isinstance(m, nn.modules.batchnorm._BatchNorm) and ps and not any(p.requires_grad for p in ps):
            m.eval()
    return model


def _eval_batchnorm_outside(model, head, inside):  # every BatchNorm not in ``inside`` to evaluation mode
    from torch import nn
    _old_recipe(model, head)
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm) and m not in inside:
            m.eval()
    return model


def _head_children(model, head):                   # membership by head.children(): a head BatchNorm one level
    return _eval_batchnorm_outside(model, head, set(model.get_submodule(head).children()))  # deeper goes to eval


def _head_modules(model, head):                    # the same by head.modules(): right
    return _eval_batchnorm_outside(model, head, set(model.get_submodule(head).modules()))


def test_parameterless_backbone_batchnorm_and_a_nested_head_batchnorm_are_judged():
    from helpers.core.checks import verify
    ok, message = verify("07.freeze_all_but", _bn_with_params_all_frozen)
    assert not ok and "'body.5" in message, message
    ok, message = verify("07.freeze_all_but", _head_children)
    assert not ok and "head.1.0." in message, message
    for fn in (_ref, _head_modules):
        ok, message = verify("07.freeze_all_but", fn)
        assert ok, message


WRONG = [_bn_with_params_all_frozen, _head_children, _copied_loop, _frozen_bn_swap, _old_recipe, _no_dot, _bn_no_dot, _substring, _all_eval, _all_batchnorm_eval, _only_2d, _getattr, _freeze_others_only,
         _train_at_the_end, _children_only, _uses_helper, _track_off]


@pytest.mark.parametrize("fn", WRONG, ids=[f.__name__.strip("_") for f in WRONG])
def test_freeze_all_but_refuses_wrong_answers(fn):
    from helpers.core.checks import verify
    ok, message = verify("07.freeze_all_but", fn)
    assert not ok and "✅" not in message


def test_a_parameterless_batchnorm_in_the_head_is_judged_by_membership_and_a_swap_said_clearly():
    from helpers.core.checks import verify
    ok, message = verify("07.freeze_all_but", _copied_loop)
    assert not ok and "did not change" in message and "head.4.running_mean" in message
    ok, message = verify("07.freeze_all_but", _frozen_bn_swap)
    assert not ok and "replaced layers" in message and "KeyError" not in message


def test_batchnorm_membership_without_the_dot_is_refused_at_fc_bn():
    from helpers.core.checks import verify
    ok, message = verify("07.freeze_all_but", _bn_no_dot)
    assert not ok and "'fc_bn'" in message and "head 'fc'" in message


def _no_return(model, head):                       # right in every effect, but returns None
    _ref(model, head)


def _returns_head(model, head):                    # returns the head it unfroze
    return _ref(model, head).get_submodule(head)


def _returns_copy(model, head):                    # freezes a copy, returns it: the caller's model is untouched
    import copy
    return _ref(copy.deepcopy(model), head)


@pytest.mark.parametrize("fn", [_no_return, _returns_head, _returns_copy], ids=["none", "head", "copy"])
def test_freeze_all_but_must_return_the_model_it_was_given(fn):
    from helpers.core.checks import verify
    ok, message = verify("07.freeze_all_but", fn)
    assert not ok and "return model" in message


def test_the_helper_is_blocked_only_during_the_check_and_said_so():
    from helpers.core.checks import verify
    ok, message = verify("07.freeze_all_but", _uses_helper)
    assert not ok and "write that step yourself" in message
    ok, message = verify("07.freeze_all_but", _track_off)
    assert not ok and "statistics" in message
    m = TR.make_target_model(None, "scratch")
    assert TR.freeze_batchnorm_stats(m) is m       # put back after the check, and after a refusal
