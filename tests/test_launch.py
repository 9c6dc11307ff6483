"""The notebook launcher (helpers.launching.launcher): results back, failures fast, hangs ended, no port collisions."""
import os
import subprocess
import sys
import threading
import time

import pytest

import launch_drills
from conftest import ROOT
from conftest import launched_children as _children
from helpers.launching import launcher as L
from helpers.launching import ranks, startup
from helpers.launching import workers


def test_results_come_back_by_rank():
    out = L.launch(workers.all_reduce_sum, nprocs=3, verbose=False, timeout=60)
    assert out == [6.0, 6.0, 6.0]
    who = L.launch(workers.whoami, nprocs=2, verbose=False, timeout=60)
    assert [w["rank"] for w in who] == [0, 1] and who[0]["backend"] == "gloo" and who[0]["threads"] == 1
    assert not _children()


def test_a_rank_that_raises_fails_fast_with_its_traceback():
    t0 = time.monotonic()
    with pytest.raises(L.LaunchError) as e:
        L.launch(workers.fail_on_rank, nprocs=2, args=(1,), verbose=False, timeout=60)
    assert time.monotonic() - t0 < 30
    assert e.value.rank == 1 and "rank 1 hit a bug on purpose" in str(e.value) and "Traceback" in str(e.value)
    assert not _children()


def test_a_hung_rank_is_ended_by_the_timeout():
    t0 = time.monotonic()
    with pytest.raises(TimeoutError, match="did not finish within 3 s"):
        L.launch(launch_drills.hang_on_rank, nprocs=2, args=(1,), verbose=False, timeout=3)
    assert time.monotonic() - t0 < 20
    assert not _children()


def test_two_launches_at_once_do_not_collide():
    results, errors = [], []

    def run():
        try:
            results.append(L.launch(workers.all_reduce_sum, nprocs=2, verbose=False, timeout=60))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and results == [[3.0, 3.0], [3.0, 3.0]]


def test_ranks_fork_from_one_server_and_see_the_launchers_environment_of_each_launch(monkeypatch):
    if startup.start_method() != "forkserver":
        pytest.skip("spawn here: every rank is a fresh Python")
    monkeypatch.setenv("BOG_PROBE", "first")
    first = L.launch(launch_drills.parent_and_env, 2, args=("BOG_PROBE",), verbose=False, timeout=60)
    monkeypatch.setenv("BOG_PROBE", "second")  # the fork server has already started: set after it
    second = L.launch(launch_drills.parent_and_env, 2, args=("BOG_PROBE",), verbose=False, timeout=60)
    assert [r["env"] for r in first] == ["first"] * 2 and [r["env"] for r in second] == ["second"] * 2
    parents = {r["ppid"] for r in first + second}
    assert len(parents) == 1 and os.getpid() not in parents  # one fork server started all four, not this process


def test_what_the_fork_server_imports_does_not_initialise_cuda():
    """A process forked after CUDA was initialised cannot use it: the server's imports must not touch CUDA."""
    probe = ("import torch, torch.cuda\n"
             "calls = []\n"
             "for name in ('is_available', 'device_count', '_lazy_init', 'init', 'mem_get_info'):\n"
             "    setattr(torch.cuda, name, lambda *a, _n=name, **k: calls.append(_n))\n"
             "torch._C._cuda_getDeviceCount = lambda: calls.append('_cuda_getDeviceCount') or 0\n"
             f"for m in {startup._PRELOAD!r}:\n"
             "    __import__(m)\n"
             "print(calls, torch.cuda.is_initialized())\n")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["[]", "False"], out.stdout


def test_output_of_ranks_is_relayed(capfd):
    out = L.launch(launch_drills.print_and_return, nprocs=2, args=("hi",), verbose=False, timeout=60)
    assert out == ["hi from 0", "hi from 1"]
    printed = capfd.readouterr().out
    assert "rank 0: hi" in printed and "rank 1: hi" in printed


def test_nccl_without_gpus_says_what_to_do(monkeypatch):
    monkeypatch.setattr(ranks, "gpu_count", lambda: 0)
    with pytest.raises(RuntimeError, match="needs NVIDIA GPUs.*backend='gloo'"):
        L.launch(workers.whoami, nprocs=2, backend="nccl")


