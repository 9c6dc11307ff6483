"""Notebook 00's readings (helpers/setup/readings.py and the lesson's verdicts): CPU pressure and steal time, the
OpenMP runtime and its wait policy, the thread verdict, a rise in validation loss against its noise, per-sample
losses."""
from __future__ import annotations

import pytest
import torch

from helpers import evaluate
from helpers.setup import lesson, readings


def test_cpu_pressure_is_read_from_the_psi_some_total(tmp_path):
    f = tmp_path / "cpu"
    f.write_text("some avg10=1.00 avg60=2.00 avg300=3.00 total=123456\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=7\n")
    assert lesson.cpu_pressure_total(str(f)) == 123456          # the "some" line, not "full"
    assert lesson.cpu_pressure_total(str(tmp_path / "missing")) is None
    f.write_text("garbage\n")
    assert lesson.cpu_pressure_total(str(f)) is None


def test_cpu_pressure_during_the_runs_is_said_from_the_stall_share():
    waited = lesson.pressure_meaning(300_000, 1.5, steal_ticks=0, cpus=2)       # 0.3 s of 1.5 s: 20 %
    assert "300.0 ms" in waited and "20.00%" in waited and "may have gone to waiting" in waited, waited
    assert "no upper bound" in waited, waited   # the average's caveat in every branch, not only the calm ones
    assert "whose" in waited and "whole system" in waited, waited   # PSI does not attribute the wait
    calm = lesson.pressure_meaning(3_450, 1.15, steal_ticks=0, cpus=2)          # 0.3 %: printed in ms, not "0.00 s"
    assert "3.5 ms" in calm and "0.30%" in calm, calm
    assert "may have gone to waiting" not in calm and "under 1%" in calm, calm
    assert "at most" not in calm, calm   # psi.c: a non-idle-time-weighted average over CPUs, no bound on the waiting
    assert "per-CPU average" in calm and "no upper bound" in calm and "1/2" in calm, calm
    # psi.c weights each CPU by its non-idle time: 1/n only when the others are busy throughout, all when idle
    assert "all of it if the other CPU was idle, 1/2 if all were equally busy, less if the other CPU was busier" in calm, calm
    four = lesson.pressure_meaning(3_450, 1.15, steal_ticks=0, cpus=4)
    assert "all of it if the others were idle, 1/4 if all were equally busy, less if the others were busier" in four, four
    one = lesson.pressure_meaning(3_450, 1.15, steal_ticks=0, cpus=1)   # one CPU: the average is that CPU's own time
    assert "no upper bound" not in one and "that CPU's own" in one, one
    small_steal = lesson.pressure_meaning(15_000, 1.0, steal_ticks=0, cpus=2)   # 1.5 %: not small, and named
    assert "may have gone to waiting" in small_steal, small_steal
    assert "PSI's share (1.50%) is not small (1% or more); steal's is 0.00%" in small_steal, small_steal
    near = lesson.pressure_meaning(10_040, 1.0, steal_ticks=0, cpus=2)   # 1.004 %: printed so it reads as over 1%
    assert "(1.00%) is not small" in near, near
    assert "(1.00%) is not small" in lesson.pressure_meaning(9_960, 1.0, steal_ticks=0, cpus=2)   # judged as printed
    assert "0.99%" in lesson.pressure_meaning(9_940, 1.0, steal_ticks=0, cpus=2) and "under 1%" in \
        lesson.pressure_meaning(9_940, 1.0, steal_ticks=0, cpus=2)


def test_steal_time_is_read_from_proc_stat_and_said_beside_psi(tmp_path):
    f = tmp_path / "stat"
    f.write_text("cpu  5769807 508589 524513 1993805 14860 0 11884 29649 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n")
    assert readings.cpu_steal_total(str(f)) == 29649              # the all-CPU line's 8th value, not cpu0's
    assert readings.cpu_steal_total(str(tmp_path / "missing")) is None
    f.write_text("cpu  1 2 3 4 5 6 7\n")                         # a kernel without the steal column
    assert readings.cpu_steal_total(str(f)) is None
    stolen = lesson.pressure_meaning(3_000, 1.0, steal_ticks=10, hz=100, cpus=2)   # 0.1 s of 2 CPU-s: 5 %
    assert "10 tick(s) of 10 ms (between 90 and 110 ms)" in stolen and "5.00%" in stolen, stolen   # ±1 tick
    assert "PSI does not count" in stolen, stolen
    none = lesson.pressure_meaning(3_000, 1.0, steal_ticks=0, hz=100, cpus=2)   # zero ticks: under one tick, not "0 ms"
    assert "0 tick(s) of 10 ms (under 10 ms)" in none and "0 ms in" not in none, none
    assert "(between 0 and 20 ms)" in lesson.pressure_meaning(3_000, 1.0, steal_ticks=1, hz=100, cpus=2)
    assert "under 1%" not in stolen and "may have gone to waiting" in stolen, stolen   # PSI small, steal not
    assert "steal's share (5.00%) is not small (1% or more); PSI's is 0.30%" in stolen, stolen
    unknown = lesson.pressure_meaning(3_000, 1.0, steal_ticks=None)
    assert "not read here" in unknown and "not known" in unknown, unknown
    assert "both shares" not in unknown and "at most" not in unknown, unknown   # the small share is only this kernel's


