"""Notebook 02's timings (helpers/data_parallel/speed.py): the thread variants, the rounds and their verdict, the GIL
probe, Amdahl's cap, the throughput runs."""
from helpers import DigitsCNN
from helpers import data_parallel as D
from helpers.data_parallel import instruments as I
from helpers.data_parallel import memory as M


def test_thread_variants_take_turns_for_every_round():
    res = D.thread_variants(batch=32, seconds=0.02, rounds=2)
    assert set(res) == {"single", "threads_forward_only", "threads_forward_backward"}
    assert all(len(v) == 2 and all(s > 0 for s in v) for v in res.values())


def test_forward_only_times_the_step_and_nothing_else(monkeypatch):
    """The timing bug: the accounting (an extra forward under saved-tensor hooks) ran in every timed step."""
    def no_accounting(*a, **k):
        raise AssertionError("output_device_accounting ran inside a timed step")

    monkeypatch.setattr(I, "output_device_accounting", no_accounting)
    monkeypatch.setattr(M, "SavedTensorTracker", no_accounting)
    D.thread_variants(batch=32, seconds=0.02, rounds=1)
    D.time_four_steps(batch=32, repeats=1)


def test_rounds_verdict_is_generated_from_every_round():
    runs = {"single": [10.0, 10.0], "a": [9.0, 8.0], "b": [11.0, 12.0], "c": [9.0, 11.0]}
    assert D.rounds_verdict(runs, "a")["verdict"].startswith("slower")
    assert D.rounds_verdict(runs, "b")["verdict"].startswith("faster")
    assert D.rounds_verdict(runs, "c")["verdict"].startswith("no clear difference")


def test_rounds_verdict_counts_a_round_at_one_as_no_difference():
    """0.76×, 0.90×, 1.00×: the last round is a tie, not a win; within the margin is no difference either way."""
    runs = {"single": [10.0, 10.0, 10.0], "tie": [7.6, 9.0, 10.0], "near": [10.2, 10.1, 9.9],
            "just_slower": [9.6, 9.0, 9.5], "just_faster": [10.4, 11.0, 12.0]}
    for name, side in (("tie", "no clear difference"), ("near", "no clear difference"),
                       ("just_slower", "slower"), ("just_faster", "faster")):
        v = D.rounds_verdict(runs, name)
        assert v["side"] == side and v["verdict"].startswith(side), (name, v)
    assert D.MARGIN == 0.03


def test_gil_by_rounds_says_no_clear_difference_when_the_rounds_straddle_one():
    rows = [{"batch_per_thread": 1, "ratios": [0.7, 0.9]}, {"batch_per_thread": 4, "ratios": [1.1, 1.2]},
            {"batch_per_thread": 16, "ratios": [0.78, 1.4]}, {"batch_per_thread": 64, "ratios": [1.2, 1.0]},
            {"batch_per_thread": 256, "ratios": [0.99, 0.98]}]
    assert D.gil_by_rounds(rows) == {"faster": [4], "slower": [1], "no clear difference": [16, 64, 256]}
    # the rule printed beside it (third read): 16's rounds are both beyond 3%, on either side, so "within 3%" is not it
    assert D.verdict_rule() == "a verdict only when every round is more than 3% beyond 1× on the same side"
    assert D.verdict_rule() in D.probe_rule()


def test_amdahl_cap_is_between_one_and_the_workers():
    assert D.amdahl_cap(0.0) == 2 and D.amdahl_cap(1.0) == 1
    assert abs(D.amdahl_cap(0.41) - 1 / (0.41 + 0.59 / 2)) < 1e-12
    assert all(1 <= D.amdahl_cap(s / 10) <= 2 for s in range(11))


def test_gil_probe_reports_the_rounds_range():
    rows = D.gil_probe(batches=(2,), seconds=0.01, rounds=2)
    r = rows[0]
    assert r["speedup_min"] <= r["speedup"] <= r["speedup_max"]
    assert r["batch_per_thread"] in D.gil_by_rounds(rows)[r["side"]]  # the row's verdict is the summary's


def test_throughput_runs_at_least_min_steps_however_short_the_time():
    from helpers.data_parallel.speed import _throughput
    calls = []
    _throughput(lambda: calls.append(1), batch=1, seconds=0.0, min_steps=7)
    assert len(calls) == 2 + 7  # two warm-up steps, then at least min_steps timed ones


def test_time_four_steps_cpu_runs_the_simulation_with_gpus_counted(monkeypatch):
    """Section 4's CPU sentences take CPU times: time_four_steps(cpu=True) never takes the GPU path."""
    from helpers.data_parallel import speed
    monkeypatch.setattr(speed, "gpu_count", lambda: 2)
    monkeypatch.setattr(speed, "four_steps_gpu", lambda *a, **k: (_ for _ in ()).throw(AssertionError("GPU path")))
    res = D.time_four_steps(batch=16, repeats=1, cpu=True)
    assert res["path"].startswith("plain tensor ops") and set(res["one_worker_seconds"]) == {"forward", "backward"}


def test_time_four_steps_starts_both_backwards_from_no_gradients(monkeypatch):
    """Fifth read of 02: the one-thread backward added into the gradients the four steps had just set."""
    from helpers.data_parallel import speed
    made, seen = [], []
    monkeypatch.setattr(speed, "DigitsCNN", lambda: made.append(DigitsCNN()) or made[-1])
    real = speed.timed

    def timed(times, name, fn):
        if name == "backward":
            seen.append(all(p.grad is None for p in made[0].parameters()))
        return real(times, name, fn)

    monkeypatch.setattr(speed, "timed", timed)
    monkeypatch.setattr(I, "timed", timed)
    D.time_four_steps(batch=16, repeats=1)
    assert len(seen) == 6 and all(seen)  # 3 passes (2 warm-up), each with the four steps' and one thread's backward
