"""A confused student's calls into helpers: each gives an error that says what to do."""
import pytest
import torch

from helpers import DigitsCNN, get_device, load_datasets, make_loaders, train
from helpers.launching import launcher as L
from helpers.launching import workers
from helpers import ddp, memory, pipeline, transfer, tuning
from helpers.core.checks import check

CASES = [
    # (description, call, exception, words that say what to do)
    ("unknown dataset", lambda: load_datasets("cifar100"), ValueError, "'digits' works offline"),
    ("dataset that needs a download", lambda: load_datasets("mnist"), ValueError, "download=True"),
    ("batch size 0", lambda: make_loaders(batch_size=0), ValueError, "try 64"),
    ("batch size as a string", lambda: make_loaders(batch_size="64"), ValueError, "positive int"),
    ("a GPU that does not exist", lambda: get_device("cuda:3"), ValueError, "use one of"),
    ("a device as a number", lambda: get_device(1), TypeError, "'cpu' or 'cuda:0'"),
    ("learning rate 0", lambda: train(DigitsCNN(), make_loaders(64)["train"], lr=0, progress=False), ValueError, "try 1e-2"),
    ("more nccl processes than GPUs", lambda: L.choose_backend(64, "nccl"), RuntimeError, "backend='gloo'"),
    ("unknown backend", lambda: L.launch(workers.whoami, 2, backend="mpi"), ValueError, "use 'gloo'"),
    ("zero processes", lambda: L.launch(workers.whoami, 0), ValueError, "positive int"),
    ("a lambda as a worker", lambda: L.launch(lambda r, w: r, 2), ValueError, "%%writefile"),
    ("a worker that is not a function", lambda: L.launch("whoami", 2), TypeError, "needs a function"),
    ("uneven DDP comparison", lambda: ddp.run_ddp_equivalence_check(nprocs=3, batch=64), ValueError, "divide evenly"),
    ("micro-batches that do not divide the batch", lambda: pipeline.run_gpipe(ms=(3,), batch=64), ValueError,
     "choose m dividing"),
    ("negative memory budget", lambda: memory.SavedTensorTracker(budget_bytes=-1), ValueError, "positive int"),
    ("batch search from 0", lambda: memory.find_largest_batch(lambda b: None, start=0), ValueError, "positive ints"),
    ("negative learning-rate bound", lambda: tuning.search_space(lr=(-0.1, 0.1)), ValueError, "0 < low < high"),
    ("empty choice list", lambda: tuning.search_space(batch_size=[]), ValueError, "at least one choice"),
    ("missing checkpoint", lambda: transfer.load_pretrained("/nonexistent/ck.pt"), FileNotFoundError, "pretrain_backbone"),
    ("unknown exercise", lambda: check("9.x", 1), KeyError, "ids look like"),
]


@pytest.mark.parametrize("desc, call, exc, hint", CASES, ids=[c[0] for c in CASES])
def test_confused_call_gets_a_helpful_error(desc, call, exc, hint):
    with pytest.raises(exc) as e:
        call()
    assert hint in str(e.value), f"{desc}: the message does not say what to do: {e.value}"


def test_missing_data_path(tmp_path, monkeypatch):
    monkeypatch.setenv("BEYOND_ONE_GPU_DATA", str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="pip install -e"):
        load_datasets("digits")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: cuda_memory() works here")
def test_cuda_memory_on_a_cpu_says_what_to_use_instead():
    with pytest.raises(RuntimeError, match="needs a GPU.*SavedTensorTracker"):
        memory.cuda_memory()
