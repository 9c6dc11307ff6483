"""DDP helpers (helpers.ddp): the sampler, the equivalence check, gradient accumulation with no_sync, the scaling
measurement, torchrun commands and nodes, how a launch ended."""
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


def test_equivalence_reference_trains_on_the_ranks_kind_of_device(monkeypatch):
    """nccl ranks (GPUs) against a one-process step on a GPU, gloo ranks against one on the CPU: never mixed.

    A GPU's matrix products round differently from a CPU's; notebook 09 failed on a GPU for that reason.
    """
    import torch
    import helpers.ddp.instruments as I

    for backend, kind in (("nccl", "cuda"), ("gloo", "cpu")):
        asked = []
        monkeypatch.setattr(I, "choose_backend", lambda n, b=backend: b)
        monkeypatch.setattr(I, "launch", lambda fn, n, **k: [[[torch.zeros(1)], "refused on CPU"]] * n)
        monkeypatch.setattr(I, "reference_parameters",
                            lambda name, batch, lr, device: asked.append((name, device)) or [torch.zeros(1)])
        res = I.run_ddp_equivalence_checks(nprocs=2, batch=8, variants=("plain", "syncbatchnorm"))
        assert asked == [("plain", kind)], (backend, asked)   # the refused variant needs no reference
        assert res["plain"]["max_abs_diff"] == 0.0 and res["syncbatchnorm"]["refused"] == "refused on CPU"


def test_equivalence_reference_on_the_cpu_is_one_step_on_the_whole_batch():
    import torch
    from helpers.ddp import instruments as I

    ref = I.reference_parameters("plain", 16, 0.5, device="cpu")
    model = I._equivalence_model(False)
    before = [p.detach().clone() for p in model.parameters()]
    I._sgd_step(model, *I._equivalence_batch(16), 0.5)
    assert all(torch.equal(a, b.detach()) for a, b in zip(ref, model.parameters()))
    assert any(not torch.equal(a, b) for a, b in zip(ref, before))   # it did take a step


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


# A real two-node launch on one machine (two agents, one c10d rendezvous, each rank on its local rank, rank 0's checkpoint
# equal on every rank) is notebook 03's cell 798e64eb: it asserts the node and MASTER_ADDR lines, and nbval compares
# the rest of its printed lines (ranks, nodes, local ranks, [True, True], the accuracies) with the stored output.


def test_loopback_aliases_are_tried_not_assumed(monkeypatch):
    import socket as real_socket
    import sys
    if sys.platform == "linux":   # Linux answers on all of 127/8
        assert ddp.loopback_aliases() == ("127.0.0.2", "127.0.0.3")
    assert ddp.loopback_aliases(("127.0.0.1",)) == ("127.0.0.1",)

    class MacSocket(real_socket.socket):   # macOS by default: only 127.0.0.1 on lo0
        def bind(self, address):
            if address[0] != "127.0.0.1":
                raise OSError(49, "Can't assign requested address")
            return super().bind(address)
    from helpers.launching import torchrun
    monkeypatch.setattr(torchrun.socket, "socket", MacSocket)
    assert ddp.loopback_aliases() is None and ddp.loopback_aliases(("127.0.0.1",)) == ("127.0.0.1",)


def test_run_torchrun_needs_one_local_addr_per_node():
    with pytest.raises(ValueError, match="one address per node"):
        ddp.run_torchrun(1, nnodes=2, local_addrs=("127.0.0.2",))


def test_simulated_nodes_on_one_machine_never_share_a_gpu(monkeypatch):
    """Two torchrun "nodes" on one machine: each its own GPUs, or the CPU (nccl refuses two ranks on one GPU)."""
    from helpers.launching import torchrun
    monkeypatch.setattr(torchrun, "gpu_count", lambda: 1)
    assert torchrun._node_gpus(0, 2, 1) == torchrun._node_gpus(1, 2, 1) == {"CUDA_VISIBLE_DEVICES": ""}
    monkeypatch.setattr(torchrun, "gpu_count", lambda: 4)
    assert [torchrun._node_gpus(k, 2, 2) for k in range(2)] == [{"CUDA_VISIBLE_DEVICES": "0,1"},
                                                                {"CUDA_VISIBLE_DEVICES": "2,3"}]
    assert torchrun._node_gpus(0, 1, 4) == {}


def test_measure_scaling_pairs_repeats_and_counts_every_gradient_byte():
    from helpers import DigitsCNN, count_parameters
    rows = ddp.measure_scaling(nprocs=2, batches=(16, 64), repeats=2, seconds=0.01, timeout=120)
    n_params = count_parameters(DigitsCNN())["total"]
    for r in rows:
        assert len(r["speedups"]) == 2 and r["speedup_min"] <= r["speedup"] <= r["speedup_max"]
        assert r["allreduce_bytes_per_step"] == 4 * n_params and r["allreduce_s"] > 0
        assert r["step_s_1"] > 0 and r["step_s_n"] > 0
        assert r["gloo"] is None or r["gloo"]["threads"] == 2 * r["gloo"]["devices"]  # two per network device


def test_accumulation_with_no_sync_all_reduces_once_and_reaches_the_same_step():
    from helpers.launching import launch
    ns = launch(ddp.no_sync_worker, 2, args=(3, 8), verbose=False, timeout=60)[0]
    # counted on a backward of its own (fifth read: not calls_plain // accum, which the next line would then restate);
    # DigitsCNN's 153 KB of gradients fit DDP's 1 MiB first bucket
    assert ns["buckets_per_backward"] == 1
    assert ns["allreduce_calls_plain"] == 3 * ns["buckets_per_backward"]
    assert ns["allreduce_calls_no_sync"] == ns["buckets_per_backward"] and ns["max_abs_diff"] < 1e-6


