"""Notebook 08's verdicts on the hand-written ring (ring_prediction_lines): the prediction and each step's time at
every size, excesses over the fastest call and over the measured parts, said only as far as the numbers go (no
processes started)."""
from helpers.collectives import ring_prediction_lines


def _ring_sweep(measured_over_predicted: list[float], extra_ms: list[float] | None = None) -> dict:
    """A sweep whose ring takes the given multiples of its prediction (or the prediction plus extra_ms)."""
    sizes = [4**k * 2**10 for k in range(len(measured_over_predicted))]
    rows = []
    for i, (s, m) in enumerate(zip(sizes, measured_over_predicted)):
        predicted = 2e-4 + s * 1e-9
        ring = predicted + extra_ms[i] * 1e-3 if extra_ms else predicted * m
        rows.append({"bytes": s, "ring_s": ring, "ring_model_s": predicted})
    return {"sizes": rows, "world_size": 2, "step_alpha_s": 1e-4}


def test_the_ring_prediction_is_printed_at_every_size_not_only_where_it_fits():
    lines = ring_prediction_lines(_ring_sweep([3.0, 2.5, 1.05, 0.97]))
    assert lines[:3] == ["in short:", "  The ring is within 15% of its prediction at 16 KiB, 64 KiB.",
                         "  It is slower at 1 KiB, 4 KiB (×2.50–×3.00)."]
    assert lines[3].split()[:5] == ["size", "all_reduce", "ring", "one", "step"]
    assert sum("ms" in line and "×" in line for line in lines[4:8]) == 4
    assert sum("slower at 1 KiB, 4 KiB" in line for line in lines) == 1   # said once, in the takeaway
    assert "  per whole all-reduce: all_reduce, ring, predicted; per ring step: one step" in lines


def test_each_size_s_step_time_is_printed():
    sweep = _ring_sweep([1.0, 1.0])
    sweep["sizes"][0]["step_s"], sweep["sizes"][1]["step_s"] = 1.234e-3, 2.346e-3
    text = "\n".join(ring_prediction_lines(sweep))
    assert "1.23 ms" in text and "2.35 ms" in text


def test_an_excess_above_the_ring_s_fastest_call_is_not_called_a_cost_per_call():
    # the ring's fastest call (1 KiB, excess 0) bounds any cost every call pays: 0.2 ms + 1 KiB · 1 ns
    big = "\n".join(ring_prediction_lines(_ring_sweep([0] * 4, extra_ms=[0.0, 0.9, 0.0, 0.0])))
    assert "the larger excess at 4 KiB is at least partly a cost at that size" in big
    small = "\n".join(ring_prediction_lines(_ring_sweep([0] * 4, extra_ms=[0.0, 0.15, 0.1, 0.0])))
    assert "a fixed cost that every ring call adds is at most" in small and "larger excess" not in small


def _falling_ring(spread: float | None) -> dict:
    sweep = _ring_sweep([5.0, 1.0, 1.0, 1.0])  # the ring's 1 KiB time 5× its prediction: above its 4 KiB time
    for i, r in enumerate(sweep["sizes"]):
        r["library_s"], r["step_s"] = 1e-4 * (i + 1), 1e-4 * (i + 1)
        if spread is not None:
            r.update(library_worst=r["library_s"], step_worst=r["step_s"], ring_worst=r["ring_s"] * spread)
    return sweep


def test_a_time_that_falls_as_the_bytes_grow_is_said_and_judged_by_its_repeats():
    text = "\n".join(ring_prediction_lines(_falling_ring(None)))
    assert "a time falls by more than 15% from one size to the next (ring from " in text and "ms at 1 KiB to " in text
    assert "smaller falls, in the table above, are not listed" in text and "cannot give;" in text
    assert "all_reduce" not in text.split("a time falls")[1].split(":")[0]   # only the series that fell is named
    for spread in (3.0, 1.2):   # the best of interleaved repeats raised: no burst explains it, however wide the spread
        text = "\n".join(ring_prediction_lines(_falling_ring(spread)))
        assert f"its slowest repeat ×{spread:.1f} the best" in text and "every repeat of the ring at 1 KiB was slow" in text
        assert "not one passing burst of load" in text and "(the cause is not identified here)" in text
        assert "noise" not in text and "sign of load" not in text and "load from outside" not in text
    assert "tested only where" not in text   # both lines are fitted over every size: nothing is left out
    steady = _ring_sweep([1.0, 1.0, 1.0, 1.0])
    for i, r in enumerate(steady["sizes"]):
        r["library_s"], r["step_s"] = 1e-4 * (i + 1), 1e-4 * (i + 1)
    assert not any("a time falls" in line for line in ring_prediction_lines(steady))


