"""Notebook 01's gap between each step and the bound's step (helpers/pipeline/gaps.py): drawn from the step's own
events, sums that add up."""
from helpers import pipeline as P


def test_gap_and_bound_lines_come_from_the_steps_own_events():
    def row(m, med, rounds, f, b, msg=None):   # f, b: each stage's summed forward / backward seconds, every round
        r = {"microbatches": m, "microbatch_rows": 64 // m, "step_s": med, "step_rounds": rounds,
             "step_range": (min(rounds), max(rounds)), "speedup": 1.0 / med, "ideal_speedup": P.ideal_speedup(m),
             "compute_rounds": [[{"F": f, "B": b}] * len(rounds)] * 2}
        r["efficiency"] = r["speedup"] / r["ideal_speedup"]
        if msg is not None:
            r["message_s"] = [msg]
        return r
    naive = row(1, 1.0, [0.9, 1.0, 1.1], 0.2, 0.25, msg=0.01)
    # the bound pipelines m = 1's compute only (900 ms of its 1000 ms step), not its whole step: m = 4's bound step is
    # 0.9 / 1.6 = 0.5625 s (not 1.0 / 1.6 = 0.625 s), measured 1.0 s; pieces 2× m = 1's add 562.5 ms in the model
    text = P.gap_lines([naive, row(4, 1.0, [0.95, 1.0, 1.05], 0.4, 0.5, msg=0.005)])
    assert ("the stages computed 900.0 ms of its 1000.0 ms step (medians of their rounds); the bound pipelines that "
            "compute only; round by round the step less its compute took 0.0 to 200.0 ms, median 100.0 ms") in text
    assert "more than those" not in text   # 100 ms outside the compute holds its two 10 ms messages
    tight = dict(naive, step_s=0.905, step_rounds=[0.905] * 3)   # 5 ms outside the compute, less than the messages' 20
    neg = P.gap_lines([tight, row(4, 1.0, [0.95, 1.0, 1.05], 0.4, 0.5, msg=0.005)])   # 5 − 20 ms: no duration
    assert "the step's parts outside its compute: not estimated, counted +0.0 (m = 1's other 5.0 ms less its two " \
        "messages' 20.0 ms is -15.0, below zero: the messages cost less inside the step than alone)" in neg and "outside term is" not in neg
    assert "its two messages alone took 20.0 ms at their fastest, more than those 5.0 ms" in \
        P.gap_lines([tight, row(4, 1.0, [0.95, 1.0, 1.05], 0.4, 0.5, msg=0.005)])
    assert "stage 0: F ×2.00, B ×2.00" in text and "all four together ×2.00" in text and "gap to the latter +437.5 ms" in text
    assert "the pieces, each stage's as they took, through the bound's formula: +562.5" in text
    # estimates in ms, never percentages of the gap: a share of a gap the estimates overshoot says nothing
    assert "%" not in text and "explain" not in text and "the rest" not in text
    # the step's own parts outside its compute: m = 1's 100 ms less its two 10 ms messages, 80 ms
    assert "outside its compute, if they took m = 1's (those other ms less its two messages): +80.0" in text
    # messages at their fastest round: 2 on every step's path (+10.0 ms), all 2m = 8 in a row (+40.0 ms), named as such
    assert "+10.0 for the 2 on every step's path (one activation, one gradient; with these pieces the first activation and the first gradient, as the slower stage of each phase makes the other wait), +40.0 if all 2m = 8" in text
    assert "together +652.5 to +682.5 ms, against the gap's +437.5 ms" in text
    # messages at their fastest round, not the median: rounds 5 ms, 40 ms, 60 ms give 2 × 4 × 5 ms = 40 ms
    noisy = dict(row(4, 1.0, [0.95, 1.0, 1.05], 0.4, 0.5), message_s=[0.005, 0.04, 0.06])
    assert "+40.0 if all 2m = 8" in P.gap_lines([naive, noisy])
    # the parts vary against each other from round to round: each part's median is ×1.20, every round's sum only ×1.15;
    # the combined figure is the parts' medians summed (×1.20), never outside the four ratios it stands beside
    uneven = row(4, 1.0, [1.0, 1.0, 1.0], 0.2, 0.25)
    uneven["compute_rounds"] = [[{"F": 1.0, "B": 1.2}, {"F": 1.2, "B": 1.0}, {"F": 1.2, "B": 1.2}],
                                [{"F": 1.2, "B": 1.2}, {"F": 1.2, "B": 1.2}, {"F": 1.0, "B": 1.2}]]
    flat = dict(naive, step_s=4.5, compute_rounds=[[{"F": 1.0, "B": 1.0}] * 3] * 2, message_s=[0.05])
    uneven["step_s"] = 4.0
    text = P.gap_lines([flat, uneven])
    assert "stage 0: F ×1.20, B ×1.20; stage 1: F ×1.20, B ×1.20; all four together ×1.20" in text
    # cheaper pieces are a negative estimate, printed signed, not clipped to 0 (×0.85 of a 0.5625 s bound step: −84.4 ms)
    cheap = row(4, 0.6, [0.59, 0.6, 0.61], 0.17, 0.2125, msg=0.005)
    text = P.gap_lines([naive, cheap])
    assert "the pieces, each stage's as they took, through the bound's formula: -84.4" in text and "together +5.6 to +35.6 ms, against the gap's +37.5 ms" in text
    text = P.gap_lines([naive, row(4, 0.8, [0.79, 0.8, 0.81], 0.22, 0.275)])   # ×1.10: +56.3 ms (56.25 rounded) of a 237.5 ms gap
    assert "the pieces, each stage's as they took, through the bound's formula: +56.3" in text and "messages: not timed in this run" in text
    assert "together +136.3 ms, against the gap's +237.5 ms" in text
    # the m = 1 step's own parts outside the compute never count for the bound: 0.67 s against the bound step
    # 0.9 / 1.33 = 0.675 s is 1.01 of it by the medians, but 0.96–1.02 against this m's rounds: no clear win
    fast = row(2, 0.67, [0.66, 0.67, 0.70], 0.2, 0.25)
    text = P.beyond_bound_lines([naive, fast])
    assert "the step, 670 ms, is shorter than the bound's, 675 ms (m = 1's compute, 900.0 ms" in text
    assert "no clear win over the bound" in text
    # 1.49× over the whole m = 1 step, above the 1.33× bound, is not above it compute against compute (0.675 / 0.68)
    assert P.beyond_bound_lines([naive, row(2, 0.68, [0.68], 0.2, 0.25)]) == ""
    assert "above 1 even then" in P.beyond_bound_lines([naive, row(2, 0.6, [0.6], 0.1, 0.125)])
    assert P.beyond_bound_lines([naive, row(2, 0.9, [0.9], 0.2, 0.25)]) == ""
    rows = [naive, row(2, 0.7, [0.65, 0.7, 0.8], 0.2, 0.25), row(4, 0.68, [0.6, 0.68, 0.75], 0.2, 0.25)]
    assert "no clear best" in P.best_split_line(rows) and "m = 2's" in P.best_split_line(rows)
    assert P.best_split_line(rows[:1] + rows[2:]).startswith("best split here: m = 4")


