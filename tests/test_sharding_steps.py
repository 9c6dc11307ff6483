"""Notebook 09's step prediction (helpers/sharding/strategies.py): parts named by what was measured, each modelled part
beside the timing it divides, misses and noise said against the spread."""
from __future__ import annotations

import pytest

from helpers.sharding import run_sharding


def test_the_step_prediction_names_its_parts_by_what_was_measured():
    """The strategy's own cost is its step less the plain model's step (one process), not the plain step's rest."""
    from helpers.sharding import plain_rest
    from helpers.sharding.strategies import _predicted_parts
    c = {"fb_local_s": 0.010, "fb_full_s": 0.020, "adam_s": 0.005, "plain_local_s": 0.018, "plain_full_s": 0.030}
    assert plain_rest("ddp", c) == pytest.approx(0.003) and plain_rest("tp", c) == pytest.approx(0.005)
    link = {"all_reduce": (0.0, 0.0)}
    parts = _predicted_parts("zero1", 2, c, {"calls": {}, "payload": {}}, link, own=0.002)
    assert set(parts) == {"own", "plain rest", "compute", "adam", "comm"}
    assert parts["own"] == 0.002 and parts["plain rest"] == pytest.approx(0.003) and parts["adam"] == pytest.approx(0.0025)
    worse = dict(c, plain_local_s=0.001)                       # a plain step faster than its parts: counted as 0
    assert _predicted_parts("ddp", 2, worse, {"calls": {}, "payload": {}}, link, own=0.0)["plain rest"] == 0.0


def test_one_process_step_is_the_sum_of_its_measured_parts():
    """On one process the parts add up to the measured step by construction (own = step − plain step), plus the
    α of any collective a one-rank group still calls."""
    rows = run_sharding(world_sizes=(1,), strategies=("ddp", "tp"), layers=2, width=32, batch=8, repeats=2)
    for r in rows:
        c, parts = r["compute"], r["predicted_parts"]
        assert r["own_raw_s"] == pytest.approx(r["step_s"] - c["plain_full_s"])
        if r["own_raw_s"] >= 0 and r["plain_rest_raw_s"] >= 0:
            assert r["predicted_step_s"] == pytest.approx(r["step_s"] + parts["comm"], rel=1e-9)


def test_a_negative_own_cost_beyond_its_spread_is_said_to_exceed_the_spread_and_no_other():
    from helpers.sharding import beyond_spread

    said = beyond_spread({"ddp": (-1.79e-3, 0.5e-3), "zero1": (-0.4e-3, 1e-3), "fsdp2": (21e-3, 1e-3)})
    assert said.startswith("ddp -1.79 ms (spread ±0.50 ms): below 0 by more than the spread")
    assert "understates the noise between separately timed runs" in said and "zero1" not in said and "fsdp2" not in said
    assert beyond_spread({"ddp": (-0.4e-3, 1e-3), "fsdp2": (21e-3, 1e-3)}) == ""   # within the spread, or a real cost
    # 09's read 24: zero1 (DDP + ZeroRedundancyOptimizer) below 0 while ddp, the same wrapper, cost +6.46 ms
    said = beyond_spread({"ddp": (6.46e-3, 0.4e-3), "zero1": (-1.31e-3, 0.85e-3)})
    assert said.startswith("zero1 -1.31 ms (spread ±0.85 ms)") and "took 7.77 ms less than ddp" in said
    assert "or the wrapped step is faster" not in said


def test_an_own_cost_within_its_spread_is_said_plainly_to_be_noise_and_overlap_is_not_said_to_only_widen_a_gap():
    from helpers.sharding import noise_said, overlap_said

    assert noise_said(1.29e-3, 40.16e-3) == "+1.29 ms, within the timing noise (±40.16 ms): not told apart from 0 here"
    assert noise_said(16.55e-3, 1e-3) == "+16.55 ms"
    said = overlap_said()
    assert "other things equal" in said and "too much" in said and "only" not in said


