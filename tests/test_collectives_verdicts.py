"""Notebook 08's generated verdicts on the sweep (sweep_summary), on DDP rebuilt (ddp_verdict) and on the ranks'
agreement: they say only what their numbers say (no processes started)."""
from helpers.collectives import ddp_verdict, ring_check_lines, ring_rank_lines, sweep_summary


def _sweep(small_ratio: float, large_ratio: float = 16.0) -> dict:
    sizes = [4**k * 2**10 for k in range(8)]  # 1 KiB … 16 MiB, as the notebook's sweep
    t = {s: 1e-4 for s in sizes}
    t[sizes[2]] = 1e-4 * small_ratio
    t[sizes[-3]] = 1e-3
    t[sizes[-2]] = 1e-3 * large_ratio ** 0.5
    t[sizes[-1]] = 1e-3 * large_ratio
    rows = [{"bytes": s, "library_s": t[s], "library_model_s": 1e-4 + s * 1e-9, "library_busbw_gbs": s / t[s] / 1e9}
            for s in sizes]
    return {"sizes": rows, "alpha_s": 1e-4, "beta_s_per_byte": 1e-9}


def test_a_drop_in_small_message_time_is_not_called_alpha():
    text = "\n".join(sweep_summary(_sweep(0.4)))
    assert "do not fit the α–β model" in text and "pay mostly α" not in text
    text = "\n".join(sweep_summary(_sweep(3.0)))
    assert "do not fit the α–β model" in text and "pay mostly α" not in text


def test_a_flat_small_end_and_a_steep_large_end_give_the_alpha_beta_verdict():
    text = "\n".join(sweep_summary(_sweep(1.1)))
    assert "pay mostly α" in text and "do not fit" not in text
    assert "β does not dominate" in "\n".join(sweep_summary(_sweep(1.1, large_ratio=3.0)))


def test_the_many_small_all_reduces_line_is_a_product_labelled_as_such():
    line = sweep_summary(_sweep(1.0))[-1]
    assert line.startswith("1,024 all-reduces of 1 KiB: 1,024 × 0.100 ms (one, timed) = 102 ms")   # 3 decimals: the product checks
    assert "from the fitted line" in line


def _scratch(per_parameter, bucketed, overlapped, rounds: int = 7) -> dict:
    """Step times per round, DDP's 10 ms each round; a number is every round's multiple of DDP's, a list one per round."""
    def times(x):
        return [10e-3 * v for v in (x if isinstance(x, list) else [x] * rounds)]
    r = {"ddp": times(1.0), "per_parameter": times(per_parameter), "bucketed": times(bucketed),
         "overlapped": times(overlapped)}
    r["ddp"] = r["ddp"][:len(r["overlapped"])]
    return {"rounds": r, "timed_steps": 5, "ratio": {v: min(ts) / min(r["ddp"]) for v, ts in r.items()}}


def test_the_ddp_verdict_says_a_direction_only_when_every_round_agrees_and_says_slower_when_slower():
    assert "overlapped faster than bucketed: in all 7 rounds" in ddp_verdict(_scratch(1.6, 1.30, 1.10))
    assert "overlapped slower than bucketed: in all 7 rounds" in ddp_verdict(_scratch(1.6, 1.30, 1.50))
    assert "bucketed faster than per parameter: in all 7 rounds" in ddp_verdict(_scratch(1.6, 1.30, 1.10))
    # a small difference every round agrees on is said, with its size beside it
    assert "overlapped faster than bucketed: in all 7 rounds (overlapped/bucketed per round ×0.96–×0.96, median ×0.96)" \
        in ddp_verdict(_scratch(1.6, 1.30, 1.25))