def test_printed_sums_add_up_and_the_bound_compares_compute_with_compute():
    def row(m, step, parts, rows=2048):   # parts: [(F, B) of stage 0, (F, B) of stage 1], one round
        r = {"microbatches": m, "microbatch_rows": rows // m, "step_s": step, "step_rounds": [step],
             "step_range": (step, step), "speedup": 0.265 / step, "ideal_speedup": P.ideal_speedup(m),
             "compute_rounds": [[{"F": f, "B": b}] for f, b in parts]}
        r["efficiency"] = r["speedup"] / r["ideal_speedup"]
        return r
    # the notebook's m = 1 to 0.1 ms: 47.4 + 79.4 = 126.8 on stage 0, and each printed sum is of the printed parts
    naive = row(1, 0.265, [(0.0474, 0.0794), (0.0423, 0.0888)])
    m2 = row(2, 0.187, [(0.040, 0.075), (0.043, 0.083)])
    text = P.stage_cost_lines([naive, m2])
    assert "stage 0: F 47.4 ms + B 79.4 ms = 126.8 ms; stage 1: F 42.3 + B 88.8 = 131.1 ms" in text
    assert ("best speedup of this compute (257.9 ms at m = 1, each round's four parts summed, then the median; the parts' "
            "medians above sum to 257.9)") in text and "in GPipe's order" in text
    # the ratio of the printed sums, 131.1 / 126.8 = 1.03
    assert "stage 1 takes ×1.03 the other's time" in text
    # the table's "against it" is m = 1's compute over the step, ÷ the bound: at m = 1 the share computed (0.97),
    # and m = 2 against the bound's step 0.2579 / 1.31 = 0.197 s: 1.05, where the whole step's ratio gave 1.08
    table = P.gpipe_table([naive, m2])
    assert "(a ratio of compute times, the speedup one of whole steps)" in table   # why a speedup may pass its bound
    line1, line2 = table.splitlines()[1:3]
    assert line1.split()[-2] == "0.97" and line2.split()[-2] == "1.05"
    # the compute, each round's parts summed then the median (one round here: 126.8 + 131.1 = 257.9), in every line that names it
    assert ("against it = the bound's step (compute alone: m = 1's compute, 257.9 ms of its 265.0 ms step, ÷ bound) ÷ the "
            "measured step") in table and "compute against compute" not in table
    assert "efficiency above 1.00 at m = 2 by the medians" in table and "m = 1's median step exceeds its compute's median by 7.1 ms (a difference of medians" in table
    # a time outside the compute that is the same at every m pulls the whole-step speedup below the compute ratio
    # ((C1 + O)/(C2 + O) < C1/C2), so it cannot explain an efficiency above 1: the facts are given, not as its cause
    assert "measured beside it, not offered as its cause" in table
    assert "the speedup a ratio of whole steps, and" not in table and "do the same work at every m" not in table
    assert "the pieces took ×0.93 m = 1's compute time at m = 2" in table   # (0.040 + 0.075 + 0.043 + 0.083) / 0.2579
    naive["message_s"], naive["message_bytes"] = [0.00127, 0.0016], 4096 * 1024
    assert "m = 1's two 4096 KiB messages go one after the other, 2.5 ms at their fastest alone)" in P.gpipe_table([naive, m2])
    # messages alone longer than the step's time outside its compute (7.1 ms): said, not left as a silent contradiction
    naive["message_s"] = [0.0045]
    assert "9.0 ms at their fastest alone, more than those 7.1 ms: the step and its compute" in P.gpipe_table([naive, m2])
    assert "at m = 1 the compute's median over the step's median, each over the rounds" in table and "below 1.00 at m = 1" not in table
    assert "the stages computed 257.9 ms of its 265.0 ms step" in P.gap_lines([naive, m2])
    assert "efficiency above" not in P.gpipe_table([naive, row(2, 0.21, [(0.040, 0.075), (0.043, 0.083)])])
    # gap_lines' steps to 0.1 ms, imbalance and gap their differences (01's fresh read 10: whole ms printed a 4.8 ms
    # imbalance "+4"): 198.6 and 202.4 give +3.8
    base = row(1, 0.27, [(0.0, 0.1324), (0.0, 0.1324)])   # 264.8 ms of compute: equal stages 198.6 ms at m = 2
    base["compute_rounds"] = [[{"F": 0.0662, "B": 0.0648}], [{"F": 0.0600, "B": 0.0738}]]   # bound's step 202.4 ms
    assert round(1e3 * P.bound_step(base, 2), 1) == 202.4
    text = P.gap_lines([base, row(2, 0.2074, [(0.033, 0.033), (0.030, 0.036)])])
    assert "bound's step 198.6 ms with equal stages, 202.4 ms with these stages' costs (their imbalance: +3.8 ms)" in text
    assert "gap to the latter +5.0 ms" in text   # 207.4 − 202.4