def test_more_gpu_processes_than_gpus(monkeypatch):
    monkeypatch.setattr(ranks, "gpu_count", lambda: 1)
    with pytest.raises(RuntimeError, match="one GPU per process"):
        L.choose_backend(2, "nccl")
    assert L.choose_backend(2) == "gloo"


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"backend": "mpi2"}, ValueError, "unknown backend"),
    ({"nprocs": 0}, ValueError, "nprocs must be a positive int"),
    ({"threads": 0}, ValueError, "threads must be a positive int"),
    ({"timeout": -1}, ValueError, "timeout must be a number of seconds"),
])
def test_bad_launch_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        L.launch(workers.whoami, **kwargs)


def test_function_from_a_notebook_cell_is_refused_with_the_fix():
    def local_worker(rank, world_size):
        return rank

    with pytest.raises(ValueError, match="%%writefile"):
        L.launch(local_worker)
    with pytest.raises(TypeError, match="needs a function"):
        L.launch("whoami")


def test_progress_is_plain_tqdm_outside_jupyter():
    from tqdm.auto import tqdm

    from helpers.core.bars import progress
    bar = progress(range(3), disable=True)
    assert isinstance(bar, tqdm) and list(bar) == [0, 1, 2]


def test_diagnose_names_the_cause_by_rule_not_by_arrival():
    """A signal first; else a rank gone without a traceback; else the lowest rank whose error is not a lost peer (03)."""
    from helpers.launching.failures import _Run
    lost = "Traceback ...\nRuntimeError: [pair.cc:534] Connection closed by peer [127.0.0.1]:1234"
    run = _Run(3)
    run.started = {0, 1, 2}
    run.errors = {0: lost, 2: "Traceback ...\nValueError: the bug"}
    e = run.diagnose({0: 1, 1: None, 2: 1})
    assert e.rank == 2 and e.cause == "rank 2: ValueError: the bug"  # rank 0 raised too, but lost its peer
    assert e.exits == {0: 1, 1: None, 2: 1} and e.errors[0] == lost  # rank 1 still running: the launcher ends it
    assert "rank 0 then failed" in e.details
    run.errors[1] = "Traceback ...\nKeyError: 'x'"
    assert run.diagnose({0: 1, 1: 1, 2: 1}).rank == 1  # two real causes: the lowest-numbered, not the first to arrive
    assert run.diagnose({0: 1, 1: 1, 2: 1, 3: -9}).rank == 3  # a rank killed by a signal comes before any traceback
    assert run.diagnose({0: 1, 1: 1, 2: 1, 3: 1}).rank == 3  # one gone without a traceback comes before them too


def test_no_rank_runs_its_function_before_every_rank_is_through_init(tmp_path, monkeypatch):
    """A rank whose function returns at once tears down its process group; a rank still inside
    init_process_group then fails with gloo's "Connection closed by peer" (a CI run of notebook 05, one
    core busy). So each rank meets the others (a barrier) between init and the function: the order, here
    on one forked rank with the process-group calls recorded."""
    order = tmp_path / "order"

    def note(step):
        return lambda *a, **k: order.open("a").write(step + "\n")

    monkeypatch.setattr(L.dist, "TCPStore", lambda *a, **k: None)
    monkeypatch.setattr(L.dist, "init_process_group", note("init"))
    monkeypatch.setattr(L.dist, "barrier", note("barrier"))
    monkeypatch.setattr(L, "die_with_launcher", lambda pid: None)
    import multiprocessing
    import pickle
    ctx = multiprocessing.get_context("fork")
    read, write = ctx.Pipe(duplex=False)
    env = dict(os.environ, BOG_ORDER_FILE=str(order))
    p = ctx.Process(target=L._entry, args=(pickle.dumps(launch_drills.note_order), 0, 1, "gloo", 0, 1, 30.0, (),
                                           write, False, env, os.getpid()))
    p.start()
    write.close()
    p.join(60)
    assert p.exitcode == 0 and order.read_text().split() == ["init", "barrier", "fn"]