def test_excesses_above_and_below_the_fastest_call_are_each_said():
    text = "\n".join(ring_prediction_lines(_ring_sweep([0] * 4, extra_ms=[0.0, 0.9, 0.1, 0.0])))
    assert "the larger excess at 4 KiB is at least partly" in text and "larger excess at 4 KiB, 16 KiB" not in text


def test_a_ring_that_fits_everywhere_gets_no_why_and_a_faster_one_is_said_faster():
    lines = ring_prediction_lines(_ring_sweep([1.0, 1.1, 0.9]))
    assert not any(line.startswith(("slower", "faster", "  a cost")) for line in lines)
    faster = [line for line in ring_prediction_lines(_ring_sweep([1.0, 0.5])) if line.startswith("faster than predicted")]
    assert faster and faster[0].startswith("faster than predicted at 4 KiB") and "fitted to its parts" in faster[0]


def test_a_negative_fitted_alpha_is_said_not_to_describe_the_times():
    sweep = _ring_sweep([1.0, 1.0])
    assert not any("negative" in line for line in ring_prediction_lines(sweep))
    sweep["step_alpha_s"] = -5e-5
    assert any(line.startswith("one step's fitted α is negative (-50 µs)") for line in ring_prediction_lines(sweep))


def test_the_ring_s_excess_leads_with_its_ratio_and_names_no_cause():
    text = "\n".join(ring_prediction_lines(_ring_sweep([3.0, 2.5, 1.05, 0.97])))
    assert "slower at 1 KiB, 4 KiB (×2.50–×3.00)" in text
    big = "\n".join(ring_prediction_lines(_ring_sweep([0] * 4, extra_ms=[0.0, 0.9, 0.0, 0.0])))
    assert "load from outside" not in big
    # the excess is not called a cost that changes with the size (which would rule out load), nor load alone
    assert "a cost at that size, or load lasting through that size's repeats; this run does not separate them" in big
    assert "candidate" not in big
    assert "changes with the size" not in big and "this run does not identify it" not in big


def _parts_sweep(step_over_line: float, ring_over_parts: float) -> dict:
    """A ring sweep whose measured steps are step_over_line × the step line, and whose ring is ring_over_parts × its parts."""
    sweep = _ring_sweep([1.0] * 4)
    for r in sweep["sizes"]:
        r["step_model_s"] = 1e-4 + r["bytes"] / 2 * 1e-9
        r["step_s"], r["add_s"] = r["step_model_s"] * step_over_line, 0.0
        r["ring_model_s"] = 2 * r["step_model_s"]
        r["ring_parts_s"] = 2 * r["step_s"]
        r["ring_s"] = r["ring_parts_s"] * ring_over_parts
    return sweep


def test_an_excess_that_the_step_line_missing_its_own_steps_explains_is_not_called_a_ring_cost():
    lines = ring_prediction_lines(_parts_sweep(3.0, 1.0))
    text = "\n".join(lines)
    head = _short(lines).count("\n") + 1
    assert "step line" in lines[head] and "from parts" in lines[head] and "ring/parts" in lines[head]
    assert lines[0] == "in short:" and all(len(line) < 200 for line in lines[:head])
    assert "  per whole all-reduce: all_reduce, ring, predicted, from parts; per ring step: one step, step line" in lines
    # the step line is a third of the measured step: over 2 steps that gap is the whole excess, the additions none
    assert "At 1 KiB it is within 15% of its measured parts (×1.00).\n  Its measured step there is ×3.00 the step line" \
        in _short(lines)
    assert "that gap is 100% of the ring's excess over the prediction; the additions' gap to γ is 0%" in _short(lines)
    assert "not identified" not in _short(lines) and "also takes more than its own parts" not in _short(lines)
    assert "misses its own measured step" not in text   # each size's miss is said once, in the takeaway
    assert "fixed cost" not in text   # no excess over the parts to bound


