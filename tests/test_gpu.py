"""GPU-only tests (``pytest -m gpu``; tests/gpu/run.sh runs them): the CUDA and nccl paths for real.

Skipped, with the reason, on a machine without a CUDA GPU. With one GPU the nccl paths run with
one process (world size 1); with two or more, with two.
"""
import pytest
import torch

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run tests/gpu/run.sh there)")]

NPROCS = min(2, torch.cuda.device_count()) if torch.cuda.is_available() else 1


def test_nccl_all_reduce_on_gpu_tensors():
    from helpers.launching import workers
    from helpers.launching import launch

    assert launch(workers.all_reduce_sum, NPROCS, backend="nccl", verbose=False, timeout=120) == \
        [float(sum(range(1, NPROCS + 1)))] * NPROCS
    who = launch(workers.whoami, NPROCS, backend="nccl", verbose=False, timeout=120)
    assert all(w["backend"] == "nccl" for w in who)


def test_ddp_equals_one_process_under_nccl():
    from helpers.ddp import run_ddp_equivalence_check

    res = run_ddp_equivalence_check(nprocs=NPROCS, batch=64, timeout=120)
    assert res["max_abs_diff"] < 1e-5 and res["ranks_agree"]


def test_ddp_training_under_nccl_uses_the_local_gpu(tmp_path):
    from helpers.ddp import no_sync_worker, train_worker
    from helpers.launching import launch

    runs = launch(train_worker, NPROCS, args=(2, 64, 3e-3, str(tmp_path / "ck.pt")), verbose=False, timeout=180)
    assert all(r["checkpoint_matches"] for r in runs)
    ns = launch(no_sync_worker, NPROCS, args=(4, 32), verbose=False, timeout=120)[0]
    assert ns["allreduce_calls_no_sync"] == ns["buckets_per_backward"] and ns["max_abs_diff"] < 1e-5



@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="SyncBatchNorm under DDP and the nccl scaling need 2 GPUs")
def test_syncbatchnorm_and_the_scaling_measurement_on_two_gpus():
    """Notebook 03's GPU paths: SyncBatchNorm brings DDP back to the one-process step; 1 vs 2 GPUs measured."""
    from helpers.ddp import measure_scaling, run_ddp_equivalence_checks

    res = run_ddp_equivalence_checks(2, 64, variants=("batchnorm", "syncbatchnorm"), timeout=120)
    assert res["batchnorm"]["max_abs_diff"] > 1e-4
    assert res["syncbatchnorm"]["max_abs_diff"] < 1e-5 and res["syncbatchnorm"]["ranks_agree"]
    rows = measure_scaling(2, batches=(64, 256), repeats=2, seconds=0.05, timeout=180)
    assert all(r["allreduce_bytes_per_step"] > 0 and len(r["speedups"]) == 2 for r in rows)

def test_torchrun_script_on_gpus(tmp_path):
    from helpers.ddp import run_torchrun

    out = run_torchrun(NPROCS, script_args=("--epochs", "1", "--checkpoint", str(tmp_path / "t.pt")), timeout=180)
    assert "backend nccl" in out and "validation accuracy of that checkpoint, reloaded on every rank" in out


def test_helpers_follow_a_model_on_the_gpu(tmp_path):
    from helpers import DigitsCNN, evaluate, make_loaders, monitor, train, transfer
    from helpers.core.device import model_device

    loaders = make_loaders(128)
    model = DigitsCNN().to("cuda")
    train(model, loaders["train"], loaders["val"], epochs=1, progress=False)
    assert model_device(model).type == "cuda" and evaluate(model, loaders["val"])["acc"] > 0
    monitor.train_with_bars(model, loaders["train"], loaders["val"], epochs=1)
    monitor.write_all_summaries(tmp_path / "tb", DigitsCNN().to("cuda"), loaders, epochs=1)
    pre = DigitsCNN(num_classes=5).to("cuda")
    for mode in transfer.MODES:
        assert model_device(transfer.make_target_model(pre, mode)).type == "cuda"
    transfer.flipped_accuracy_per_class(transfer.make_target_model(pre, "frozen", num_classes=10))


def test_ray_trial_trains_on_the_gpu_it_was_given():
    pytest.importorskip("ray")
    from helpers import tuning

    tuning.init_ray()
    try:
        res = tuning.run_tuner("gpu_trial", num_samples=2, max_t=1, scheduler="fifo", verbose=0,
                               storage="/tmp/beyond-one-gpu-gpu-test")
    finally:
        tuning.shutdown_ray()
    assert res["errors"] == 0 and res["trials"] == 2


def test_leak_is_seen_by_the_cuda_allocator():
    from helpers.memory import leak_curve

    bug, fix = leak_curve(False, device="cuda"), leak_curve(True, device="cuda")
    assert bug["cuda_allocated"][-1] > bug["cuda_allocated"][0]
    assert fix["cuda_allocated"][-1] == fix["cuda_allocated"][0]