def test_a_best_round_that_differs_by_10_percent_is_not_a_verdict_when_the_rounds_disagree():
    # the stored run's case: best rounds 0.99× vs 1.10× DDP's, but the rounds do not agree on which is faster
    over = [0.99, 1.25, 1.02, 1.30, 1.05, 1.20, 1.00]
    buck = [1.10, 1.10, 1.15, 1.12, 1.18, 1.11, 1.13]
    res = _scratch([1.8] * 7, buck, over)
    assert round(res["ratio"]["overlapped"], 2) == 0.99 and round(res["ratio"]["bucketed"], 2) == 1.10
    text = ddp_verdict(res)
    assert "overlapped not distinguishable from bucketed: the rounds disagree: overlapped faster in 4 of 7" in text
    assert text.count("a direction is said only when all 7 rounds agree") == 1   # the rule, said once
    assert "faster than bucketed" not in text and "slower than bucketed" not in text
    assert "overlap did not make the step faster in a way every round agrees on" in text


def test_too_few_rounds_give_no_direction_even_when_all_agree():
    text = ddp_verdict(_scratch(1.86, 1.10, 0.99, rounds=3))
    assert "overlapped not distinguishable from bucketed: only 3 rounds, fewer than the 6" in text
    assert "bucketed not distinguishable from per parameter: only 3 rounds" in text
    assert "faster than" not in text


def test_the_ddp_verdict_says_when_neither_bucketing_nor_overlap_helped():
    assert "neither bucketing nor overlap shows a benefit" in ddp_verdict(_scratch(1.14, 1.17, 1.20))
    assert "neither" not in ddp_verdict(_scratch(1.6, 1.30, 1.35))   # bucketing helped
    assert "neither" not in ddp_verdict(_scratch(1.30, 1.35, 1.10))  # overlap helped


def test_the_sizes_above_the_fitted_bandwidth_are_named():
    sweep = _sweep(1.0)
    sweep["beta_s_per_byte"] = 1 / 16.0e9   # 1/β = 16 GB/s; 16 MiB in 16 ms gives 1.05 GB/s: below
    text = "\n".join(sweep_summary(sweep))
    assert "is above every size's bytes/time" in text and "misdescribes" not in text
    sweep["sizes"][4]["library_s"] = 1e-3       # 256 KiB in 1 ms: 0.26 GB/s; 64 KiB in 0.1 ms: 0.66 GB/s
    sweep["sizes"][-1]["library_s"] = 15e-3     # 16 MiB in 15 ms: 1.12 GB/s; 1 MiB and 4 MiB: 1.05 GB/s
    sweep["beta_s_per_byte"] = 1 / 1.1e9    # only 16 MiB reaches 1/β = 1.1 GB/s
    text = "\n".join(sweep_summary(sweep))
    assert "at 16 MiB bytes/time reaches 1.12 GB/s" in text and "misdescribes that size" in text
    sweep["beta_s_per_byte"] = 1 / 1.0e9    # now 1 MiB, 4 MiB and 16 MiB reach it
    text = "\n".join(sweep_summary(sweep))
    assert "at 1 MiB, 4 MiB, 16 MiB bytes/time reaches 1.05, 1.05, 1.12 GB/s" in text and "those sizes" in text


def test_an_overlap_that_did_not_help_gets_no_cause_nor_unmeasured_candidates():
    slower = ddp_verdict(_scratch(1.87, 1.17, 1.46))
    assert "overlap made the step slower here" in slower and "whole-step times do not say which" in slower
    assert "candidate" not in slower and "torch.cat" not in slower and "CPU cores" not in slower
    assert "overlap did not make" not in ddp_verdict(_scratch(1.6, 1.30, 1.10))
    assert "overlap made" not in ddp_verdict(_scratch(1.6, 1.30, 1.10))


def test_a_small_end_that_falls_is_not_said_to_grow_and_the_headline_ratio_comes_from_the_line():
    text = "\n".join(sweep_summary(_sweep(0.8)))
    assert "all_reduce time for 16× the bytes: ×0.8 from 1 KiB to 16 KiB" in text and "barely grows" not in text
    line = sweep_summary(_sweep(1.0))[-1]   # line: 1,024 × (0.1 ms + 1 KiB · 1 ns) against 0.1 ms + 1 MiB · 1 ns
    assert "1.1 ms from the fitted line (90× less)" in line and "than the timed 1 KiB times 1,024" in line


