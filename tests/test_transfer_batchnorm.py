"""Notebook 07's frozen BatchNorm (helpers.transfer): which buffers a frozen model still moves, the old recipe refused
by the buffer check, the fix that passes."""
import torch

from helpers import transfer as TR


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
