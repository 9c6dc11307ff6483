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
