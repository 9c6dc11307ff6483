"""Self-checks fed odd answers, and silent nonsense (training, damaged data, launch timeouts, tuning, more processes
than cores): each passes, or is refused with the fix, instead of crashing or running on. Each test failed on the
code before the fix it checks."""
from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from conftest import ROOT
from helpers import MLP, make_loaders, train
from helpers.launching import launcher as L
from helpers.launching import workers
from helpers import tuning as T
from helpers.core.checks import verify
from helpers.core.data import load_digits_arrays


# --- self-checks ----------------------------------------------------------------------------------------------

def test_right_answers_in_any_numeric_form_pass():
    for answer in ([1, 2, 4, 8], (1, 2, 4, 8), np.array([1, 2, 4, 8]), torch.tensor([1, 2, 4, 8])):
        assert verify("04.rungs_rf2", answer)[0], answer
    for answer in (17.5, 35 / 2, np.float64(17.5), torch.tensor(17.5)):
        assert verify("03.allreduce_8", answer)[0], answer
    assert verify("01.bubble_slow_stage", 0.56)[0] and verify("01.bubble_slow_stage", 5 / 9)[0]
    ok, msg = verify("01.bubble_slow_stage", 0.5)
    assert not ok and "2 significant digits" in msg


def test_objects_that_pretend_to_be_the_answer_fail_and_never_crash_the_check():
    class AlwaysEqual:
        def __eq__(self, other):
            return True

    class Floaty:
        def __float__(self):
            return 17.5

    class Sneaky(float):
        def __float__(self):
            return 17.5

    for fake in (AlwaysEqual(), Floaty(), Sneaky(1.0), "17.5 or so", np.array([17.5, 1]), object()):
        ok, msg = verify("03.allreduce_8", fake)
        assert not ok and "Hint" in msg


# --- silent nonsense ------------------------------------------------------------------------------------------

def test_training_nonsense_is_refused_with_the_fix():
    loaders = make_loaders(128)
    with pytest.raises(ValueError, match="finite"):
        train(MLP(), loaders["train"], lr=float("inf"), progress=False)
    with pytest.raises(ValueError, match="none of this model's parameters"):
        train(MLP(), loaders["train"], optimizer=torch.optim.SGD(MLP().parameters(), lr=0.1), progress=False)
    with pytest.raises(ValueError, match="gave no batches"):
        train(MLP(), DataLoader(TensorDataset(torch.zeros(0, 1, 8, 8), torch.zeros(0, dtype=torch.long))),
              progress=False)
    with pytest.raises(TypeError, match="loaders\\['train'\\]"):
        train(MLP(), loaders, progress=False)
    bad = DataLoader(TensorDataset(torch.full((8, 1, 8, 8), float("nan")), torch.zeros(8, dtype=torch.long)))
    with pytest.raises(FloatingPointError, match="Lower the learning rate"):
        train(MLP(), bad, progress=False)


@pytest.mark.parametrize("damage", ["garbage", "truncated", "too few"])
def test_damaged_course_data_says_how_to_restore_it(tmp_path, damage):
    good = (ROOT / "data" / "digits.npz").read_bytes()
    path = tmp_path / "digits.npz"
    if damage == "garbage":
        path.write_bytes(os.urandom(1000))
    elif damage == "truncated":
        path.write_bytes(good[: len(good) // 2])
    else:
        images, labels = load_digits_arrays()
        np.savez(path, images=images[:100], labels=labels[:100])
    with pytest.raises(ValueError, match="git checkout -- data/digits.npz") as e:
        load_digits_arrays(path)
    assert str(path) in str(e.value) and "allow_pickle" not in str(e.value)


@pytest.mark.parametrize("timeout", [float("inf"), 1e-9, True, -1])
def test_launch_timeouts_that_cannot_work_are_refused(timeout):
    with pytest.raises(ValueError, match="timeout must be a number of seconds"):
        L.launch(workers.whoami, 2, timeout=timeout)


def test_tuning_nonsense_is_refused(monkeypatch):
    with pytest.raises(ValueError, match=r"lr must be the two bounds"):
        T.search_space(lr=0.01)
    import ray

    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 2.0})
    monkeypatch.setattr(ray, "nodes", lambda: [{"Alive": True}])
    with pytest.raises(RuntimeError, match="shutdown_ray\\(\\) first"):
        T.init_ray(num_cpus=1)


def test_more_processes_than_cores_can_carry_is_said(monkeypatch, capfd):
    monkeypatch.setattr(L.os, "cpu_count", lambda: 1)
    assert L.launch(workers.all_reduce_sum, 3, verbose=False, timeout=60) == [6.0] * 3
    assert "will be slow" in capfd.readouterr().err
