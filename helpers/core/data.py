"""The course data, offline: UCI digits shipped in ``data/`` (00_setup and every notebook after).

``load_datasets("digits")`` never touches the network. MNIST and CIFAR-10 come through
torchvision only when asked for with ``download=True`` (e.g. in Colab).
"""
from __future__ import annotations

import os
import zipfile
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

from .i18n import tr as _tr


DATASETS = ("digits", "mnist", "cifar10")
SPLIT_SIZES = {"digits": (1257, 270, 270)}  # train / val / test
CLASS_NAMES = [str(i) for i in range(10)]


def data_dir() -> Path:
    """Where the course data lives: ``$BEYOND_ONE_GPU_DATA`` if set, else the repository's ``data/`` (00)."""
    env = os.environ.get("BEYOND_ONE_GPU_DATA")
    return Path(env).expanduser() if env else Path(__file__).resolve().parents[2] / "data"


def _stratified_split(labels: np.ndarray, sizes: tuple[int, int, int], seed: int) -> tuple[np.ndarray, ...]:
    """Indices for train/val/test: each class split in the same proportion, rounded per class; the few samples
    that the rounding leaves val/test short or over are then moved from or to the end of train's list (the last
    class), so the sizes are exact and that class holds a sample or two more or fewer in val/test (00)."""
    rng = np.random.default_rng(seed)
    n = len(labels)
    val_frac, test_frac = sizes[1] / n, sizes[2] / n
    parts: list[list[int]] = [[], [], []]
    for c in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == c))
        n_val, n_test = round(len(idx) * val_frac), round(len(idx) * test_frac)
        parts[1] += idx[:n_val].tolist()
        parts[2] += idx[n_val:n_val + n_test].tolist()
        parts[0] += idx[n_val + n_test:].tolist()
    # rounding per class can be off by a few: move samples so the sizes are exactly as promised
    for k in (1, 2):
        while len(parts[k]) > sizes[k]:
            parts[0].append(parts[k].pop())
        while len(parts[k]) < sizes[k]:
            parts[k].append(parts[0].pop())
    return tuple(np.sort(np.array(p)) for p in parts)


def load_digits_arrays(path: str | Path | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The raw digits as ``(images uint8 [1797, 8, 8] in 0..16, labels int64 [1797])`` (00)."""
    path = Path(path).expanduser() if path is not None else data_dir() / "digits.npz"
    if not path.is_file():
        raise FileNotFoundError(_tr(
            "data.not_found", "course data not found at {path}. Run from a clone of the course repository "
            "(pip install -e . there), or set BEYOND_ONE_GPU_DATA to the folder holding digits.npz.", path=path))
    fix = _tr("data.damaged", "the course data at {path} is damaged; restore it with `git checkout -- data/digits.npz` "
              "in the course folder (or clone the course again)", path=path)
    try:
        with np.load(path, allow_pickle=False) as f:  # never unpickle: the file holds plain arrays only
            images, labels = f["images"], f["labels"]
    except (ValueError, OSError, KeyError, zipfile.BadZipFile, EOFError) as e:
        raise ValueError(f"{fix} (it is not a readable .npz archive of two arrays: {type(e).__name__})") from None
    if images.shape != (1797, 8, 8) or labels.shape != (1797,) or labels.min() < 0 or labels.max() > 9:
        raise ValueError(f"{fix} (expected 1797 images of 8×8 with labels 0–9, found images {images.shape}, "
                         f"labels {labels.shape})")
    return images, labels


def load_datasets(name: str = "digits", seed: int = 0, download: bool = False,
                  root: str | Path | None = None) -> dict[str, Dataset]:
    """Train/val/test datasets of images ``[N, C, H, W]`` in [0, 1] and int64 labels (00_setup).

    ``"digits"`` (default) is the offline UCI set: a fixed stratified split of 1,257 / 270 / 270,
    the same for a given ``seed``. ``"mnist"`` and ``"cifar10"`` need ``download=True`` and a
    network (Colab); their validation split is the last 10 % of the training set.
    """
    if not isinstance(name, str) or name.lower() not in DATASETS:
        raise ValueError(_tr("data.unknown", "unknown dataset {name!r}; choose one of {datasets} ('digits' works offline)",
                             name=name, datasets=DATASETS))
    name = name.lower()
    if name == "digits":
        images, labels = load_digits_arrays(None if root is None else Path(root) / "digits.npz")
        x = torch.from_numpy(images.astype(np.float32) / 16.0).unsqueeze(1)
        y = torch.from_numpy(labels.astype(np.int64))
        tr, va, te = _stratified_split(labels, SPLIT_SIZES["digits"], seed)
        return {"train": TensorDataset(x[tr], y[tr]), "val": TensorDataset(x[va], y[va]),
                "test": TensorDataset(x[te], y[te])}
    return _torchvision_datasets(name, download, Path(root) if root else data_dir() / "torchvision", seed)


def _torchvision_datasets(name: str, download: bool, root: Path, seed: int) -> dict[str, Dataset]:
    if not download:
        raise ValueError(f"{name!r} is downloaded by torchvision: call load_datasets({name!r}, download=True) "
                         "where a network is available (e.g. Colab), or use 'digits', which ships with the course")
    import torchvision
    from torchvision.transforms import v2

    cls = {"mnist": torchvision.datasets.MNIST, "cifar10": torchvision.datasets.CIFAR10}[name]
    tf = v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])
    full = cls(root, train=True, download=True, transform=tf)
    test = cls(root, train=False, download=True, transform=tf)
    n_val = len(full) // 10
    g = torch.Generator().manual_seed(seed)
    train, val = torch.utils.data.random_split(full, [len(full) - n_val, n_val], generator=g)
    return {"train": train, "val": val, "test": test}


def make_loaders(batch_size: int = 64, name: str = "digits", seed: int = 0, num_workers: int = 0,
                 pin_memory: bool = False, download: bool = False) -> dict[str, DataLoader]:
    """DataLoaders for train (shuffled, seeded) and val/test (in order) (00_setup onwards)."""
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}; try 64")
    ds = load_datasets(name, seed=seed, download=download)
    g = torch.Generator().manual_seed(seed)
    return {split: DataLoader(d, batch_size=batch_size, shuffle=(split == "train"),
                              generator=g if split == "train" else None,
                              num_workers=num_workers, pin_memory=pin_memory)
            for split, d in ds.items()}


def tensors(dataset: Dataset) -> tuple[torch.Tensor, torch.Tensor]:
    """All of a dataset as two tensors ``(x, y)`` (fast path for the small digits set) (00 onwards)."""
    if isinstance(dataset, TensorDataset):
        return dataset.tensors[0], dataset.tensors[1]
    xs, ys = zip(*(dataset[i] for i in range(len(dataset))))
    return torch.stack(xs), torch.as_tensor(ys)


def class_counts(dataset: Dataset, num_classes: int = 10) -> list[int]:
    """How many samples of each class a dataset holds (00)."""
    return torch.bincount(tensors(dataset)[1], minlength=num_classes).tolist()


def digits_batch(batch: int, split: str = "train") -> tuple[torch.Tensor, torch.Tensor]:
    """The first ``batch`` digits of a split as one batch, repeated if the split is smaller (01–03, 08).

    The same inputs for every variant a notebook compares (one device or several, one process or
    two), so differences come from the method, not the data.
    """
    if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
        raise ValueError(f"batch must be a positive int, got {batch!r}")
    x, y = tensors(load_datasets("digits")[split])
    reps = -(-batch // len(x))
    return x.repeat(reps, 1, 1, 1)[:batch], y.repeat(reps)[:batch]
