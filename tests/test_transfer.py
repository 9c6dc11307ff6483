"""Transfer-learning helpers (helpers.transfer): subsets, the modes, frozen weights, augmentations."""
import pytest
import torch
from torch.utils.data import DataLoader

from helpers import train
from helpers import transfer as TR


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    path = tmp_path_factory.mktemp("ck") / "source.pt"
    TR.pretrain_backbone(path, epochs=2)
    return TR.load_pretrained(path)


def test_subset_relabels_and_picks_few():
    ds = TR.subset("train", TR.TARGET, per_class=5)
    assert len(ds) == 25 and sorted(set(ds.tensors[1].tolist())) == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="at most"):
        TR.subset("test", TR.TARGET, per_class=1000)
    with pytest.raises(ValueError, match="positive int"):
        TR.subset("train", TR.TARGET, per_class=0)


def test_modes_freeze_what_they_say_and_never_touch_the_original(pretrained):
    original = [p.clone() for p in pretrained.parameters()]
    for mode in TR.MODES:
        model = TR.make_target_model(pretrained, mode)
        frozen = TR.frozen_state(model)
        train(model, DataLoader(TR.subset("train", TR.TARGET, 5), batch_size=25), epochs=3, progress=False)
        assert all(torch.equal(frozen[n], p) for n, p in model.named_parameters() if n in frozen)
        assert model.classifier.out_features == 5
    assert all(torch.equal(a, b) for a, b in zip(original, pretrained.parameters()))


def test_bad_mode_and_missing_checkpoint(tmp_path):
    with pytest.raises(ValueError, match="unknown mode"):
        TR.make_target_model(None, "all")
    with pytest.raises(ValueError, match="needs a pretrained model"):
        TR.make_target_model(None, "frozen")
    with pytest.raises(FileNotFoundError, match="pretrain_backbone"):
        TR.load_pretrained(tmp_path / "missing.pt")


def test_augmentations_keep_shape_and_flip_really_flips():
    x = torch.rand(1, 8, 8)
    for name, tf in TR.augmentations().items():
        assert tf(x).shape == (1, 8, 8), name
    images, names = TR.augmentation_grid(n=3)
    assert images.shape == (len(names) * 3, 1, 8, 8)
    torch.manual_seed(0)
    flips = {torch.equal(TR.augmentations()["horizontal flip"](x), torch.flip(x, dims=[-1])) for _ in range(20)}
    assert flips == {True, False}


# --- BatchNorm: requires_grad_(False) does not freeze running statistics (07, section 2) ---

def _bn_net():
    from torch import nn
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                         nn.Linear(4 * 8 * 8, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 3))


def _moved(before, model):
    after = model.state_dict()
    return [n for n in before if not torch.equal(before[n], after[n])]


def _steps(model, fix, n=2):
    from torch import nn
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    x, y = torch.randn(8, 1, 8, 8), torch.randint(0, 3, (8,))
    for _ in range(n):
        model.train()
        if fix:
            TR.freeze_batchnorm_stats(model)
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return model


def test_frozen_state_holds_frozen_batchnorm_buffers_and_not_trainable_ones():
    model = _bn_net()
    model[:3].requires_grad_(False)  # conv + its BatchNorm frozen; the rest trains
    state = TR.frozen_state(model)
    assert {"1.running_mean", "1.running_var", "1.num_batches_tracked", "0.weight", "1.weight"} <= set(state)
    assert not any(n.startswith(("4.", "5.", "7.")) for n in state)   # the trainable part, its BatchNorm included


def test_the_old_recipe_is_refused_by_the_buffer_check_and_the_fix_passes():
    """requires_grad_(False) alone, then model.train(): parameters stay, BatchNorm statistics move, and the
    comparison of parameters *and buffers* (frozen_state against state_dict) sees it; with freeze_batchnorm_stats
    nothing frozen moves while the trainable part, its own BatchNorm statistics included, still trains."""
    for fix in (False, True):
        model = _bn_net()
        model[:3].requires_grad_(False)
        before, everything = TR.frozen_state(model), {n: t.clone() for n, t in model.state_dict().items()}
        _steps(model, fix)
        moved = _moved(before, model)
        params_moved = [n for n in moved if n in dict(model.named_parameters())]
        assert not params_moved                                   # the parameter-only check would pass both
        if fix:
            assert not moved
        else:
            assert set(moved) == {"1.running_mean", "1.running_var", "1.num_batches_tracked"}
        after = model.state_dict()
        assert not torch.equal(everything["5.running_mean"], after["5.running_mean"])   # a trainable BatchNorm updates
        assert not torch.equal(everything["7.weight"], after["7.weight"])