def test_a_rise_in_validation_loss_is_called_overfitting_only_above_its_noise():
    import random
    rng = random.Random(0)
    at_lowest = [rng.expovariate(10) for _ in range(270)]
    train_loss = [2.0, 1.0, 0.5, 0.3, 0.2]
    # this run's case: a rise well inside the noise of 270 samples, the training loss still falling
    noisy = [v + rng.gauss(0.01, 0.3) for v in at_lowest]
    val = [1.0, 0.5, 0.1, 0.12, 0.1 + sum(noisy) / 270 - sum(at_lowest) / 270]
    text = readings.overfitting_verdict(train_loss, val, at_lowest, noisy)
    assert "within 2 standard errors" in text and "no rise in validation loss after epoch 3" in text, text
    assert "consistent with" not in text and "separate matter" not in text, text   # §5.2's overfitting is the gap
    assert "lowest of 5 on these same samples" in text, text   # the pick's bias, said in both branches
    # with the gap given: §5.2 defines overfitting by it, said from the numbers next to the noise test
    text = readings.overfitting_verdict(train_loss, val, at_lowest, noisy, fit=(val[-1] / 17, 1.0), val_acc=0.97)
    assert "no rise in validation loss after epoch 3" in text and "§5.2" in text, text
    assert "0.030 in accuracy (1.000 on the training set, 0.970 on validation)" in text, text
    assert f"({val[-1] / 17:.3g} on the training set, {val[-1]:.3g} on validation)" in text, text
    # §5.2 gives no threshold: no ratio and no label, however far apart the losses are
    for ratio in (1.5, 17, 1000):
        shown = readings.overfitting_verdict(train_loss, val, at_lowest, noisy, fit=(val[-1] / ratio, 1.0),
                                             val_acc=0.97)
        assert "×" not in shown and "loss terms" not in shown and "without saying how large" in shown, shown
    # the same mean rise with every sample worse by about as much: far above its standard error
    steady = [v + 0.01 + rng.gauss(0, 0.001) for v in at_lowest]
    text = readings.overfitting_verdict(train_loss, val, at_lowest, steady)
    assert "consistent with the start of overfitting" in text and "within" not in text, text
    assert "from epoch 3 to 5" in text and "lowest of 5 on these same samples" in text, text
    # above the noise but the training loss did not fall: not the overfitting pattern
    text = readings.overfitting_verdict([2.0, 1.0, 0.2, 0.3, 0.25], val, at_lowest, steady)
    assert "not the pattern of overfitting" in text and "consistent with" not in text, text
    # lowest at the last epoch: nothing to judge
    assert "no rise" in readings.overfitting_verdict(train_loss, [1.0, 0.5, 0.2, 0.15, 0.1], at_lowest, steady)
    with pytest.raises(ValueError):
        readings.overfitting_verdict(train_loss, val, at_lowest, steady[:-1])


def test_sample_losses_average_to_evaluate_and_hand_the_model_back_in_its_mode():
    from torch.utils.data import DataLoader

    from helpers import DigitsCNN, load_datasets
    torch.manual_seed(0)
    model, loader = DigitsCNN().train(), DataLoader(load_datasets("digits")["val"], batch_size=64)
    got = readings.sample_losses(model, loader)
    assert len(got) == 270 and model.training
    assert abs(sum(got) / len(got) - evaluate(model, loader)["loss"]) < 1e-5


@pytest.mark.skipif(not (lesson.openmp_runtime() or "").count("libgomp"), reason="needs Linux with libgomp loaded")
def test_libgomp_reads_the_wait_policy_only_when_it_is_loaded():
    lib = lesson.openmp_runtime()
    assert lesson.libgomp_spin_count(lib, set_before_load=True) == 0
    assert lesson.libgomp_spin_count(lib, set_before_load=False) > 0


