"""The offline course data (helpers.core.data): shapes, split sizes, determinism, bad input."""
import pytest
import torch

from helpers.core import data


def test_split_sizes_shapes_and_range():
    ds = data.load_datasets("digits")
    assert [len(ds[s]) for s in ("train", "val", "test")] == [1257, 270, 270]
    x, y = data.tensors(ds["train"])
    assert x.shape == (1257, 1, 8, 8) and x.dtype == torch.float32
    assert y.dtype == torch.int64 and set(y.tolist()) == set(range(10))
    assert 0 <= x.min() and x.max() <= 1


def test_splits_are_disjoint_and_stratified():
    ds = data.load_datasets("digits")
    seen = set()
    for s in ("train", "val", "test"):
        rows = {tuple(r.flatten().tolist()) + (int(l),) for r, l in zip(*data.tensors(ds[s]))}
        seen_before = len(seen)
        seen |= rows
        assert len(seen) > seen_before
    for s in ("val", "test"):
        counts = data.class_counts(ds[s])
        assert min(counts) >= 25 and max(counts) <= 29, counts


def test_same_seed_same_split_other_seed_other_split():
    a, b, c = (data.load_datasets("digits", seed=s) for s in (0, 0, 1))
    assert torch.equal(a["val"].tensors[0], b["val"].tensors[0])
    assert not torch.equal(a["val"].tensors[0], c["val"].tensors[0])


def test_loaders_are_deterministic():
    first = [next(iter(data.make_loaders(32, seed=3)["train"]))[1] for _ in range(2)]
    assert torch.equal(first[0], first[1])


def test_unknown_dataset_name():
    with pytest.raises(ValueError, match="choose one of"):
        data.load_datasets("imagenet")


def test_download_datasets_need_explicit_download():
    with pytest.raises(ValueError, match="download=True"):
        data.load_datasets("mnist")


@pytest.mark.parametrize("bs", [0, -1, 2.5, True])
def test_bad_batch_size(bs):
    with pytest.raises(ValueError, match="batch_size must be a positive int"):
        data.make_loaders(batch_size=bs)


def test_missing_data_path_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("BEYOND_ONE_GPU_DATA", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="BEYOND_ONE_GPU_DATA"):
        data.load_datasets("digits")