def test_an_excess_above_the_measured_parts_is_said_as_such_and_the_line_s_share_printed():
    text = "\n".join(ring_prediction_lines(_parts_sweep(1.0, 3.0)))
    assert "misses its own measured step" not in text   # the line fits its steps
    assert "At each of them it also takes more than its own parts timed alone add up to (×3.00–×3.00)" \
        in _short(text.splitlines())
    assert "within 15% of its measured parts" not in text   # no share is claimed where the parts fall short
    assert text.count("more than its measured parts") == 0 and "a fixed cost that every ring call adds is at most" in text


def test_a_lone_step_slower_than_the_whole_ring_is_said_and_not_blamed_on_the_line():
    sweep = _parts_sweep(1.0, 1.0)
    row = sweep["sizes"][3]                      # 64 KiB: the lone step 11× its line, the ring ×0.47 its parts
    row["step_s"] = 11 * row["step_model_s"]
    row["ring_parts_s"] = 2 * row["step_s"]
    row["ring_s"] = 0.47 * row["ring_parts_s"]
    text = "\n".join(ring_prediction_lines(sweep))
    assert "the ring took less than its measured parts add up to at 64 KiB: ×0.47 at 64 KiB" in text
    assert "at 64 KiB one step timed alone" in text and "took longer than the whole ring" in text
    assert "which makes 2 such steps" in text
    assert "at 64 KiB the ring is within 15% of" not in text   # a ring far below its parts is not 'within' them


def test_a_fixed_cost_per_call_is_bounded_by_the_smallest_excess_over_the_measured_parts():
    # the ring is its parts plus 0.25, 0.9, 0.3, 0.5 ms: a fixed cost every call adds is at most 0.25 ms (1 KiB),
    # not the ring's fastest call (0.25 ms + its parts)
    sweep = _parts_sweep(1.0, 1.0)
    for r, ms in zip(sweep["sizes"], (0.25, 0.9, 0.3, 0.5)):
        r["ring_s"] = r["ring_parts_s"] + ms * 1e-3
    lines = ring_prediction_lines(sweep)
    text = "\n".join(lines)
    assert "a fixed cost that every ring call adds is at most 0.25 ms here (its smallest excess over its measured " \
           "parts, at 1 KiB)" in text
    assert "the larger excess at 4 KiB, 16 KiB, 64 KiB is at least partly a cost at that size" in text
    assert text.count("does not separate them") == 1
    assert "candidate" not in text and "misses its own measured step" not in text
    assert lines[1:3] == ["  The ring is within 15% of its prediction at no size.",
                          "  It is slower at 1 KiB, 4 KiB, 16 KiB, 64 KiB (×2.24–×5.41)."] \
        and "more than its own parts timed alone add up to" in _short(lines)
    for r in sweep["sizes"]:   # a ring below its parts somewhere: the parts bound nothing, and no clamped 0 is said
        r["ring_s"] = r["ring_parts_s"] + 0.5e-3
    sweep["sizes"][0]["ring_s"] = sweep["sizes"][0]["ring_parts_s"] * 0.8
    text = "\n".join(ring_prediction_lines(sweep))
    assert "at most" not in text and "0.00 ms" not in text
    assert "at 1 KiB the ring took no more than its parts timed alone (×0.80): there the parts are not a lower bound " \
           "on the ring, so this run does not decide whether every ring call pays a fixed cost" in text


def test_a_near_constant_excess_over_the_parts_is_said_but_a_size_without_excess_leaves_it_undecided():
    # the ring is its parts plus 0.21, 0.22, 0.25 ms up to 16 KiB, then below them at 64 KiB (as in a recorded run)
    sweep = _parts_sweep(1.0, 1.0)
    for r, ms in zip(sweep["sizes"], (0.21, 0.22, 0.25)):
        r["ring_s"] = r["ring_parts_s"] + ms * 1e-3
    sweep["sizes"][3]["ring_s"] = 0.98 * sweep["sizes"][3]["ring_parts_s"]
    text = "\n".join(ring_prediction_lines(sweep))
    assert "the ring's excess over its measured parts stays within 0.21–0.25 ms from 1 KiB to 16 KiB, as a fixed " \
           "cost per call would, but at 64 KiB the ring took no more than its parts timed alone (×0.98)" in text
    assert "does not decide whether every ring call pays a fixed cost" in text and "at most" not in text
    sweep["sizes"][1]["ring_s"] = sweep["sizes"][1]["ring_parts_s"] + 0.9e-3   # not constant: no range is said
    text = "\n".join(ring_prediction_lines(sweep))
    assert "stays within" not in text and "  at 64 KiB the ring took no more than its parts timed alone" in text


