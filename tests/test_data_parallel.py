"""DataParallel helpers (helpers.data_parallel): the four steps against one device, the GPU path, the threads and
processes that run them, the timer."""
import pytest
import torch

from helpers import DigitsCNN
from helpers import data_parallel as D
from helpers.data_parallel import instruments as I


def test_four_steps_equal_one_device_and_report_the_path():
    res = D.run_four_steps(batch=64)
    assert res["grad_max_abs_diff"] <= res["grad_tolerance"] == 1e-6
    assert res["update_max_abs_diff"] <= res["update_tolerance"] < 1e-6
    assert set(res["times"]) == {"scatter", "replicate", "apply", "gather", "backward"}
    expected = "torch.nn.parallel on" if torch.cuda.device_count() >= 2 else "plain tensor ops"
    assert res["path"].startswith(expected)


def test_ddp_buckets_default_to_a_copy_of_the_gradients():
    import inspect
    assert inspect.signature(torch.nn.parallel.DistributedDataParallel).parameters["gradient_as_bucket_view"].default is False


@pytest.mark.skipif(torch.cuda.device_count() >= 2, reason="the CPU simulation's copies")
def test_copied_bytes_read_from_storages():
    res = D.run_four_steps(batch=64)
    c = res["copied_bytes"]
    # replica 0 shares the module's parameters (as DataParallel's on device_ids[0]): (n − 1) copies
    assert c == {"scatter": 0, "replicate": (2 - 1) * res["accounting"]["param_bytes"], "gather": 64 * 10 * 4}
    assert set(res["backward_threads"]) == {res["main_thread"]}  # CPU autograd: the calling thread
    assert len(res["backward_threads"]) == res["backward_nodes"] > 20  # every node ran once, both replicas' too


def test_batchnorm_makes_the_chunks_differ():
    assert D.batchnorm_gradient_gap() > 100 * I.GRAD_TOLERANCE
    gap, scale = D.batchnorm_gradient_gap(with_scale=True)  # the printed scale: the largest single-device entry
    assert gap == D.batchnorm_gradient_gap() and 0 < gap < scale


def test_tf32_is_off_for_the_comparison_and_restored(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    before = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = True
    try:
        with I._full_float32():
            assert not torch.backends.cudnn.allow_tf32 and not torch.backends.cuda.matmul.allow_tf32
        assert torch.backends.cudnn.allow_tf32
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = before


@pytest.mark.skipif(not torch.cuda.is_available(), reason="torch.nn.parallel needs CUDA")
def test_the_gpu_path_matches_one_device_in_float32():
    res = D.run_four_steps(batch=64, device_ids=[0, 0])  # two replicas on one GPU: the same primitives
    assert res["path"].startswith("torch.nn.parallel")
    assert res["grad_max_abs_diff"] <= res["grad_tolerance"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU machine DataParallel uses the GPUs")
def test_data_parallel_is_a_pass_through_without_gpus():
    dp = D.wrap_data_parallel(torch.nn.Linear(3, 2))
    x = torch.randn(4, 3)
    assert dp.device_ids == [] and torch.equal(dp(x), dp.module(x))


def test_process_rounds_time_one_and_two_processes_in_turns():
    r = D.process_rounds(batch=64, seconds=0.05, rounds=2)
    assert set(r) == {1, 2} and len(r[1]) == len(r[2]) == 2 and min(r[1] + r[2]) > 0


def test_process_rounds_stay_on_gloo_and_the_cpu_with_gpus(monkeypatch):
    """With 2 GPUs choose_backend(2) says nccl; the processes compared with CPU threads must stay on gloo/CPU."""
    from helpers.data_parallel import processes as P
    from helpers.launching import ranks
    monkeypatch.setattr(ranks, "gpu_count", lambda: 2)
    monkeypatch.setattr(ranks.dist, "is_nccl_available", lambda: True)
    assert ranks.choose_backend(2) == "nccl"  # the mock took: the automatic choice would move them to the GPUs
    seen = {}

    def fake_launch(fn, nprocs, args=(), backend=None, **kw):
        seen.update(fn=fn, nprocs=nprocs, backend=backend)
        return [{1: [1.0], 2: [1.0]}, {1: [], 2: [1.0]}]

    monkeypatch.setattr(P, "launch", fake_launch)
    assert P.process_rounds(batch=8, seconds=0.01, rounds=1) == {1: [1.0], 2: [1.0]}
    assert seen["backend"] == P.PROCESS_BACKEND == "gloo" and seen["nprocs"] == 2
    assert ranks.local_device("gloo").type == "cpu"  # what the launcher and agree() give each rank under gloo
    import inspect
    assert "cuda" not in inspect.getsource(P.rounds_worker)  # the worker moves nothing to a GPU


def _omp_or_skip():
    get = I._omp_max_threads()
    if get is None:
        pytest.skip("OpenMP's omp_get_max_threads cannot be read here")
    return get


def test_the_openmp_read_is_torchs_even_with_another_copy_loaded():
    """scikit-learn loads its own libgomp (sorted first by path): its setting never follows torch's."""
    pytest.importorskip("sklearn")
    from helpers.core.measure import torch_threads
    get = _omp_or_skip()
    with torch_threads(1):
        assert get() == 1
    assert get() == torch.get_num_threads()


def test_a_fresh_thread_gets_one_intraop_thread_only_when_set_in_it():
    _omp_or_skip()
    seen = D.omp_threads_at_thread_start()
    assert seen["set_in_thread"] == 1
    if torch.get_num_threads() > 1:  # the default is above 1: a thread that does not set it starts there
        assert seen["plain"] > 1


def test_every_worker_thread_computes_on_one_intraop_thread(monkeypatch):
    """four_steps_cpu's threads, thread_variants' and gil_probe's: the first operator of each sees 1 OpenMP thread."""
    from helpers.core.measure import torch_threads
    from helpers.data_parallel import speed
    get = _omp_or_skip()
    seen: list[int] = []

    class Probe(DigitsCNN):
        def forward(self, x):
            seen.append(get())  # before the thread's first operator
            return super().forward(x)

    x, y = torch.randn(8, 1, 8, 8), torch.randint(0, 10, (8,))
    with torch_threads(1):
        D.four_steps_cpu(Probe(), x, y, n=2)
    monkeypatch.setattr(speed, "DigitsCNN", Probe)
    D.thread_variants(batch=8, seconds=0.005, rounds=1)
    D.gil_probe(batches=(2,), seconds=0.005, rounds=1, min_steps=1)
    assert seen and set(seen) == {1}


def test_saves_its_output_reads_what_autograd_keeps():
    x = torch.randn(4, 1, 8, 8)
    assert not D.saves_its_output(DigitsCNN(), x)  # a Linear last: it saves its input and weight
    assert D.saves_its_output(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 3), torch.nn.Sigmoid()), x)


