"""Notebook 02's generated sentences (helpers/data_parallel/report.py): each says what its numbers say."""
import pytest
import torch

from helpers import data_parallel as D


def test_section4_sentences_say_what_the_numbers_say():
    gil = [{"batch_per_thread": 128, "speedup": 1.2}]
    below = D.amdahl_sentence({"forward": 1.0, "backward": 1.0}, False, measured=1.06)  # bound 1.33×
    assert "1.06×, is below that bound" in below and "if the backward keeps that one-thread time" in below
    assert "the real cap is lower" not in below   # 02's fresh read 9: the threaded step's backward ran faster
    assert "starting two threads" not in below  # no untested cause is named
    # fifth read: "below" only beyond the margin, never "well below"; the bound's scope is said
    assert "below that bound" not in D.amdahl_sentence({"forward": 1.0, "backward": 1.0}, False, measured=1.31)
    assert "well below" not in below
    # 02's fresh read 6: a median below the bound with a round above it places the threads nowhere against the bound
    spread = D.amdahl_sentence({"forward": 1.0, "backward": 1.0}, False, measured=1.06, rounds=[1.46, 0.79, 1.06])
    assert "1 of the 3 rounds (1.460×) lies above that bound (1.333×)" in spread and "below that bound" not in spread
    assert "does not place the forward-only threads against it" in spread
    assert "lie above" not in D.amdahl_sentence({"forward": 1.0, "backward": 1.0}, False, measured=1.06, rounds=[1.1, 1.0])
    assert "well below" not in D.amdahl_sentence({"forward": 1.0, "backward": 1.0}, True, measured=0.9)
    s = D.probe_vs_cut_sentence(gil, [0.6, 0.7, 0.8], rows=128)
    assert "probe 1.20×" in s and "cut in two gained 0.70×" in s and "all 256 rows" in s
    assert "did not run" in D.probe_vs_cut_sentence(gil, [0.7], rows=64)
    # fifth read: the gains' ratio split into the baselines' ratio times the two-thread runs' ratio, from the
    # run's medians; no untimed extra offered as the cause
    row = {"batch_per_thread": 128, "speedup": 1.39, "one_thread": 15287.0, "two_threads": 21268.0}
    s = D.probe_vs_cut_sentence([row], [1.88, 1.67, 1.885], rows=128, single=[12947.0, 12536.0, 13950.0],
                                cut=[23616.0, 22000.0, 24000.0])
    assert "one thread 15,287 in the probe, 12,947 in section 4 (1.181×)" in s
    assert "two threads 23,616 on the cut batch, 21,268 in the probe (1.110×)" in s
    assert "1.181 × 1.110 = 1.311×" in s and "(cut batch 1.82× / probe 1.39×, not the medians" in s
    # seventh read: samples/s of different work are compared, not speeds of the same work
    assert ("section 4's one thread reached fewer samples/s than the probe's, and the cut batch's two threads reached "
            "more samples/s than the probe's. The work differs (section 4's one thread: 256 rows, an SGD step, .grad set to "
            "None every step; the probe's: 128 rows, no SGD step, .grad never zeroed") in s
    # 02's fresh read 18: the work differences are not offered as the cause; each thread computes on 128 rows in both
    assert "each thread computes on 128 rows in both: this notebook does not split what makes the difference" in s
    assert s.count("section 4") == 3  # the clauses paired: section 4's one thread, then the probe's
    assert "ran faster" not in s and "ran slower" not in s and ".grad never zeroed" in s and "an SGD step" in s
    flipped = D.probe_vs_cut_sentence([row], [1.4], rows=128, single=[17000.0], cut=[19000.0])
    assert "section 4's one thread reached more samples/s" in flipped and "two threads reached fewer samples/s" in flipped
    assert "SGD" in s and "sums the gradients" not in s and "Samples/s" not in D.probe_vs_cut_sentence([row], [1.8], rows=128)
    same = D.probe_vs_cut_sentence([row], [1.4], rows=128, single=[15000.0], cut=[21000.0])
    assert "Both ratios are within 3% of 1×" in same and "ran slower" not in same and "ran faster" not in same