def _short(lines: list[str]) -> str:
    """The takeaway above the table: "in short:" and its sentences, one a line."""
    return "\n".join(lines[:next(i for i, line in enumerate(lines) if line.split()[:1] == ["size"])])


def _split_sweep(step_line: float, step: float, gamma: float, add: float, ring: float) -> dict:
    """Two sizes; at 4 KiB the step line and γ's addition (ms) predict the ring, the measured step and addition its parts."""
    sweep = _parts_sweep(1.0, 1.0)
    sweep["sizes"] = sweep["sizes"][:2]
    r = sweep["sizes"][1]
    r["step_model_s"], r["step_s"], r["add_s"], r["ring_s"] = step_line * 1e-3, step * 1e-3, add * 1e-3, ring * 1e-3
    r["ring_model_s"], r["ring_parts_s"] = (2 * step_line + gamma) * 1e-3, (2 * step + add) * 1e-3
    return sweep


def test_where_the_ring_is_within_its_parts_their_share_of_the_excess_is_split_between_steps_and_additions():
    # the stored run's 4 MiB: prediction 2.70, parts 2.77 (within 15% of the ring's 3.13) explain 16% of the excess
    lines = ring_prediction_lines(_split_sweep(1.24, 1.25, 0.22, 0.27, 3.13))
    assert "mostly" not in "\n".join(lines)
    assert ("At 4 KiB it is within 15% of its measured parts (×1.13).\n  Its measured step there is ×1.01 the step line "
            "(1.25 vs 1.24 ms).\n  Over 2 steps that gap is 5% of the ring's excess over the prediction; the additions' "
            "gap to γ is 12%; the other 83% is not identified.") in _short(lines)
    # the step line misses the measured step, and that explains most of the excess
    lines = ring_prediction_lines(_split_sweep(1.0, 1.4, 0.2, 0.2, 3.0))
    assert "Its measured step there is ×1.40 the step line (1.40 vs 1.00 ms)" in _short(lines)
    assert "that gap is 100% of the ring's excess over the prediction; the additions' gap to γ is 0%" in _short(lines)
    # the additions take longer than γ says, and that explains most of the excess
    lines = ring_prediction_lines(_split_sweep(1.0, 1.0, 0.2, 0.9, 3.1))
    assert "that gap is 0% of the ring's excess over the prediction; the additions' gap to γ is 78%; the other 22% is " \
           "not identified" in _short(lines)
    # the stored run's 16 MiB: the step 5.64 ms, its line 5.12 ms; parts explain 62% of the excess
    lines = ring_prediction_lines(_split_sweep(5.12, 5.64, 1.09, 1.54, 13.74))
    assert "Its measured step there is ×1.10 the step line (5.64 vs 5.12 ms)" in _short(lines)
    assert "that gap is 43% of the ring's excess over the prediction; the additions' gap to γ is 19%; the other 38% is " \
           "not identified" in _short(lines)
    assert "within 15% of its own measured step" not in "\n".join(lines)   # said once, not contradicted
    # a miss over 15% at a size within its parts is said once, in the takeaway, not again as a miss
    lines = ring_prediction_lines(_split_sweep(1.0, 1.4, 0.2, 0.2, 3.0))
    assert "×1.40 the step line" in _short(lines) and not any("misses its own measured step" in line for line in lines)


def test_no_size_within_the_parts_margin_is_said_as_no_size_qualified():
    text = "\n".join(ring_prediction_lines(_parts_sweep(1.0, 3.0)))
    assert "No size qualified for splitting the excess between steps and additions" in text
    assert "No size qualified" not in "\n".join(ring_prediction_lines(_parts_sweep(3.0, 1.0)))