def test_freeze_batchnorm_stats_sets_only_frozen_batchnorm_layers_to_eval():
    model = _bn_net()
    model[:3].requires_grad_(False)
    model.train()
    TR.freeze_batchnorm_stats(model)
    assert not model[1].training and model[5].training and model[0].training and model[4].training


def test_resnet18_recipe_moves_only_batchnorm_buffers_without_the_fix():
    from torch import nn
    from torchvision.models import resnet18
    torch.manual_seed(0)
    net = resnet18(weights=None)
    net.requires_grad_(False)
    net.fc = nn.Linear(net.fc.in_features, 5)
    x, y = torch.randn(4, 3, 32, 32), torch.randint(0, 5, (4,))
    n_bn = sum(isinstance(m, nn.BatchNorm2d) for m in net.modules())
    for fix in (False, True):
        import copy
        model = copy.deepcopy(net)
        before = TR.frozen_state(model)
        opt = torch.optim.SGD(model.fc.parameters(), lr=0.1)
        model.train()
        if fix:
            TR.freeze_batchnorm_stats(model)
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        moved = _moved(before, model)
        assert (len(moved) == 3 * n_bn) if not fix else not moved
        assert not torch.equal(model.fc.weight, net.fc.weight)


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


def _head_bn_net():
    from torch import nn
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6, affine=False), nn.Linear(6, 3)))


def test_frozen_state_counts_buffers_by_the_mode_the_loop_leaves_and_restores_modes():
    """A parameterless BatchNorm in a trainable head: frozen under freeze_batchnorm_stats (it puts it in eval),
    not frozen under a loop that keeps the head training, nor under model.train() alone; what is reported frozen
    does not move in training with the same loop, and the head's statistics do."""
    def keep_head(m):
        TR.freeze_batchnorm_stats(m)
        m[5].train()

    stats = {"running_mean", "running_var", "num_batches_tracked"}
    for prepare, frozen_bn in ((TR.freeze_batchnorm_stats, {"1", "5.1"}), (keep_head, {"1"}), (None, set())):
        model = _head_bn_net()
        model[:5].requires_grad_(False)
        model.eval()
        state = TR.frozen_state(model, prepare)
        assert not any(m.training for m in model.modules())                       # modes restored
        assert {n.rsplit(".", 1)[0] for n in state if n.rsplit(".", 1)[1] in stats} == frozen_bn
        assert {"0.weight", "0.bias", "1.weight", "1.bias"} <= set(state) and not any(n.startswith("5.0.") for n in state)
        opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
        for _ in range(2):
            model.train()
            if prepare is not None:
                prepare(model)
            opt.zero_grad()
            model(torch.randn(8, 1, 8, 8)).square().mean().backward()
            opt.step()
        assert not _moved(state, model)
        head_stats_moved = not torch.equal(model.state_dict()["5.1.running_mean"], torch.zeros(6))
        assert head_stats_moved == (prepare is not TR.freeze_batchnorm_stats)


def test_correctness_correlation_and_step_time_verdicts():
    import math
    a, b = torch.tensor([1., 1., 0., 0.]), torch.tensor([1., 1., 0., 1.])
    assert TR.correctness_correlation(a, a) == pytest.approx(1.0)
    assert TR.correctness_correlation(a, 1 - a) == pytest.approx(-1.0)
    assert TR.correctness_correlation(a, b) == pytest.approx(1 / math.sqrt(3))
    assert math.isnan(TR.correctness_correlation(a, torch.ones(4)))   # every image right: no correlation
    assert TR.compare_step_times([1, 1.1, 1.2, 1.3], [2, 2.1, 2.2, 2.3])[0] == "shorter"
    assert TR.compare_step_times([2, 2.1, 2.2, 2.3], [1, 1.1, 1.2, 1.3])[0] == "longer"
    verdict, q, q0 = TR.compare_step_times([1, 1.5, 2, 2.5], [1.4, 1.8, 2.2, 2.6])   # middle halves overlap
    assert verdict == "not separated" and q == pytest.approx((1.375, 1.75, 2.125)) and q0[1] == pytest.approx(2.0)


def test_the_helper_is_blocked_only_during_the_check_and_said_so():
    from helpers.core.checks import verify
    ok, message = verify("07.freeze_all_but", _uses_helper)
    assert not ok and "write that step yourself" in message
    ok, message = verify("07.freeze_all_but", _track_off)
    assert not ok and "statistics" in message
    m = TR.make_target_model(None, "scratch")
    assert TR.freeze_batchnorm_stats(m) is m       # put back after the check, and after a refusal