def _timed_row(strategy: str, n: int) -> dict:
    from helpers.sharding.strategies import _predicted_parts
    compute = {"fb_full_s": 0.03111, "fb_local_s": 0.01797, "adam_s": 0.01274, "plain_full_s": 0.04461,
               "plain_local_s": 0.031}
    comm = {"calls": {}, "payload": {}}
    return {"strategy": strategy, "world_size": n, "compute": compute,
            "predicted_parts": _predicted_parts(strategy, n, compute, comm, {}, 0.0)}


@pytest.mark.parametrize("strategy", ["ddp", "zero1", "fsdp2", "tp"])
@pytest.mark.parametrize("n", [2, 4])
def test_each_modelled_part_prints_the_timing_it_divides(strategy, n):
    import re

    from helpers.sharding import parts_how
    w = _timed_row(strategy, n)
    how = parts_how(w)
    for k in ("compute", "adam"):
        part = f"{w['predicted_parts'][k] * 1e3:.2f}"
        m = re.search(r"([\d.]+) ms, ÷ (\d+)$", how[k])
        if m:                                            # modelled: the printed timing ÷ the printed N is the part
            assert int(m[2]) == n and f"{float(m[1]) / n:.2f}" == part, (k, how[k], part)
        else:                                            # timed on these ranks: the part is the timing itself
            assert how[k].startswith(f"timed on these {n} ranks"), how[k]
            assert w["predicted_parts"][k] == (w["compute"]["fb_local_s"] if k == "compute" else w["compute"]["adam_s"])


def test_misses_within_the_spread_are_neither_under_nor_over():
    from helpers.sharding import misses_said
    rows = [{"strategy": "ddp", "world_size": 2, "step_s": 0.1, "predicted_step_s": 0.106, "step_spread_s": 0.002},
            {"strategy": "zero1", "world_size": 2, "step_s": 0.1, "predicted_step_s": 0.0999, "step_spread_s": 0.002},
            {"strategy": "fsdp2", "world_size": 2, "step_s": 0.1, "predicted_step_s": 0.07, "step_spread_s": 0.004}]
    said = misses_said(rows)
    assert "zero1 N=2 -0.1%" in said and "ddp N=2 +6.0%" in said
    assert "1 of 3 under" in said and "1 over" in said and "1 within it" in said


def test_worst_miss_is_picked_beyond_the_spread_and_noise_said_only_of_rows_within():
    from helpers.sharding import under_said, within_said, worst_miss
    rows = [{"strategy": "ddp", "world_size": 2, "step_s": 0.1, "predicted_step_s": 0.094, "step_spread_s": 0.002},
            {"strategy": "fsdp2", "world_size": 2, "step_s": 0.1, "predicted_step_s": 0.077, "step_spread_s": 0.026},
            {"strategy": "tp", "world_size": 2, "step_s": 0.1, "predicted_step_s": 0.085, "step_spread_s": 0.003}]
    e, w = worst_miss(rows)
    assert w["strategy"] == "tp" and abs(e + 0.15) < 1e-9          # not fsdp2, whose larger miss is inside its spread
    said = within_said(rows)
    assert "fsdp2 N=2" in said and "ddp" not in said and "tp" not in said and "timing noise" in said
    assert "every miss beyond its spread in this run is under (2 of 3)" in under_said(rows, 2)
    assert "2 cores" in under_said(rows, 2) and "own cost" in under_said(rows, 2)
    over = rows + [{"strategy": "zero1", "world_size": 2, "step_s": 0.1, "predicted_step_s": 0.11, "step_spread_s": 0.002}]
    assert under_said(over, 2) == ""
    inside = [dict(r, step_spread_s=0.5) for r in rows]
    assert worst_miss(inside)[1]["strategy"] == "fsdp2" and under_said(inside, 2) == ""
    assert within_said(rows[:1]) == ""


def test_deepspeeds_flat_buffer_is_padded_to_twice_the_ranks():
    # stage_1_and_2.py: nccl_start_alignment_factor = 2 ("4-byte alignment/sizeof(fp16)") times the ranks (09's read 22)
    from helpers.sharding import largest_share
    assert largest_share([(5,)], 2, "flat") == 4     # padded to 8, not to 6
    assert largest_share([(8,)], 2, "flat") == 4 and largest_share([(3, 3)], 4, "flat") == 4   # 9 → 16 over 4 ranks