def test_a_ring_below_its_parts_is_said_once_not_twice():
    sweep = _parts_sweep(1.0, 3.0)
    last = sweep["sizes"][-1]
    last["ring_s"] = 0.7 * last["ring_parts_s"]
    text = "\n".join(ring_prediction_lines(sweep))
    assert "took no more than its parts timed alone (×0.70)" in text
    assert text.count("(×0.70)") == 1   # said once, in the no-bound sentence
    assert "the ring took less than its measured parts add up to" not in text


def test_the_step_line_miss_list_names_the_sizes_said_above_instead_of_dropping_them_silently():
    # 4 KiB: ring ×2 its prediction but within 15% of its measured parts (said above, with its step's miss);
    # 64 KiB: on its prediction, but its one step ×1.5 the step line: listed, "also", naming 4 KiB as said above
    sweep = _ring_sweep([1.0, 2.0, 1.0, 1.0])
    for r in sweep["sizes"]:
        r["step_s"], r["step_model_s"], r["ring_parts_s"] = 1e-4, 1e-4, r["ring_s"]
    sweep["sizes"][1]["step_s"] = 3e-4
    sweep["sizes"][3]["step_s"] = 1.5e-4
    text = "\n".join(ring_prediction_lines(sweep))
    assert "At 4 KiB it is within 15% of its measured parts" in text
    assert ("the step line also (besides 4 KiB, said above) misses its own measured step by more than 15% at 64 KiB: "
            "×1.50 at 64 KiB") in text
    # a size said above whose step is within 15% of the line is not named as missing it ("also" only for one that is)
    sweep["sizes"][1]["step_s"] = 1.1e-4
    text = "\n".join(ring_prediction_lines(sweep))
    assert "At 4 KiB it is within 15% of its measured parts" in text
    assert "the step line misses its own measured step by more than 15% at 64 KiB" in text and "besides" not in text


def test_a_prediction_met_by_two_cancelling_misses_is_said_so_and_every_size_above_the_fixed_cost_is_named():
    """08's fresh read: 'within 15% of its prediction at 1 MiB' where the ring took ×1.44 its measured parts and the
    step line was ×1.27 the measured step; the fixed-cost line left out 1 MiB and 4 MiB, whose excess exceeds it."""
    rows = [{"bytes": b, "ring_s": ring * 1e-3, "ring_model_s": pred * 1e-3, "step_s": step * 1e-3,
             "step_model_s": line * 1e-3, "ring_parts_s": part * 1e-3}
            for b, ring, pred, step, line, part in ((4 << 10, 0.76, 0.56, 0.29, 0.28, 0.58),
                                                    (1 << 20, 1.66, 1.45, 0.55, 0.70, 1.15),
                                                    (4 << 20, 5.51, 4.10, 2.41, 1.96, 4.99))]
    text = "\n".join(ring_prediction_lines({"sizes": rows, "world_size": 2, "step_alpha_s": 1e-4}))
    assert ("At 1 MiB that is two misses cancelling, not the model holding: there the ring takes ×1.44 its measured "
            "parts while its measured step is ×0.79 the step line") in text   # measured/line, as everywhere
    assert "at most 0.18 ms here (its smallest excess over its measured parts, at 4 KiB); the larger excess at 1 MiB, 4 MiB" in text


def test_a_ratio_on_the_margins_line_shows_which_side_it_is_on():
    """08's read 26: ×0.85 (0.849) was a miss and ×1.15 (1.147) within 15%: two decimals hid the side of the line."""
    rows = [{"bytes": b, "ring_s": ring * 1e-3, "ring_model_s": pred * 1e-3, "step_s": 0.3e-3, "step_model_s": 0.3e-3,
             "ring_parts_s": part * 1e-3} for b, ring, pred, part in ((64 << 10, 0.78, 0.66, 0.68), (4 << 20, 4.66, 5.05, 5.49))]
    text = "\n".join(ring_prediction_lines({"sizes": rows, "world_size": 2, "step_alpha_s": 1e-4}))
    assert "At 64 KiB it is within 15% of its measured parts (×1.147)" in text
    assert "there the ring takes ×0.849 its measured parts" in text
    assert "×1.18" in text and "×1.180" not in text   # off the line: two decimals