def test_verdicts_count_only_differences_beyond_twice_the_standard_error():
    import math
    assert TR.binomial_se(0.9, 100) == pytest.approx(0.03)
    verdict, noise = TR.compare_to(0.904, 0.933, 135)
    assert verdict == "within noise" and noise == pytest.approx(2 * math.sqrt(0.904 * 0.096 / 135 + 0.933 * 0.067 / 135))
    assert TR.compare_to(0.95, 0.80, 270)[0] == "beats" and TR.compare_to(0.80, 0.95, 270)[0] == "trails"
    assert TR.compare_to(0.5, 0.5, 10)[0] == "within noise"


def test_recorded_convolutions_skip_frozen_layers_before_the_first_trainable_one():
    pretrained = TR.make_target_model(None, "scratch", num_classes=5)
    x = torch.zeros(2, 1, 8, 8)
    counts = {m: TR.recorded_convolutions(TR.make_target_model(pretrained, m), x) for m in ("frozen", "finetune")}
    assert counts == {"frozen": 0, "finetune": 1} and TR.recorded_convolutions(pretrained, x) == 2


def test_convolution_gradients_record_which_gradients_autograd_asks_for():
    pretrained = TR.make_target_model(None, "scratch", num_classes=5)
    x = torch.zeros(2, 1, 8, 8)
    calls = {m: TR.convolution_gradients(TR.make_target_model(pretrained, m), x) for m in TR.MODES}
    conv2, conv1 = (32, 16, 3, 3), (16, 1, 3, 3)
    # from scratch: conv2's input gradient is needed (conv1 trains), conv1's is not (the images need none)
    assert [(c["weight"], c["output_mask"]) for c in calls["scratch"]] == [(conv2, (True, True, True)),
                                                                           (conv1, (False, True, True))]
    # fine-tuning: conv2 recorded, but its input needs no gradient, so only its weight and bias gradients
    assert [(c["weight"], c["output_mask"]) for c in calls["finetune"]] == [(conv2, (False, True, True))]
    assert calls["frozen"] == calls["head_only"] == []
    assert {c["weight"]: c["macs"] for c in calls["scratch"]} == {conv2: 32 * 64 * 16 * 9, conv1: 16 * 64 * 9}
    model = TR.make_target_model(pretrained, "finetune")
    TR.convolution_gradients(model, x)
    assert all(p.grad is None for p in model.parameters())                # nothing written to .grad


def test_correlation_note_says_only_the_test_set_part_is_overstated():
    import math
    note = TR.correlation_note({(5, "frozen"): 0.7, (5, "finetune"): 0.6})
    assert "positive in all 2 comparisons" in note and "overstated the test-set part of the noise" in note
    assert "seed-to-seed part is not in it" in note
    assert "overstated the noise of these differences" not in note        # the old, too broad conclusion
    mixed = TR.correlation_note({1: 0.7, 2: -0.1, 3: math.nan})           # nan (every image right) is not positive
    assert "positive in 1 of 3 comparisons" in mixed and "need not overstate the test-set part" in mixed
    assert "seed-to-seed part is not in it" in mixed and "overstated the test-set" not in mixed


def test_compare_strategies_reports_whole_epochs_of_at_least_the_steps_asked():
    pretrained = TR.make_target_model(None, "scratch", num_classes=5)
    rows = TR.compare_strategies(pretrained, shots=(50,), steps=10, seeds=(0,))
    assert {r["steps"] for r in rows} == {16}        # 250 images, batches of 32: 8 a epoch, 2 epochs
    assert all(len(r["seed_accs"]) == 1 and r["n_test"] > 0 and r["sec_per_step"] > 0 for r in rows)


def test_augmentation_effect_takes_extra_transforms():
    from torchvision.transforms import v2
    rows = TR.augmentation_effect(per_class=4, steps=3, seeds=(0,), names=["erase"],
                                  extra={"erase": v2.RandomErasing(p=1.0, scale=(0.02, 0.1))})
    assert [r["augmentation"] for r in rows] == ["erase"] and 0 <= rows[0]["test_acc"] <= 1
    assert rows[0]["steps"] == 4   # 40 images in batches of 32: whole epochs of 2 steps, at least 3


def test_plot_transformed_draws_every_output_to_the_same_scale():
    import matplotlib
    matplotlib.use("Agg")
    images, _ = TR.augmentation_grid(n=1)
    fig = TR.plot_transformed(images[0], TR.resize_crop_transforms())
    renderer = fig.canvas.get_renderer()
    scales = set()
    for ax in fig.axes:
        h, w = ax.images[0].get_array().shape[:2]
        box = ax.get_window_extent(renderer)
        scales |= {round(box.width / w, 3), round(box.height / h, 3)}
    assert len(scales) == 1
    titles = [ax.title.get_window_extent(renderer) for ax in fig.axes]
    assert all(a.x1 <= b.x0 for a, b in zip(titles, titles[1:]))   # no title runs into the next