def test_sync_waits_for_every_gpu(monkeypatch):
    """Review of 02 (fresh read 2): torch.cuda.synchronize() with no argument waits for the current
    device only, so on several GPUs the apply/gather split was timed before the other GPUs finished."""
    from helpers.data_parallel import timing
    waited = []
    monkeypatch.setattr(timing.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(timing.torch.cuda, "device_count", lambda: 3)
    monkeypatch.setattr(timing.torch.cuda, "synchronize", lambda device=None: waited.append(device))
    timing.sync()
    assert sorted(waited) == [0, 1, 2]
    waited.clear()
    times = {}
    assert timing.timed(times, "x", lambda: 5) == 5
    assert waited == [0, 1, 2, 0, 1, 2] and times["x"] >= 0
    monkeypatch.setattr(timing.torch.cuda, "is_available", lambda: False)
    waited.clear()
    timing.sync()
    assert waited == []


def test_parallel_apply_here_names_the_line_it_came_through():
    """The notebook says what parallel_apply's traceback shows, not a guessed cause (02)."""
    if torch.cuda.is_available():
        pytest.skip("parallel_apply runs with a GPU")
    s = D.parallel_apply_here()
    assert "raised through parallel_apply.py line " in s, s


def test_four_steps_gpu_runs_its_steps_through_the_record_hook(monkeypatch):
    """The recipe's GPU step on CPU fakes of torch.nn.parallel and torch.cuda: the hook sees the five steps in
    order, without a hook it still runs, and the instruments' hook (timing) fills the times as before."""
    import contextlib
    import torch.nn.parallel as par
    from helpers.data_parallel import timing
    monkeypatch.setattr(par, "scatter", lambda x, ids: list(x.chunk(len(ids))))
    monkeypatch.setattr(par, "replicate", lambda model, ids: [model] * len(ids))
    applied = []   # the devices each call gives its threads: DataParallel passes device_ids[:len(replicas)] (02's read 17)
    monkeypatch.setattr(par, "parallel_apply", lambda mods, ins, kw=None, devs=None: applied.append(devs) or
                        [m(*i) for m, i in zip(mods, ins)])
    monkeypatch.setattr(par, "gather", lambda outs, dev: torch.cat(outs))
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda d=None: None)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda d=None: 7)
    x, y, ids = torch.randn(8, 1, 8, 8), torch.randint(0, 10, (8,)), ["cpu", "cpu"]   # "cpu": y.to(ids[0]) works here
    seen = []

    @contextlib.contextmanager
    def record(times, name):
        seen.append(name)
        yield

    keys = {"path", "times", "loss", "peak_bytes"}
    res = D.four_steps_gpu(DigitsCNN(), x, y, ids, record=record)
    assert seen == ["scatter", "replicate", "apply", "gather", "backward"] and set(res) == keys
    assert list(res["peak_bytes"].values()) == [7] and res["path"] == "torch.nn.parallel on 2 GPUs"
    assert applied == [ids]   # one device per replica, not None (which runs every thread on the current GPU)
    plain = D.four_steps_gpu(DigitsCNN(), x, y, ids)
    assert set(plain) == keys and plain["times"] == {}
    timed = D.four_steps_gpu(DigitsCNN(), x, y, ids, record=timing.timing)
    assert list(timed["times"]) == seen and all(t >= 0 for t in timed["times"].values())