def test_generated_sentences_say_what_the_numbers_say():
    s = D.amdahl_sentence({"forward": 1.0, "backward": 1.0}, slower=False)
    assert f"{1 / (0.5 + 0.25):.2f}×" in s and "shortfall" not in s
    assert "shortfall below 1×" in D.amdahl_sentence({"forward": 1.0, "backward": 1.0}, slower=True)
    # a measured gain above the bound is said, not left beside the bound as if they agreed
    assert "1.40×, is above that bound" in D.amdahl_sentence({"forward": 1.0, "backward": 1.0}, False, measured=1.4)
    assert "above that bound" not in D.amdahl_sentence({"forward": 1.0, "backward": 1.0}, False, measured=1.3)
    s = D.processes_sentence({1: [10.0, 10.0, 10.0], 2: [7.3, 9.0, 9.5]})
    assert "0.730×, 0.900×, 0.950×: slower than one DDP process in every round" in s
    # one round on the other side, or within the margin: no verdict
    assert "no clear difference" in D.processes_sentence({1: [10.0, 10.0, 10.0], 2: [12.0, 12.0, 9.0]})
    assert "no clear difference" in D.processes_sentence({1: [10.0, 10.0, 10.0], 2: [10.2, 12.0, 12.0]})
    assert "faster than one DDP process in every round" in D.processes_sentence({1: [10.0, 9.0, 11.0], 2: [18.0, 9.5, 12.0]})
    # sixth read: the one-DDP-process baseline is a one-rank DDP group; both medians are also set against the plain thread
    s = D.processes_sentence({1: [14968.0, 14429.0, 15042.0], 2: [20756.0, 20000.0, 21000.0]}, single=[18344.0, 16600.0, 18482.0])
    assert "a one-rank group with the same hooks and buckets" in s
    assert "one DDP process 14,968 samples/s = 0.82× its 18,344, two DDP processes 20,756 = 1.13×" in s
    assert "plain 1 thread" not in D.processes_sentence({1: [10.0], 2: [12.0]})
    # sixth read: the share is printed precisely enough that the bound follows from it (49.4% → 1.34×, not "50%")
    a = D.amdahl_sentence({"forward": 0.506, "backward": 0.494}, slower=True)
    assert "49.4% of" in a and f"{1 / (0.494 + 0.506 / 2):.2f}×" in a
    # sixth read: the table says which ratio is the ratio of medians and which the median of per-round ratios
    line = D.throughput_lines({"single": [10.0, 20.0, 30.0], "threads_forward_backward": [10.0, 8.0, 30.0]},
                              {"threads_forward_backward": [1.0, 0.4, 1.0]}, {"threads_forward_backward": "single"})[1]
    assert "ratio of medians 0.50×" in line and "median of per-round ratios 1.00×" in line


@pytest.mark.skipif(torch.cuda.device_count() >= 2, reason="the CPU formula")
def test_memory_sentences_count_both_designs_moments_and_follow_the_classes():
    acc = D.run_four_steps(batch=64)["accounting"]
    p = acc["param_bytes"]
    lim = D.largest_batches(2_000_000, acc)
    assert lim["fixed"]["ddp"]["loss"] - lim["fixed"]["data_parallel"]["loss"] == p  # DDP's buckets, kept
    lines = D.memory_sentences(2_000_000, acc)
    ratio = lim["ddp"] / lim["data_parallel"]
    assert f"({ratio:.2f}×)" in lines[0] and ("DDP fits fewer" in lines[0]) == (ratio < 0.97)
    assert "DataParallel while the loss is computed" in lines[0]
    # fifth read: a budget verdict that the per-sample bytes do not carry gives its reason in the same sentence
    per0 = lim["per_sample"]["data_parallel"] / lim["per_sample"]["ddp"]
    assert ("the fixed bytes decide" in lines[0].split(". The fullest")[0]) == (abs(per0 - 1) <= 0.03 and abs(ratio - 1) > 0.03)
    if "the fixed bytes decide" in lines[0]:  # sixth read: the reason before the verdict
        assert lines[0].index("the fixed bytes decide") < lines[0].index("DDP fits")
    assert f"the difference, {p:,} B: DDP's all-reduce buckets" in lines[1]
    same = {**acc, "param_bytes": 0, "coalesced_buffer_bytes": 0}  # no gradient bytes: only the per-sample terms, close at 10 classes
    assert "about the same" in D.memory_sentences(2_000_000, same)[0]
    big = D.largest_batches(2_000_000, acc, out_row_bytes=4 * 50_000)["per_sample"]
    assert big["data_parallel"] > 1.9 * big["ddp"]  # the gathered outputs decide with a vocabulary's classes
    # per sample: the output device's chunk share, every gathered row and log_softmax's row for the whole batch (its
    # replica's own output row is freed before the loss); a DDP device its chunk's activations, rows, log_softmax rows
    a = acc["activation_bytes_per_sample"]
    assert big["data_parallel"] == pytest.approx(a / 2 + 2 * 200_000 + 8 + acc["input_bytes_per_sample"] / 2)
    assert big["ddp"] == pytest.approx((a + 2 * 200_000 + 8) / 2)
    text = "\n".join(lines)
    assert "exercise 2" not in text and "toy budget" in lines[0] and "end of backward" in lines[2]
    per = lim["per_sample"]["data_parallel"] / lim["per_sample"]["ddp"]
    assert ("about the same per sample" in lines[3]) == (abs(per - 1) <= 0.03)
    far = D.largest_batches(16 * 2**30, acc)
    assert f"({far['ddp'] / far['data_parallel']:.2f}×)" in lines[4]
    assert f"{2 * 200_000 / big['data_parallel']:.0%} of DataParallel's" in lines[5]
    with_grad = (big["data_parallel"] + 200_000) / (big["ddp"] + 100_000)  # log_softmax's backward: one more row
    assert f"the ratio would be {with_grad:.1f}×" in lines[5]
    assert "gradient_as_bucket_view=True" in lines[1] and "not this extra" in lines[1]
    # the lecture's claim judged from the per-sample bytes: not supported at 10 classes, supported at 50,000
    claim = "supported" if per > 1.03 else "not supported" if per >= 0.97 else "contradicted"
    assert lines[6].startswith(f"the lecture's claim, that the output device forces a smaller batch than DDP: {claim} here")
    assert "Supported in the 50,000-class what-if" in lines[6]
    heavy = {**acc, "output_row_bytes": 4 * 50_000}  # a model whose own rows are large: the claim holds for it
    assert ": supported here" in D.memory_sentences(2_000_000, heavy)[6]