def _gap_row(m, step, f, b, msg=None):
    """A pipeline row for gap_lines: every round the same step, both stages' pieces the same F and B."""
    r = {"microbatches": m, "microbatch_rows": 64 // m, "step_s": step, "step_rounds": [step] * 3,
         "step_range": (step, step), "compute_rounds": [[{"F": f, "B": b}] * 3] * 2}
    if msg is not None:
        r["message_s"] = [msg]
    return r


def test_gap_lines_outside_estimate_is_the_printed_figures_difference():
    # m = 1: compute parts 64.4 + 65.3 ms per stage, 259.4 ms of a 267.6 ms step, "the other 8.2 ms"; its two 1.47 ms
    # messages print as 2.9 ms; the estimate is the difference of the printed figures, 8.2 − 2.9 = +5.3
    row = _gap_row
    naive = row(1, 0.2676, 0.0644, 0.0653, msg=0.00147)
    text = P.gap_lines([naive, row(4, 0.2, 0.0644, 0.0653, msg=0.0004)])
    assert "the stages computed 259.4 ms of its 267.6 ms step" in text and "median 8.2 ms" in text
    assert "(those other ms less its two messages): +5.3" in text
    # no messages timed: the whole printed 8.2 ms
    naive.pop("message_s")
    text = P.gap_lines([naive, row(4, 0.2, 0.0644, 0.0653)])
    assert "(those other ms, messages included): +8.2" in text


