"""One device decision per process (issue: works where students are).

- A helper computes where its model is (or where it is told): with the course's default device
  swapped for PyTorch's ``meta`` device, every helper that receives a CPU model must still run on
  the CPU. ``meta`` tensors mix with nothing, so a helper that reached for the default device
  instead of the model's would fail loudly here, on a CPU-only machine, as it would on a GPU.
- A rank computes on its *local* device, and the backend is chosen in one place: checked with a
  faked environment (LOCAL_RANK, LOCAL_WORLD_SIZE, the GPU count).
"""
import pytest
import torch
from torch.utils.data import DataLoader

from helpers import DigitsCNN, MLP, evaluate, make_loaders, train
from helpers.core import device as hd
from helpers.launching import ranks


@pytest.fixture
def default_is_meta(monkeypatch):
    """Make 'the default device' PyTorch's meta device: any helper using it with a CPU model fails."""
    monkeypatch.setattr(hd, "_best_device", lambda: torch.device("meta"))
    assert hd.get_device().type == "meta"


def test_the_drill_would_catch_a_helper_that_uses_the_default_device(default_is_meta):
    model = DigitsCNN()
    x = torch.zeros(2, 1, 8, 8).to(hd.get_device())
    with pytest.raises((RuntimeError, NotImplementedError)):
        model(x).sum().item()


def test_training_and_evaluation_follow_the_model(default_is_meta):
    torch.manual_seed(0)
    loaders = make_loaders(256)
    model = MLP()
    hist = train(model, loaders["train"], loaders["val"], epochs=1, progress=False)
    assert hist.val_acc and hd.model_device(model).type == "cpu"
    assert 0 <= evaluate(DigitsCNN(), loaders["val"])["acc"] <= 1


def test_monitoring_helpers_follow_the_model(default_is_meta, tmp_path):
    from helpers import monitor

    loaders = make_loaders(256)
    hist = monitor.train_with_bars(MLP(), loaders["train"], loaders["val"], epochs=1)
    assert len(hist) == 1
    wrote = monitor.write_all_summaries(tmp_path / "tb", DigitsCNN(), loaders, epochs=1)
    assert wrote["epochs"] == 1
    prof = monitor.profile_training(MLP(), loaders["train"], tmp_path / "trace.json", steps=3)
    assert (tmp_path / "trace.json").exists() and prof is not None


def test_transfer_helpers_follow_the_model(default_is_meta):
    from helpers import transfer

    pretrained = DigitsCNN(num_classes=5)
    for mode in transfer.MODES:
        m = transfer.make_target_model(pretrained, mode)
        assert hd.model_device(m).type == "cpu"
    per_class = transfer.flipped_accuracy_per_class(transfer.make_target_model(pretrained, "frozen", num_classes=10))
    assert set(per_class) == set(range(10))
    rows = transfer.compare_strategies(pretrained, shots=(5,), steps=2, seeds=(0,))
    assert len(rows) == len(transfer.MODES)


def test_model_device_of_a_model_without_parameters():
    assert hd.model_device(torch.nn.ReLU()).type == "cpu"
    assert hd.model_device(DigitsCNN().to("meta")).type == "meta"


# --- the rank rules -----------------------------------------------------------------------------------

@pytest.fixture
def node(monkeypatch):
    """A fake node: set LOCAL_RANK, LOCAL_WORLD_SIZE, RANK and the GPU count."""

    def set_node(local_rank: int, local_world: int, gpus: int, rank: int | None = None):
        monkeypatch.setenv("LOCAL_RANK", str(local_rank))
        monkeypatch.setenv("LOCAL_WORLD_SIZE", str(local_world))
        monkeypatch.setenv("RANK", str(local_rank if rank is None else rank))
        monkeypatch.setattr(ranks, "gpu_count", lambda: gpus)
        monkeypatch.setattr(ranks.dist, "is_nccl_available", lambda: True)

    return set_node


def test_second_node_uses_its_local_gpu_not_its_global_rank(node):
    node(local_rank=1, local_world=4, gpus=4, rank=5)  # node 1 of two 4-GPU nodes, global rank 5
    assert ranks.choose_backend(ranks.local_world_size()) == "nccl"
    assert ranks.local_device() == torch.device("cuda", 1)


def test_gloo_and_the_cpu_when_gpus_are_fewer_than_local_processes(node):
    node(local_rank=3, local_world=4, gpus=2)
    assert ranks.choose_backend(ranks.local_world_size()) == "gloo"
    assert ranks.local_device() == torch.device("cpu")
    node(local_rank=0, local_world=1, gpus=0)
    assert ranks.local_device().type == "cpu"


def test_forced_backends_are_checked_against_the_node(node):
    node(local_rank=0, local_world=2, gpus=1)
    with pytest.raises(RuntimeError, match="one GPU per process"):
        ranks.choose_backend(2, "nccl")
    assert ranks.choose_backend(1, "nccl") == "nccl"
    assert ranks.local_device("nccl") == torch.device("cuda", 0)
    assert ranks.local_device("gloo") == torch.device("cpu")


def test_outside_a_launch_the_process_is_rank_zero_of_one(monkeypatch):
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    assert ranks.local_rank() == 0 and ranks.local_world_size() == 1


def test_launch_and_the_torchrun_script_use_the_one_backend_rule():
    import inspect

    from helpers.ddp import script as ddp_script
    from helpers.launching import launcher as launch

    for module in (launch, ddp_script):
        src = inspect.getsource(module)
        assert "choose_backend(" in src and "device_count()" not in src, module.__name__


def test_one_physical_core_is_detected(monkeypatch):
    import psutil

    monkeypatch.setattr(psutil, "cpu_count", lambda logical=True: 2 if logical else 1)
    assert hd.physical_cores() == 1
    assert "2 logical cores on 1 physical" in hd.hardware_label("cpu")


def test_importing_helpers_first_makes_openmp_threads_sleep_when_idle():
    """A kernel's torch thread pool must not spin: with one core busy elsewhere, spinning OpenMP threads
    made 3 epochs of DigitsCNN take 15 s instead of 0.3 s (measured on the 2-core reference machine)."""
    import subprocess
    import sys

    env = {k: v for k, v in __import__("os").environ.items() if k != "OMP_WAIT_POLICY"}
    # one process (importing helpers, torch with it, is most of the cost): the default, then a reader's own choice,
    # set before helpers/__init__.py runs again (importlib.reload runs the module's code again, its imports cached)
    out = subprocess.run([sys.executable, "-c", "import helpers, importlib, os; print(os.environ['OMP_WAIT_POLICY']); "
                          "os.environ['OMP_WAIT_POLICY'] = 'ACTIVE'; importlib.reload(helpers); "
                          "print(os.environ['OMP_WAIT_POLICY'])"], capture_output=True, text=True, env=env, check=True).stdout
    assert out.split() == ["PASSIVE", "ACTIVE"]   # the default; a reader's own choice wins
