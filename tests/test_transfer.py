"""Transfer-learning helpers (helpers.transfer): subsets, the modes, augmentations, the comparisons and their verdicts,
the recorded convolutions."""
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