def test_the_thread_verdict_names_a_winner_only_when_the_runs_do_not_overlap():
    overlap = [(1, .21), (2, .23), (1, .22), (2, .25), (1, .30), (2, .24)]
    threads, text = lesson.threads_verdict(overlap, default=2)
    assert threads == 2 and "no clear difference" in text and "0.300" in text     # every run printed
    apart = [(1, .21), (2, .23), (1, .22), (2, .25), (1, .20), (2, .24)]
    threads, text = lesson.threads_verdict(apart, default=2)
    assert threads == 1 and "faster in every run" in text and "2 times in 20 " in text   # 3 against 3: C(6, 3)
    five = [(n, .20 + .01 * i + (.1 if n == 2 else 0)) for i in range(5) for n in (1, 2)]
    threads, text = lesson.threads_verdict(five, default=2)
    assert threads == 1 and "2 times in 252 (0.8 %)" in text, text
    assert lesson.threads_verdict([(1, .2), (1, .3)], default=1)[0] == 1
    slow_first = [(1, .155), (2, .409), (1, .157), (2, .137), (1, .138), (2, .182), (1, .155), (2, .141)]
    threads, text = lesson.threads_verdict(slow_first, default=2)   # one slow run alone makes the counts overlap
    assert threads == 2 and "(median 0.161)" in text and "(median 0.155)" in text, text
    assert "run 1 of 2 thread(s) (0.409 s, 2.5× that count's median)" in text and "run 2 of" not in text, text
    assert "over 1.5×" not in lesson.threads_verdict(overlap, default=2)[1]   # 0.30 is 1.4× its median 0.22


def test_the_thread_verdict_says_the_wait_policy_it_holds_for():
    overlap = [(1, .21), (2, .23), (1, .22), (2, .25), (1, .30), (2, .24)]
    apart = [(1, .21), (2, .23), (1, .22), (2, .25), (1, .20), (2, .24)]
    for runs, ends in ((overlap, "keeps the default"), (apart, "used for the training run below")):
        text = lesson.threads_verdict(runs, default=2, wait_policy="PASSIVE")[1]
        assert "this holds for OMP_WAIT_POLICY=PASSIVE" in text and ends in text, text
        assert "other policies are not measured here" in text, text   # the default policy is not timed
        assert "with more than one thread, a sleeping OpenMP thread must be woken" in text, text   # the waking cost
        assert "waits for its slowest thread" in text and "neither cost is measured here" in text, text   # both named
        active = lesson.threads_verdict(runs, default=2, wait_policy="ACTIVE")[1]
        assert "OMP_WAIT_POLICY=ACTIVE" in active and "woken" not in active, active
        assert "waits for its slowest thread" in active and "this cost is not measured here" in active, active
    assert "OMP_WAIT_POLICY" not in lesson.threads_verdict(apart, default=2)[1]


def test_the_thread_verdict_names_a_trend_in_time_and_the_exchangeability_it_assumes():
    drift = [(1, .118), (2, .145), (2, .144), (1, .116), (1, .115), (2, .103),
             (2, .103), (1, .115), (1, .120), (2, .102)]   # the first two 2-thread runs slower than all later ones
    threads, text = lesson.threads_verdict(drift, default=2)
    assert "2 thread(s), s per epoch in time order: 0.145, 0.144, 0.103, 0.103, 0.102" in text, text
    assert "the first 2 run(s) of 2 thread(s) were each slower than all 3 later ones" in text, text
    assert "so would chance, 1 time in 10 for the first 2 of 5 if the runs are exchangeable" in text, text   # C(5, 2)
    assert "of 1 thread(s) were" not in text, text   # 0.118 is not slower than the later 0.120: no trend
    assert "exchangeable" in text, text
    steady = [(1, .21), (2, .23), (1, .22), (2, .22), (1, .20), (2, .24)]
    assert "were each slower" not in lesson.threads_verdict(steady, default=2)[1]
    first_slowest = [(1, .30), (2, .31), (1, .21), (2, .22), (1, .20), (2, .23), (1, .22), (2, .21), (1, .21), (2, .22)]
    assert "were each slower" not in lesson.threads_verdict(first_slowest, default=2)[1]   # k = 1: 1 in 5 by chance
    three = [(1, .30), (1, .29), (1, .28), (1, .20), (1, .21)]   # the first 3 of 5: 1 in C(5, 3) = 10
    assert "the first 3 run(s) of 1 thread(s)" in lesson.threads_verdict(three, default=1)[1]
    assert "1 time in 10 for the first 3 of 5" in lesson.threads_verdict(three, default=1)[1]