def test_dividing_each_micro_batch_mean_by_their_number_is_the_whole_mean_only_for_equal_sizes():
    """The recipe's comment: mean loss / number of micro-batches adds up to the mean over all samples iff equal sizes."""
    import torch
    torch.manual_seed(0)
    w, x, y = torch.randn(4, requires_grad=True), torch.randn(12, 4), torch.randn(12)

    def grad(parts, weights):
        w.grad = None
        for (a, b), c in zip(parts, weights):
            (((x[a:b] @ w - y[a:b]) ** 2).mean() * c).backward()
        return w.grad.clone()

    whole = grad([(0, 12)], [1.0])
    equal, unequal = [(0, 4), (4, 8), (8, 12)], [(0, 2), (2, 4), (4, 12)]
    assert torch.allclose(grad(equal, [1 / 3] * 3), whole)
    assert not torch.allclose(grad(unequal, [1 / 3] * 3), whole)
    assert torch.allclose(grad(unequal, [(b - a) / 12 for a, b in unequal]), whole)  # weighted by its share


def test_no_sync_counts_buckets_after_ddp_rebuilds_them_on_a_model_over_one_mib():
    # sixth read: DDP's first backward uses one bucket whatever the size; counted there, a 2 MiB model read as 1
    from helpers.launching import launch
    ns = launch(ddp.no_sync_worker, 2, args=(3, 8, (16, 32), 1024), verbose=False, timeout=60)[0]
    assert ns["buckets_per_backward"] >= 2   # 512×1024 float32 weights alone are 2 MiB: over the 1 MiB first bucket
    assert ns["allreduce_calls_plain"] == 3 * ns["buckets_per_backward"]
    assert ns["allreduce_calls_no_sync"] == ns["buckets_per_backward"] and ns["max_abs_diff"] < 1e-6


def test_measure_scaling_needs_two_processes_or_more():
    with pytest.raises(ValueError, match="nprocs >= 2"):
        ddp.measure_scaling(nprocs=1)


# --- the checkpoint behind the barrier: every rank must read the file rank 0 wrote --------------------------------

def test_a_checkpoint_not_on_a_shared_filesystem_is_refused_on_every_rank(tmp_path):
    import re
    from helpers.launching import launch
    from launch_drills import checkpoint_per_node
    said = launch(checkpoint_per_node, 2, args=(str(tmp_path),), verbose=False, timeout=60)
    for rank in (0, 1):  # both ranks raise, so neither waits for the other in the next collective
        assert said[rank]["shared"] is None
        assert re.search("rank 1 on .*: no such file.*every node shares", said[rank]["own disk"])
        assert re.search("rank 1 on .*: a different file.*every node shares", said[rank]["stale"])
        assert "rank 0 on" not in said[rank]["stale"]


def test_the_two_node_rendezvous_port_stays_held_while_the_agents_start(monkeypatch):
    """run_torchrun hosts the rendezvous store itself: the port cannot be taken between choosing and using it."""
    import socket
    from helpers.launching import torchrun
    seen = []

    class Agent:
        pid, returncode = 0, 0
        def poll(self): return 0
        def wait(self): return 0

    def popen(cmd, **kwargs):
        port = int(next(a for a in cmd if a.startswith("--rdzv_endpoint=")).rsplit(":", 1)[1])
        with socket.socket() as s, pytest.raises(OSError):
            s.bind(("127.0.0.1", port))  # still held by run_torchrun's store
        seen.append("--rdzv_conf=is_host=false" in cmd)
        return Agent()

    class Dog:
        def kill(self): pass
        def wait(self): pass

    monkeypatch.setattr(torchrun.subprocess, "Popen", popen)
    monkeypatch.setattr(torchrun, "watch_parent", lambda groups: Dog())
    torchrun.run_torchrun(1, nnodes=2, timeout=5)
    assert seen == [True, True]


def test_how_the_launch_ended_follows_what_the_other_ranks_did():
    from helpers.launching.failures import LaunchError
    lost = LaunchError(1, "x", "rank 1: ValueError: bug", exits={0: 1, 1: 1},
                       errors={0: "Traceback\nRuntimeError: [pair.cc] Connection closed by peer", 1: "ValueError: bug"})
    text = ddp.how_the_launch_ended(lost, 0.53)
    assert text.startswith("rank 0: did not wait to be ended") and "no rank was left to end" in text
    assert "So the 0.5 s are: starting the ranks, their failing, and listening until every rank had exited (at most " \
        "SETTLE, 1 s, then up to 0.2 s more); no rank was left to end." in text and "SIGTERM" not in text
    hung = LaunchError(1, "x", "rank 1: ValueError: bug", exits={0: None, 1: 1, 2: 1},
                       errors={1: "ValueError: bug", 2: "Traceback\nKeyError: 'k'"})
    text = ddp.how_the_launch_ended(hung, 1.73)
    assert "rank 0: still running when the launcher stopped listening" in text and "rank 2: raised too: KeyError: 'k'" in text
    assert "all of SETTLE (1 s) of listening while rank(s) 0 ran" in text and "SIGTERM, then up to 3 s before SIGKILL" in text