def test_a_fitted_alpha_above_the_fastest_time_is_said_with_the_reason_and_every_size_s_ratio_printed():
    assert not any("fitted α" in line for line in sweep_summary(_sweep(1.1)))   # α = 0.1 ms: no time below it
    sweep = _sweep(1.1)
    sweep["alpha_s"] = 2.5e-4
    for r in sweep["sizes"]:
        r["library_model_s"] = 2.5e-4 + r["bytes"] * 1e-9
    line = next(line for line in sweep_summary(sweep) if "fitted α" in line)
    assert line.startswith("the fitted α (250 µs) is above the fastest timed all_reduce (0.10 ms at 1 KiB)")
    assert "a least-squares line passes between the times, above some of them" in line
    ratios = next(line for line in sweep_summary(sweep) if line.startswith("timed all_reduce / fitted line:"))
    assert "×0.40 at 1 KiB" in ratios and "×0.94 at 16 MiB" in ratios and ratios.count(" at ") == 8


def test_each_size_s_timed_over_line_ratio_is_printed_once_above_or_below():
    sweep = _sweep(1.1)
    sweep["sizes"][3]["library_s"] = 1.4 * sweep["sizes"][3]["library_model_s"]   # 64 KiB above its line
    text = "\n".join(sweep_summary(sweep))
    assert "×1.40 at 64 KiB" in text and text.count("64 KiB") == 1
    assert "fitted α" not in text   # no time below α = 0.1 ms


def test_the_rank_agreement_lines_follow_the_numbers():
    d = {"world_size": 3, "naive_between_ranks": 4.8e-7, "ring_between_ranks": 0.0}
    text = "\n".join(ring_rank_lines(d))
    assert "naive ring 4.8e-07, ring 0.0e+00" in text and "the 3 ranks end with different last bits" in text
    assert "every rank holds the same bits" in text
    d["naive_between_ranks"] = 0.0
    text = "\n".join(ring_rank_lines(d))
    assert "the 3 ranks hold the same bits here" in text and "different last bits" not in text and "drift" not in text
    d["ring_between_ranks"] = 1e-7
    assert "the ranks differ by up to 1.0e-07" in "\n".join(ring_rank_lines(d))


def test_the_ring_check_rows_say_each_comparison_named_and_only_those():
    d = {"scale": 12.5, "naive_vs_all_reduce": 4.8e-7, "ring_vs_all_reduce": 0.0, "reduce_scatter_vs_dist": 1e-6}
    lines = ring_check_lines(d, ("ring_vs_all_reduce", "naive_vs_all_reduce"))
    assert lines == ["    ring_vs_all_reduce: largest |difference| 0.0e+00 (bitwise equal), values up to 12.5",
                     "   naive_vs_all_reduce: largest |difference| 4.8e-07 (not bitwise equal), values up to 12.5"]


def test_a_small_size_verdict_drawn_from_a_falling_time_says_so():
    # 16 KiB faster than 1 KiB: the verdict rests on that odd time unless every size to 256 KiB stays within ×2 (08's reads)
    text = "\n".join(sweep_summary(_sweep(0.8)))
    assert "pay mostly α" in text and ("from 1 KiB to 256 KiB (256× the bytes) every time lies within 0.08–0.10 ms "
                                        "(×1.25), so the verdict does not rest on that odd time") in text
    sweep = _sweep(0.8)
    sweep["sizes"][3]["library_s"] = 2.5e-4      # 64 KiB at 2.5× the 1 KiB time: the small sizes' times are not flat
    text = "\n".join(sweep_summary(sweep))
    assert "pay mostly α" in text and "so their verdict rests on that odd time" in text and "does not rest" not in text
    assert "odd time" not in "\n".join(sweep_summary(_sweep(1.1)))
