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


def test_read_back_decodes_audio_and_the_custom_scalars_layout(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    with SummaryWriter(str(tmp_path)) as w:
        w.add_scalar("loss/train", 1.0, 1)
        w.add_audio("tone", torch.zeros(1, 1600), 2, sample_rate=16000)
        w.add_custom_scalars({"cat": {"both": ["Multiline", ["loss/train", "loss/val"]],
                                      "band": ["Margin", ["loss/train", "lo", "hi"]]}})
    run = MO.read_back(tmp_path)["runs"]["."]
    assert run["audio"] == {"tone": [(16000.0, 1600)]}
    assert run["custom_scalars"] == {"cat": {"both": ["loss/train", "loss/val"], "band": ["loss/train", "lo", "hi"]}}
    assert "audio tags: 1" in MO.summarize_read_back({"runs": {".": run}, "embeddings": []})


def test_ops_table_rows_fit_a_notebook_and_hold_the_profilers_numbers(tmp_path):
    loaders = make_loaders(64)
    prof = MO.profile_training(MLP(), loaders["train"], tmp_path / "trace.json", steps=4)
    averages = prof.key_averages()
    for shapes, events in ((False, averages), (True, prof.key_averages(group_by_input_shape=True))):
        text = MO.ops_table(events, rows=6, shapes=shapes)
        assert max(len(line) for line in text.splitlines()) <= 110, text
    top = max(averages, key=lambda e: e.self_cpu_time_total)
    first = MO.ops_table(averages, rows=1).splitlines()[2]
    assert first.startswith(top.key[:20]) and f"{top.self_cpu_time_total / 1000:.3f}" in first and f" {top.count} " in first


def test_ops_table_prints_names_whole_up_to_60_characters_and_stays_narrow():
    from types import SimpleNamespace

    def ev(key, t):
        return SimpleNamespace(key=key, self_cpu_time_total=t, cpu_time_total=t, count=1, self_device_time_total=0,
                               self_cpu_memory_usage=0, input_shapes=[[64, 32, 8, 8]])

    loader = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"   # 59 characters, as profiled in 05
    events = [ev(loader, 2.0), ev("aten::convolution_backward", 3.0), ev("x" * 80, 1.0)]
    text = MO.ops_table(events)
    assert loader in text and "x" * 59 + "…" in text and "x" * 60 not in text
    for shapes in (False, True):
        assert max(len(line) for line in MO.ops_table(events, shapes=shapes).splitlines()) <= 107
    by_shape = MO.ops_table(events, shapes=True)           # whole names beside shapes too, each on a line below its row
    assert loader in by_shape and "input shapes (non-empty): 64×32×8×8\n" in by_shape
    assert "self mem KiB" in text.splitlines()[0]


def _event(key, cpu=0, self_cpu=0, dev=0, self_dev=0):
    from types import SimpleNamespace

    return SimpleNamespace(key=key, cpu_memory_usage=cpu, self_cpu_memory_usage=self_cpu, device_memory_usage=dev,
                           self_device_memory_usage=self_dev)


def test_callee_memory_line_names_the_row_that_allocates_through_its_callees():
    rows = [_event("aten::mkldnn_convolution", cpu=4096, self_cpu=4096),
            _event("aten::convolution_backward", cpu=2048, self_cpu=0)]
    assert MO.callee_memory_line(rows) == ("aten::convolution_backward: self CPU memory 0, but 2.0 KiB net allocated "
                                           "by the operators it calls")


def test_callee_memory_line_says_what_was_measured_when_no_row_does():
    # a GPU's table: the convolutions allocate device memory, their CPU memory is 0 (nothing printed before)
    rows = [_event("aten::convolution_backward", dev=3 * 1024, self_dev=0), _event("ProfilerStep*", cpu=512, self_cpu=512),
            _event("aten::cudnn_convolution", dev=1024, self_dev=1024)]
    line = MO.callee_memory_line(rows)
    assert line.startswith("no row above") and "ProfilerStep*, 0.5 KiB" in line
    assert "device memory: aten::convolution_backward, 3.0 KiB (0.0 KiB its own)" in line
    cpu_only = MO.callee_memory_line([_event("a", cpu=1024, self_cpu=1024)])
    assert "a, 1.0 KiB" in cpu_only and "device" not in cpu_only


def test_ddp_logging_worker_logs_rank_0s_shard_and_returns_every_ranks_means(tmp_path):
    from helpers.launching import launch

    ranks = launch(MO.ddp_logging_worker, nprocs=2, args=(1, 64, 3e-3, str(tmp_path)), verbose=False)
    assert [r["rank"] for r in ranks] == [0, 1] and [r["batch_size"] for r in ranks] == [32, 32]
    logged = [v for _, v in MO.read_back(tmp_path)["runs"]["tensorboard"]["scalars"]["train/loss"]]
    assert len(logged) == 1 and abs(logged[0] - ranks[0]["train/loss"][0]) < 1e-5   # rank 0's shard, not the run
    assert ranks[0]["train/loss"] != ranks[1]["train/loss"]                       # the shards differ
    assert len(list(tmp_path.rglob("events.out.tfevents.*"))) == 1                # rank 1 wrote nothing
    n = ranks[0]["dataset"]                                                       # DistributedSampler pads: equal shards
    assert n % 2 == 1 and [r["samples"] for r in ranks] == [(n + 1) // 2] * 2
