"""DDP helpers (helpers.ddp): the sampler table, the equivalence check, torchrun commands."""
import pytest

from helpers import ddp


def test_sampler_pads_and_deals():
    parts = ddp.sampler_indices(10, 4)
    assert parts == [[0, 4, 8], [1, 5, 9], [2, 6, 0], [3, 7, 1]]
    assert ddp.sampler_indices(10, 4, drop_last=True) == [[0, 4], [1, 5], [2, 6], [3, 7]]


def test_set_epoch_changes_the_shuffle_and_is_reproducible():
    a, b = ddp.sampler_indices(20, 2, shuffle=True, epoch=0), ddp.sampler_indices(20, 2, shuffle=True, epoch=1)
    assert a != b and a == ddp.sampler_indices(20, 2, shuffle=True, epoch=0)
    assert sorted(sum(a, [])) == list(range(20))


def test_ddp_step_equals_single_process_step():
    res = ddp.run_ddp_equivalence_check(nprocs=2, batch=32, timeout=60)
    assert res["max_abs_diff"] < 1e-6 and res["ranks_agree"]


def test_equivalence_needs_an_even_split():
    with pytest.raises(ValueError, match="divide evenly"):
        ddp.run_ddp_equivalence_check(nprocs=3, batch=64)


def test_multi_node_command_needs_an_endpoint():
    with pytest.raises(ValueError, match="rendezvous endpoint"):
        ddp.torchrun_command(nproc=2, nnodes=2)
    cmd = ddp.torchrun_command(nproc=2, nnodes=2, endpoint="10.0.0.1:29500")
    assert "--rdzv_endpoint=10.0.0.1:29500" in cmd and "--rdzv_backend=c10d" in cmd
    assert not any(a.startswith("--node_rank") for a in cmd)   # the c10d rendezvous assigns node ranks
    assert "--standalone" in ddp.torchrun_command(2)


def test_sampler_bad_input():
    with pytest.raises(ValueError, match="world_size >= 1"):
        ddp.sampler_indices(10, 0)


def test_two_torchrun_nodes_meet_on_loopback_and_each_rank_uses_its_local_rank(tmp_path):
    """A real two-node launch on one machine: two agents, one c10d rendezvous on 127.0.0.1."""
    out = ddp.run_torchrun(1, script_args=("--epochs", "1", "--checkpoint", str(tmp_path / "ck.pt")), nnodes=2,
                           timeout=120)
    assert "rank 0: node 0, local rank 0" in out and "rank 1: node 1, local rank 0" in out
    assert "validation accuracy on every rank" in out


def test_simulated_nodes_on_one_machine_never_share_a_gpu(monkeypatch):
    """Two torchrun "nodes" on one machine: each its own GPUs, or the CPU (nccl refuses two ranks on one GPU)."""
    from helpers.dist import torchrun
    monkeypatch.setattr(torchrun, "gpu_count", lambda: 1)
    assert torchrun._node_gpus(0, 2, 1) == torchrun._node_gpus(1, 2, 1) == {"CUDA_VISIBLE_DEVICES": ""}
    monkeypatch.setattr(torchrun, "gpu_count", lambda: 4)
    assert [torchrun._node_gpus(k, 2, 2) for k in range(2)] == [{"CUDA_VISIBLE_DEVICES": "0,1"},
                                                                {"CUDA_VISIBLE_DEVICES": "2,3"}]
    assert torchrun._node_gpus(0, 1, 4) == {}
