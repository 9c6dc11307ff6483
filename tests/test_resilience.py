"""Notebook 10's recipe (helpers.resilience): a resumed run equals an uninterrupted one; DCP reshards 2 -> 1 and 2 -> 4."""
import torch

from conftest import launched_children as _children
from helpers.core.measure import max_abs_diff
from helpers.launching import launch
from helpers.resilience.recipe import resumable_worker
from helpers.resilience.workers import dcp_files, dcp_train_worker, plain_training


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
    launch(dcp_train_worker, 2, args=(path, 0, 3, True), verbose=False, timeout=120)
    files = dcp_files(path)
    assert sorted(files["files"]) == [".metadata", "__0_0.distcp", "__1_0.distcp"]   # one file per rank, and the metadata
    assert all(files["files"][f] == files["counted"][f] for f in files["counted"])   # every byte of each file accounted for
    params = plain_training(0)
    # parameters, Adam's exp_avg and exp_avg_sq (fp32), and its step: a float32 scalar tensor per parameter tensor
    assert files["tensor_bytes"] == 3 * sum(p.numel() * 4 for p in params) + 4 * len(params)
    ref = plain_training(6)
    for n in (1, 4):
        out = launch(dcp_train_worker, n, args=(path, 3, 3, False), verbose=False, timeout=120)
        assert max_abs_diff(out[0]["params"], ref) < 1e-6, n
    assert not _children()


def test_torchrun_restarts_a_killed_worker_and_the_run_resumes_from_its_checkpoint(tmp_path):
    """SIGKILL to rank 1 mid-epoch 1: torchrun (--max-restarts=1) restarts both workers, which resume at epoch 1 from
    the checkpoint saved after epoch 0; the final parameters equal an uninterrupted run's."""
    import signal

    from helpers.launching.torchrun import run_torchrun
    from helpers.resilience.instruments import kill_when

    def run(name: str, kill: bool) -> tuple[str, list]:
        folder = tmp_path / name
        folder.mkdir()
        killer = kill_when(str(folder), rank=1, epoch=1, sig=signal.SIGKILL, delay=0.05) if kill else None
        out = run_torchrun(2, script_args=("--epochs", "2", "--checkpoint", str(folder / "ck.pt"), "--out",
                                           str(folder / "params.pt"), "--announce-dir", str(folder)),
                           module="helpers.resilience.script", agent_args=("--max-restarts=1",), timeout=180,
                           env={"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"})   # a store per restart (notebook 10, section 3)
        if killer:
            killer["thread"].join(5)
            assert "pid" in killer, killer
        return out, torch.load(folder / "params.pt", weights_only=True)

    whole, p_whole = run("whole", kill=False)
    killed, p_killed = run("killed", kill=True)
    assert "restart 0: trained epochs [0, 1]" in whole
    assert "restart 1: trained epochs [1]" in killed, killed[-3000:]   # resumed at epoch 1, after the restart
    assert all(torch.equal(a, b) for a, b in zip(p_whole, p_killed))
    assert not _children()


def test_sigterm_saves_and_exits_and_a_new_launch_resumes(tmp_path):
    """SIGTERM to rank 0 during epoch 0 (a scheduler's warning): the ranks finish the epoch, save and exit 0; a new
    launch resumes at epoch 1 and ends equal to an uninterrupted run."""
    import signal

    from helpers.launching.torchrun import run_torchrun
    from helpers.resilience.instruments import kill_when

    folder = tmp_path / "pre"
    folder.mkdir()
    args = ("--epochs", "2", "--checkpoint", str(folder / "ck.pt"), "--out", str(folder / "params.pt"),
            "--announce-dir", str(folder))
    killer = kill_when(str(folder), rank=0, epoch=0, sig=signal.SIGTERM, delay=0.05)
    first = run_torchrun(2, script_args=args, module="helpers.resilience.script", timeout=180)
    killer["thread"].join(5)
    assert "trained epochs [0]; stopped on SIGTERM after saving" in first, first[-3000:]
    second = run_torchrun(2, script_args=args, module="helpers.resilience.script", timeout=180)
    assert "trained epochs [1]" in second
    whole = launch(resumable_worker, 2, args=(2, str(tmp_path / "w.pt")), verbose=False, timeout=120)
    assert all(torch.equal(a, b) for a, b in zip(whole[0]["params"], torch.load(folder / "params.pt", weights_only=True)))
    assert not _children()


def test_detail_names_both_collectives_and_monitored_barrier_names_the_missing_rank():
    """TORCH_DISTRIBUTED_DEBUG set after the fork server started still reaches the ranks (the launcher reads it
    again in each rank): the mismatch is reported at once instead of hanging until the timeout."""
    import pytest

    from helpers.resilience.hangs import debug_detail, mismatched_collectives, skipped_barrier, what_it_said

    launch(resumable_worker, 1, args=(0, None), verbose=False, timeout=60)   # the fork server runs before DETAIL is set
    with debug_detail(), pytest.raises(RuntimeError) as info:
        launch(mismatched_collectives, 2, verbose=False, timeout=60)
    assert sorted(what_it_said(str(info.value))) == ["rank 0: ALLREDUCE (the group's collective number 1)",
                                             "rank 1: BROADCAST (the group's collective number 1)"]
    with pytest.raises(RuntimeError) as info:
        launch(skipped_barrier, 2, verbose=False, timeout=60)
    assert what_it_said(str(info.value)) == ["Ranks 1 failed to pass monitoredBarrier in 2000 ms"]
    assert not _children()
