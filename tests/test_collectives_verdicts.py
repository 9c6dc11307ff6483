"""Notebook 08's generated verdicts: they say only what their numbers say (no processes started)."""
from helpers.collectives import ddp_verdict, ring_prediction_lines, sweep_summary


def _sweep(small_ratio: float, large_ratio: float = 16.0) -> dict:
    sizes = [4**k * 2**10 for k in range(8)]  # 1 KiB … 16 MiB, as the notebook's sweep
    t = {s: 1e-4 for s in sizes}
    t[sizes[2]] = 1e-4 * small_ratio
    t[sizes[-3]] = 1e-3
    t[sizes[-2]] = 1e-3 * large_ratio ** 0.5
    t[sizes[-1]] = 1e-3 * large_ratio
    rows = [{"bytes": s, "gloo_s": t[s], "gloo_model_s": 1e-4 + s * 1e-9, "gloo_busbw_gbs": s / t[s] / 1e9}
            for s in sizes]
    return {"sizes": rows, "beta_s_per_byte": 1e-9}


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
    assert line.startswith("1,024 all-reduces of 1 KiB: 1,024 × 0.10 ms (one, timed) = 102 ms")
    assert "from the fitted line" in line


def _scratch(per_parameter: float, bucketed: float, overlapped: float) -> dict:
    return {"ratio": {"ddp": 1.0, "per_parameter": per_parameter, "bucketed": bucketed, "overlapped": overlapped}}


def test_the_ddp_verdict_needs_a_margin_and_says_slower_when_slower():
    assert "overlapped no clear difference from bucketed" in ddp_verdict(_scratch(1.6, 1.30, 1.25))
    assert "overlapped faster than bucketed" in ddp_verdict(_scratch(1.6, 1.30, 1.10))
    assert "overlapped slower than bucketed" in ddp_verdict(_scratch(1.6, 1.30, 1.50))
    assert "bucketed faster than per parameter" in ddp_verdict(_scratch(1.6, 1.30, 1.10))
    assert "bucketed no clear difference from per parameter" in ddp_verdict(_scratch(1.35, 1.30, 1.10))


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
    assert sum("predicted" in line and "ring" in line for line in lines[:4]) == 4
    assert "within 15% of the prediction at: 16 KiB, 64 KiB" in lines
    slower = next(line for line in lines if line.startswith("slower than predicted"))
    assert "1 KiB, 4 KiB" in slower and "×2.5–×3.0" in slower
    assert any("no term for a cost per call" in line for line in lines)


def test_a_steady_excess_is_called_a_fixed_cost_and_a_changing_one_is_not():
    steady = "\n".join(ring_prediction_lines(_ring_sweep([0] * 4, extra_ms=[0.6, 0.5, 0.55, 0.0])))
    assert "as a fixed cost per call would" in steady and "does not explain it" not in steady
    changing = "\n".join(ring_prediction_lines(_ring_sweep([0] * 4, extra_ms=[0.2, 0.9, 0.0, 0.0])))
    assert "a fixed cost per call alone does not explain it" in changing


def test_a_ring_that_fits_everywhere_gets_no_why_and_a_faster_one_is_said_faster():
    lines = ring_prediction_lines(_ring_sweep([1.0, 1.1, 0.9]))
    assert not any(line.startswith(("slower", "faster", "  why")) for line in lines)
    assert any(line.startswith("faster than predicted at 4 KiB") for line in ring_prediction_lines(_ring_sweep([1.0, 0.5])))
