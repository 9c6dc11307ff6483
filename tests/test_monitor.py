"""Monitoring helpers (helpers.monitor): W&B mode, the logger, TensorBoard read-back, errors."""
import pytest
import torch

from helpers import MLP, make_loaders, train
from helpers import monitor as MO


@pytest.fixture(autouse=True, scope="module")
def _stop_wandb_service():
    """Stop the wandb-core service these tests start, so later notebook kernels do not inherit it."""
    yield
    import wandb

    wandb.teardown()


def test_wandb_mode_is_offline_without_credentials(monkeypatch, tmp_path):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "none"))
    assert MO.wandb_mode() == "offline"
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    assert MO.wandb_mode() == "online"
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert MO.wandb_mode() == "disabled"


def test_monitor_logs_to_both_and_reads_back(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("WANDB_MODE", "offline")
    torch.manual_seed(0)
    loaders = make_loaders(128)
    with MO.Monitor(tmp_path / "run", config={"lr": 0.01}) as mon:
        hist = train(MLP(), loaders["train"], loaders["val"], epochs=2, lr=0.01, logger=mon, progress=False)
        run_dir = mon.wandb_dir
    tb = MO.read_back(tmp_path / "run" / "tensorboard")["runs"]["."]["scalars"]
    assert [round(v, 6) for _, v in tb["val/acc"]] == [round(a, 6) for a in hist.val_acc]
    wb = MO.read_wandb_run(run_dir)
    assert wb["complete"]                        # close() waited until wandb-core had written the file to its end
    assert [round(r["val/acc"], 6) for r in wb["history"] if "val/acc" in r] == [round(a, 6) for a in hist.val_acc]
    assert wb["config"]["lr"] == 0.01


def test_monitor_on_other_ranks_writes_nothing(tmp_path):
    mon = MO.Monitor(tmp_path / "rank1", rank=1)
    mon.log({"x": 1.0}, 1)
    mon.close()
    assert not (tmp_path / "rank1").exists()


def test_rerun_starts_a_fresh_run(tmp_path):
    for _ in range(2):
        with MO.Monitor(tmp_path / "r", wandb=False) as mon:
            mon.log({"a": 1.0}, 1)
    assert len(MO.read_back(tmp_path / "r")["runs"]["tensorboard"]["scalars"]["a"]) == 1


def test_read_wandb_run_needs_a_run_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="offline-run"):
        MO.read_wandb_run(tmp_path)
    (tmp_path / "run-x.wandb").write_bytes(b"nope")
    with pytest.raises(ValueError, match="not a W&B run file"):
        MO.read_wandb_run(tmp_path)


def test_check_tensorboard_fails_loudly_when_nothing_listens():
    with pytest.raises(RuntimeError, match="did not answer"):
        MO.check_tensorboard(MO.free_port(), timeout=1)
