"""Notebook 10's recipe (helpers.resilience): a resumed run equals an uninterrupted one; DCP reshards 2 -> 1 and 2 -> 4."""
import torch

from conftest import launched_children as _children
from helpers.core.measure import max_abs_diff
from helpers.launching import launch
from helpers.resilience.recipe import resumable_worker
from helpers.resilience.workers import dcp_train_worker, plain_training


def test_a_run_resumed_from_its_checkpoint_equals_the_uninterrupted_run(tmp_path):
    whole = launch(resumable_worker, 2, args=(2, str(tmp_path / "a.pt")), verbose=False, timeout=120)
    first = launch(resumable_worker, 2, args=(1, str(tmp_path / "b.pt")), verbose=False, timeout=120)
    rest = launch(resumable_worker, 2, args=(2, str(tmp_path / "b.pt")), verbose=False, timeout=120)
    assert [r["epochs_run"] for r in whole] == [[0, 1]] * 2
    assert [r["epochs_run"] for r in first] == [[0]] * 2 and [r["epochs_run"] for r in rest] == [[1]] * 2
    assert all(torch.equal(a, b) for a, b in zip(whole[0]["params"], rest[0]["params"]))
    assert not _children()


def test_a_dcp_checkpoint_saved_by_two_ranks_loads_on_one_and_on_four(tmp_path):
    path = str(tmp_path / "dcp")
    saved = launch(dcp_train_worker, 2, args=(path, 0, 3, True), verbose=False, timeout=120)
    assert saved[0]["files"] == [".metadata", "__0_0.distcp", "__1_0.distcp"]   # one file per rank, and the metadata
    ref = plain_training(6)
    for n in (1, 4):
        out = launch(dcp_train_worker, n, args=(path, 3, 3, False), verbose=False, timeout=120)
        assert max_abs_diff(out[0]["params"], ref) < 1e-6, n
    assert not _children()