def test_probe_sentences_follow_the_rule_and_the_peak():
    rows = [{"batch_per_thread": b, "speedup": s, "speedup_min": lo, "speedup_max": hi, "side": side}
            for b, s, lo, hi, side in ((1, 0.80, 0.69, 1.03, "no clear difference"), (64, 1.44, 1.31, 1.64, "faster"),
                                       (128, 1.50, 1.40, 1.66, "faster"), (256, 1.24, 1.21, 1.28, "faster"))]
    assert D.probe_verdict(rows[1]) == "faster in every round"
    v = D.probe_verdict(rows[0])
    assert v.startswith("no clear difference") and "0.690–1.030×" in v and "the median alone decides nothing" in v
    v = D.probe_verdict({**rows[0], "ratios": [0.75, 0.99, 0.79], "speedup_min": 0.75, "speedup_max": 0.99})
    assert "1 of the 3 rounds within 3% of 1×" in v  # why a median of 0.79× gives no verdict
    # every round printed with 3 decimals, so a reader can check which lie within 3% (1.027 does, 1.031 not)
    v = D.probe_verdict({**rows[0], "ratios": [1.0274, 1.0312, 1.171], "speedup_min": 1.0274, "speedup_max": 1.171})
    assert "the rounds ran 1.027×, 1.031×, 1.171×; 1 of the 3 rounds within 3% of 1×" in v
    v = D.probe_verdict({**rows[0], "ratios": [0.8, 1.2, 0.9], "speedup_min": 0.8, "speedup_max": 1.2})
    assert "rounds on both sides of 1×" in v
    s = D.probe_peak_sentence(rows)
    assert "largest at 128 rows per thread (1.50×; rounds 1.40–1.66×)" in s and "256 (1.24×;" in s
    assert "did not keep growing" in s  # 256's rounds (1.21–1.28×) all below 128's (1.40–1.66×)
    assert "the largest batch probed" in D.probe_peak_sentence(rows[:3])
    assert D.amdahl_sentence({"forward": 1.0, "backward": 1.0}, slower=True).endswith(".")


def test_section4_sentences_say_the_rule_once_and_name_their_source():
    row = {"batch_per_thread": 4, "speedup": 1.0, "speedup_min": 0.9, "speedup_max": 1.1, "side": "no clear difference",
           "ratios": [0.9, 1.1, 1.0]}
    short = D.probe_verdict(row, explain=False)
    assert short.startswith("no clear difference") and D.probe_rule() not in short and D.probe_rule() in D.probe_verdict(row)
    cpu = "the CPU simulation of section 3"
    assert f"of {cpu}'s one-thread forward+backward pass, not of the two-thread step" in D.amdahl_sentence({"forward": 1.0, "backward": 1.0}, False, where=f"{cpu}'s")


