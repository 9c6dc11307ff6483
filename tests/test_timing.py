"""The one distributed timer (helpers/launching/timing.py): on a GPU it waits for the device before and after the
timed calls and returns the slowest rank's time; on a CPU it never touches CUDA. Every timed loop of 03, 08 and 09
goes through it."""
from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from helpers.launching import timing

CUDA = torch.device("cuda", 0)


@pytest.fixture
def events(monkeypatch):
    """What the timer did, in order: CUDA faked on this CPU, the barrier and ``agree`` recorded instead of run."""
    seen: list = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: seen.append(("sync", device)))
    monkeypatch.setattr(timing.dist, "barrier", lambda *a, **k: seen.append(("barrier",)))

    def agree(value, op="max"):
        seen.append(("agree", op))
        return 42.0   # the other ranks' maximum, whatever this rank measured

    monkeypatch.setattr(timing, "agree", agree)
    return seen


def test_on_a_gpu_the_timer_waits_before_and_after_the_calls_and_returns_the_agreed_maximum(events):
    got = timing.slowest_seconds_per_call(lambda: events.append(("call",)), inner=3, device=CUDA)
    assert got == 42.0
    assert events == [("barrier",), ("sync", CUDA), ("call",), ("call",), ("call",), ("sync", CUDA), ("agree", "max")]


def test_the_device_defaults_to_this_ranks(events, monkeypatch):
    monkeypatch.setattr(timing, "local_device", lambda: CUDA)
    timing.slowest_seconds_per_call(lambda: events.append(("call",)))
    assert events == [("barrier",), ("sync", CUDA), ("call",), ("sync", CUDA), ("agree", "max")]


def test_on_a_cpu_the_timer_never_calls_cuda(events, monkeypatch):
    def no_cuda(*a, **k):
        raise AssertionError("CUDA was called while timing on the CPU")

    monkeypatch.setattr(torch.cuda, "synchronize", no_cuda)
    monkeypatch.setattr(torch.cuda, "is_available", no_cuda)
    cpu = torch.device("cpu")
    assert timing.seconds_per_call(lambda: None, 5, cpu) >= 0
    timing.synchronize(cpu)
    assert timing.slowest_seconds_per_call(lambda: events.append(("call",)), inner=2, device=cpu) == 42.0
    assert events == [("barrier",), ("call",), ("call",), ("agree", "max")]


def test_seconds_per_call_is_the_time_of_one_call(monkeypatch):
    clock = iter([10.0, 16.0])   # the clock read before the first call and after the last
    monkeypatch.setattr(timing.time, "perf_counter", lambda: next(clock))
    assert timing.seconds_per_call(lambda: None, 3, torch.device("cpu")) == pytest.approx(2.0)


def test_on_one_real_rank_the_timer_returns_that_ranks_time(tmp_path, monkeypatch):
    clock = iter([1.0, 1.5])
    monkeypatch.setattr(timing.time, "perf_counter", lambda: next(clock))
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        assert timing.slowest_seconds_per_call(lambda: None, inner=5) == pytest.approx(0.1)
    finally:
        dist.destroy_process_group()


def test_the_lessons_time_with_it_and_the_collectives_still_export_its_parts():
    from helpers import collectives, launching
    from helpers.collectives import instruments, scratch_ddp
    from helpers.ddp import scaling
    from helpers.launching import throughput
    from helpers.sharding import instruments as sharding

    assert collectives.synchronize is timing.synchronize and collectives.seconds_per_call is timing.seconds_per_call
    assert launching.slowest_seconds_per_call is timing.slowest_seconds_per_call
    for module in (instruments, scratch_ddp, scaling, throughput, sharding):
        assert module.slowest_seconds_per_call is timing.slowest_seconds_per_call, module.__name__


def test_calls_to_fill_warms_up_probes_and_gives_enough_calls_for_the_time_asked(monkeypatch):
    """Warm-up calls, then timed probe calls; the count fills ``seconds`` at the probe's pace, at least ``least``."""
    calls = []
    monkeypatch.setattr(timing, "seconds_per_call", lambda fn, inner, device: calls.append(("probe", inner)) or 0.01)
    n = timing.calls_to_fill(lambda: calls.append("call"), 0.5, torch.device("cpu"), decide=False, warmup=2, probe=4)
    assert calls == ["call", "call", ("probe", 4)] and n == 50
    assert timing.calls_to_fill(lambda: None, 0.001, torch.device("cpu"), decide=False) == 3  # least
