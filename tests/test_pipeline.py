"""Pipelining helpers (helpers.pipeline): the bound, the split, the schedules, failures."""
import time

import pytest
import torch

from helpers import pipeline as P
from helpers.dist import workers
from helpers.dist import LaunchError, launch
from conftest import launched_children as _children


def test_bubble_and_ideal_speedup():
    assert P.bubble_fraction(1) == 0.5 and P.bubble_fraction(6, 4) == pytest.approx(1 / 3)
    assert P.ideal_speedup(8) == pytest.approx(16 / 9)
    with pytest.raises(ValueError, match="m >= 1"):
        P.bubble_fraction(0)


def test_two_device_model_matches_its_halves():
    dev0, dev1, where = P.two_devices()
    assert "seq1" in where or "both halves" in where
    model = P.TwoDeviceModel(dev0, dev1)
    x = torch.randn(4, 1, 8, 8)
    ref = model.seq2(model.seq1(x.to(dev0)).to(dev1))
    assert torch.equal(model(x), ref)
    assert sum(P.parameters_per_device(model).values()) == sum(p.numel() for p in model.parameters())


def test_hand_written_gpipe_events_and_order():
    rows = P.run_gpipe(ms=(1, 4), width=64, depth=1, batch=64, repeats=1)
    m4 = rows[1]["events"]
    assert len(m4) == 2 * 2 * 4  # 2 stages × (F, B) × 4 micro-batches
    f0 = {e[2]: e for e in m4 if e[0] == 0 and e[1] == "F"}
    f1 = {e[2]: e for e in m4 if e[0] == 1 and e[1] == "F"}
    assert all(f1[i][3] >= f0[i][4] for i in range(4))  # stage 1 starts F1.i after F0.i ends


def test_library_schedules_equal_the_unsplit_model():
    rows = P.run_library(ms=(2, 4), width=32, depth=1, batch=64, repeats=1)
    for r in rows:
        assert r["grad_max_abs_diff"] < 1e-6 and r["loss_diff"] < 1e-5
    peaks = {(r["schedule"], r["microbatches"]): r["peak_live"][0] for r in rows}
    assert peaks[("gpipe", 4)] == 4 and peaks[("1f1b", 4)] == 2


def test_a_stage_that_raises_ends_every_process():
    t0 = time.monotonic()
    with pytest.raises(LaunchError, match="stage 1 crashed"):
        launch(workers.failing_stage, 2, verbose=False, timeout=60)
    assert time.monotonic() - t0 < 30 and not _children()


@pytest.mark.parametrize("kwargs, match", [
    ({"ms": (3,), "batch": 64}, "does not split into 3"),
    ({"ms": (0,)}, "positive int"),
    ({"width": 0}, "width must be a positive int"),
])
def test_bad_pipeline_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        if "width" in kwargs:
            P.make_stages(**kwargs)
        else:
            P.run_gpipe(**kwargs)


def test_unknown_schedule():
    with pytest.raises(ValueError, match="unknown schedule"):
        P.run_library(schedules=("zb",))