def test_probe_peak_says_no_gain_when_every_median_is_below_one():
    rows = [{"batch_per_thread": b, "speedup": s, "speedup_min": s - 0.02, "speedup_max": s + 0.02}
            for b, s in ((16, 0.72), (128, 0.85), (256, 0.75))]
    s = D.probe_peak_sentence(rows)
    assert s.startswith("by the median, two threads gained at no batch probed") and "gain" not in s.split("; ", 1)[1]
    assert "median ratio was largest at 128 rows per thread (0.85×;" in s and "the ratio did not keep growing" in s
    assert "median gain was largest at 64" in D.probe_peak_sentence([{"batch_per_thread": 64, "speedup": 1.2}])


def test_probe_peak_applies_the_rounds_rule_to_a_lower_median():
    """Review of 02 (fresh read 2): a lower median at a larger batch was called 'did not keep growing'
    right after 'the median alone decides nothing'; overlapping rounds now give no clear difference."""
    peak = {"batch_per_thread": 128, "speedup": 1.25, "speedup_min": 1.20, "speedup_max": 1.31}
    overlap = {"batch_per_thread": 256, "speedup": 1.20, "speedup_min": 1.12, "speedup_max": 1.22}
    s = D.probe_peak_sentence([peak, overlap])
    assert "did not keep growing" not in s and "no clear difference" in s and "rounds 1.12–1.22×" in s
    assert "rounds 1.20–1.31×" in s
    below = {**overlap, "speedup_max": 1.19}
    s = D.probe_peak_sentence([peak, below])
    assert "every round was below every round at 128" in s and "did not keep growing" in s
    s = D.probe_peak_sentence([peak, below, {**overlap, "batch_per_thread": 512}])
    assert "did not keep growing" in s and "at 512" in s and "no clear difference" in s
    assert "not given" in D.probe_peak_sentence([{"batch_per_thread": 64, "speedup": 1.2},
                                                 {"batch_per_thread": 128, "speedup": 1.1}])


def test_amdahl_names_no_cause_for_a_shortfall():
    """Review of 02 (fresh read 2): the Amdahl line must not blame costs that section 3's own timing contains."""
    a = D.amdahl_sentence({"forward": 1.0, "backward": 1.0}, slower=True, measured=0.86)
    assert "not explained" in a and "functional_call" not in a and "GIL" not in a and "starting" not in a
    # seventh read: a median below 1× without an every-round verdict gets the same clause, not "below that bound"
    b = D.amdahl_sentence({"forward": 1.0, "backward": 1.0}, slower=False, measured=0.86)
    assert "0.86×, is below 1× (the rounds give no verdict" in b and "not explained" in b and "below that bound" not in b
    assert "not explained" not in D.amdahl_sentence({"forward": 1.0, "backward": 1.0}, slower=False, measured=1.06)


def test_the_amdahl_sentence_checks_its_premise_in_the_threaded_step():
    """02's fresh read 14: section 3's threaded step ran the backward in 8.0 ms, not the one-thread 10.4 ms, so
    the bound's premise failed there; the sentence says so, and does not set the median below a bound that fails."""
    one = {"forward": 7.4e-3, "backward": 10.4e-3}
    failed = D.amdahl_sentence(one, False, measured=1.14, step_seconds={"apply": 6.56e-3, "backward": 8.01e-3})
    assert "backward took 8.0 ms against 10.4 ms on one thread" in failed and "premise failed" in failed
    assert "below that bound" not in failed and "1.13×, what the threads gained on the forward itself" in failed
    held = D.amdahl_sentence(one, False, measured=1.14, step_seconds={"apply": 3.8e-3, "backward": 10.6e-3})
    assert "kept its one-thread time (within 3%)" in held and "below that bound" in held and "1.95×" in held


def test_a_median_above_the_bound_with_a_round_below_it_places_the_threads_nowhere():
    """02's fresh read 19: median 1.26× against a 1.252× bound, rounds 1.280, 1.260, 1.204×: not 'above that bound'."""
    one = {"forward": 0.403, "backward": 0.597}
    s = D.amdahl_sentence(one, False, measured=1.26, rounds=[1.280, 1.260, 1.204])
    assert "is above that bound: the bound takes" not in s
    assert "1.26×, is above that bound (1.252×), but 1 of the 3 rounds (1.204×) lies at or below it" in s
    every = D.amdahl_sentence(one, False, measured=1.30, rounds=[1.28, 1.30, 1.33])
    assert "is above that bound: the bound takes" in every and "at or below it" not in every