def test_gap_lines_print_the_gap_less_the_estimates_and_say_where_they_overshoot():
    row = _gap_row
    # m = 1: 100 + 100 ms per stage (400 ms), step 420 ms: 20 ms outside, less two 1 ms messages: +18.0; m = 4's bound
    # step 250 ms, the pieces as at m = 1 (+0.0), messages +2.0 (the 2) to +8.0 (all 8); a +1 ms gap is overshot,
    # even by the pieces and the messages alone
    naive = row(1, 0.420, 0.1, 0.1, msg=0.001)
    text = P.gap_lines([naive, row(4, 0.251, 0.1, 0.1, msg=0.001)])
    assert "together +20.0 to +26.0 ms, against the gap's +1.0 ms; the gap less them: -25.0 to -19.0 ms" in text
    assert text.splitlines()[-1] == ("by the medians the estimates together overshoot the gap at m = 4 (by 19.0 to 25.0 ms); "
                                     "at m = 4 by more than that m's rounds' spread (0.0 ms): the outside "
                                     "term is m = 1's difference of medians, itself an estimate; what would make them overshoot is a cost in "
                                     "m = 1's step that this m's step does not pay, and no event here times one")
    # an overshoot smaller than the m's rounds' spread is a difference of medians: no cause offered (01's fresh read 9)
    wide = row(4, 0.251, 0.1, 0.1, msg=0.001)
    wide["step_range"] = (0.240, 0.290)
    text = P.gap_lines([naive, wide])
    assert text.splitlines()[-1] == ("by the medians the estimates together overshoot the gap at m = 4 (by 19.0 to 25.0 ms); "
                                     "at m = 4 by no more than that m's rounds' spread (slowest less fastest step: 50.0 ms), so "
                                     "this run shows no difference between the gap and the estimates there")
    assert "SGD update may run" not in text   # a cost every m pays cannot make an estimate taken at m = 1 overshoot
    # m = 8: bound's step 225 ms, a +5 ms gap, messages +1.0 to +8.0: overshot with the outside term (+19.0 to +26.0),
    # spanned by the pieces and the messages alone
    text = P.gap_lines([naive, row(4, 0.251, 0.1, 0.1, msg=0.001), row(8, 0.230, 0.1, 0.1, msg=0.0005)])
    assert text.splitlines()[-1] == (
        "by the medians the estimates together overshoot the gap at m = 4, 8 (by 14.0 to 25.0 ms); at m = 4, 8 by more than "
        "that m's rounds' spread (0.0, 0.0 ms): the outside term is m = 1's difference of medians, itself an estimate; what "
        "would make them overshoot is a cost in m = 1's step that this m's step does not pay, and no event here times one; at m = 8 the "
        "pieces and the "
        "messages alone span the gap: by these estimates, the step's parts outside its compute added less there "
        "than m = 1's +18.0 ms")
    # a gap beyond every estimate: short of it, never called explained
    text = P.gap_lines([naive, row(4, 0.300, 0.1, 0.1, msg=0.001)])
    assert "the gap less them: +24.0 to +30.0 ms" in text
    assert "fall short of the gap at m = 4 (by 24.0 to 30.0 ms)" in text and "explain" not in text
    # the rows' rounds are all one step (no spread): a shortfall beyond it is a cost nothing timed here accounts for
    assert "at m = 4 by more than that m's rounds' spread (0.0 ms): nothing timed here accounts for the rest" in text
    # a shortfall smaller than the m's rounds' spread is a difference of medians, not a found cost (01's fresh read 8)
    wide = row(4, 0.300, 0.1, 0.1, msg=0.001)
    wide["step_range"] = (0.280, 0.330)
    text = P.gap_lines([naive, wide])
    assert ("at m = 4 by no more than that m's rounds' spread (slowest less fastest step: 50.0 ms), so this run does not "
            "show a cost beyond the estimates there") in text and "nothing timed here" not in text
    # messages not timed: one figure; a gap within the range is said so
    naive.pop("message_s")
    text = P.gap_lines([naive, row(4, 0.270, 0.1, 0.1)])
    assert "together +20.0 ms, against the gap's +20.0 ms; the gap less them: +0.0 ms" in text
    assert text.splitlines()[-1] == "at m = 4 the gap lies within the estimates' range"
    text = P.gap_lines([naive, row(4, 0.271, 0.1, 0.1)])   # one figure: "by 1.0 ms", not "by 1.0 to 1.0 ms"
    assert text.splitlines()[-1].startswith("by the medians the estimates together fall short of the gap at m = 4 (by 1.0 ms); ")


def test_a_compute_shorter_than_its_step_never_prints_as_long():
    """01 at batch 256: four parts of 12.6 ms, rounded to whole ms, printed "52 ms of its 52 ms step" beside "against
    it" 0.97 (50.4 / 51.9); to 0.1 ms the printed compute stays below the printed step."""
    def row(m, step, f, b):
        r = {"microbatches": m, "microbatch_rows": 256 // m, "step_s": step, "step_rounds": [step],
             "step_range": (step, step), "speedup": 0.0519 / step, "ideal_speedup": P.ideal_speedup(m),
             "compute_rounds": [[{"F": f, "B": b}]] * 2}
        r["efficiency"] = r["speedup"] / r["ideal_speedup"]
        return r
    naive, m2 = row(1, 0.0519, 0.0126, 0.0126), row(2, 0.040, 0.007, 0.007)
    table = P.gpipe_table([naive, m2])
    assert table.splitlines()[1].split()[-2] == "0.97"
    assert "50.4 ms of its 51.9 ms step" in table and "the stages computed 50.4 ms of its 51.9 ms step" in P.gap_lines([naive, m2])
    assert "stage 0: F 12.6 ms + B 12.6 ms = 25.2 ms" in P.stage_cost_lines([naive, m2])


def test_the_library_table_has_a_row_per_schedule_and_m_with_its_peaks_and_differences():
    from helpers.pipeline import library_table

    rows = [{"schedule": "gpipe", "microbatches": 4, "peak_live": [4, 4], "loss_diff": 2e-7, "grad_max_abs_diff": 2e-9},
            {"schedule": "1f1b", "microbatches": 8, "peak_live": [2, 1], "loss_diff": 0.0, "grad_max_abs_diff": 1e-9}]
    lines = library_table(rows).splitlines()
    assert lines[0].split()[:2] == ["schedule", "m"] and len(lines) == 3
    assert lines[1].split() == ["gpipe", "4", "[4,", "4]", "2e-07", "2e-09"]
    assert lines[2].split() == ["1f1b", "8", "[2,", "1]", "0e+00", "1e-09"]
    assert len({len(line) for line in lines}) == 1   # aligned columns


def test_the_pieces_estimate_takes_each_stage_through_the_bound_not_one_pooled_ratio():
    """01's fresh read 18: at m = 8 the pooled ×1.00 gave +0.2 ms, while stage 1, which sets both phases' pace, took
    F ×1.02 and B ×0.97: through the bound's formula the pieces shorten the model's step instead."""
    def row(m, f, b):   # per stage: summed forward and backward seconds, the same in every round
        return {"microbatches": m, "step_s": 0.3, "step_rounds": [0.3] * 3, "step_range": (0.3, 0.3),
                "compute_rounds": [[{"F": f[s], "B": b[s]}] * 3 for s in (0, 1)]}
    base = row(1, (0.0700, 0.0705), (0.130, 0.141))
    r8 = row(8, (0.0658, 0.0719), (0.139, 0.1368))   # stage 0: F ×0.94, B ×1.07; stage 1: F ×1.02, B ×0.97
    from helpers.pipeline.bounds import _slowdown
    pooled = P.bound_step(base, 8) * (_slowdown(r8, base) - 1)
    mine = P.bound_step(r8, 8) - P.bound_step(base, 8)   # the bound's formula on m = 8's own pieces
    assert pooled > 0 > mine   # the pooled ratio adds time; stage by stage the pieces take it away
    text = P.gap_lines([base, r8])
    assert f"through the bound's formula: {round(1e3 * mine, 1):+.1f}" in text


def test_the_time_outside_the_compute_is_taken_round_by_round_not_from_medians_apart():
    """01's fresh read 20: four part medians from different rounds summed to 442.6 ms of a 499.0 ms median step ("56 ms
    outside"), while each round's step less its own compute was about 10 ms."""
    rounds = [(0.499, 0.488), (0.470, 0.460), (0.520, 0.509)]   # (step, its compute) per round
    naive = {"microbatches": 1, "step_s": 0.499, "step_rounds": [s for s, _ in rounds], "step_range": (0.47, 0.52),
             "compute_rounds": [[{"F": c / 4, "B": c / 4} for _, c in rounds]] * 2}
    r2 = dict(naive, microbatches=2, step_s=0.4, step_rounds=[0.4] * 3, step_range=(0.4, 0.4))
    text = P.gap_lines([naive, r2])
    assert "round by round the step less its compute took 10.0 to 11.0 ms, median 11.0 ms" in text
