"""Pipelining helpers (helpers.pipeline): the split, the schedules by hand and by the library, the timing rounds,
failures."""
import time

import pytest
import torch

from helpers import pipeline as P
from helpers.launching import LaunchError, launch
import launch_drills
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
    rows = P.run_gpipe(ms=(1, 4), width=64, depth=1, batch=64, repeats=1, message_rounds=2)
    assert [r["message_bytes"] for r in rows] == [64 * 64 * 4, 16 * 64 * 4]  # one micro-batch's activation
    assert all(len(r["message_s"]) == 2 and min(r["message_s"]) > 0 for r in rows)
    m4 = rows[1]["events"]
    assert len(m4) == 2 * 2 * 4  # 2 stages × (F, B) × 4 micro-batches
    f0 = {e[2]: e for e in m4 if e[0] == 0 and e[1] == "F"}
    f1 = {e[2]: e for e in m4 if e[0] == 1 and e[1] == "F"}
    assert all(f1[i][3] >= f0[i][4] for i in range(4))  # stage 1 starts F1.i after F0.i ends


def one_step_with_and_without_a_hook(rank, world_size):
    """gpipe_step from the same start twice, with no ``record`` and with the instruments' timeline."""
    from helpers.pipeline.recipe import gpipe_step, make_stages, synthetic_batch
    x, y = synthetic_batch(32, 16)
    out = []
    for record in (None, P.StageTimeline(rank, "cpu")):
        stage = make_stages(16, 1)[rank]
        opt = torch.optim.SGD(stage.parameters(), lr=0.1)
        gpipe_step(rank, stage, opt, x, y, 4, 16, record=record)
        out.append([p.detach().clone() for p in stage.parameters()])
    return out, record.events


def test_gpipe_step_runs_without_a_hook_and_the_hook_changes_nothing_it_computes():
    res = launch(one_step_with_and_without_a_hook, 2, verbose=False, timeout=60)
    for rank, (params, events) in enumerate(res):
        plain, hooked = params
        assert all(torch.equal(a, b) for a, b in zip(plain, hooked))
        assert [e[:3] for e in events] == [(rank, k, i) for k in "FB" for i in range(4)]
        assert all(a <= b for *_, a, b in events)
    fresh = P.make_stages(16, 1)[0]
    assert not torch.equal(res[0][0][0][0], next(fresh.parameters()).detach())   # the step did train


def test_timing_rounds_interleave_and_rotate_after_a_warm_up_round():
    rounds = P.rotated_rounds(["a", "b", "c"], 4)
    assert len(rounds) == 5 and all(sorted(r) == ["a", "b", "c"] for r in rounds)   # round 0 (untimed) + 4 timed
    assert [r[0] for r in rounds] == ["a", "b", "c", "a", "b"]                        # no item always first
    assert P.rotated_rounds([1], 2) == [[1], [1], [1]]


def test_a_stage_that_raises_ends_every_process():
    t0 = time.monotonic()
    with pytest.raises(LaunchError, match="stage 1 crashed"):
        launch(launch_drills.failing_stage, 2, verbose=False, timeout=60)
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


def test_held_micro_batches_are_said_as_rows_of_the_batch():
    lib = [{"schedule": "gpipe", "microbatches": m, "peak_live": [m, m]} for m in (1, 2, 8)] + \
          [{"schedule": "1f1b", "microbatches": m, "peak_live": [2, 1]} for m in (2, 8)]
    text = P.held_rows_lines(lib, 2048).splitlines()
    assert all(t.count("the whole batch") == 2 for t in text[1:4])   # GPipe: m × batch/m at every m
    assert "stage 0 2 × 1,024 = 2,048 rows (the whole batch), stage 1 1 × 1,024 = 1,024 rows (1/2 of the batch)" in text[4]
    assert "stage 0 2 × 256 = 512 rows (1/4 of the batch), stage 1 1 × 256 = 256 rows (1/8 of the batch)" in text[5]


def test_piece_costs_are_timed_where_rank_0_computes(monkeypatch):
    # the pieces are timed on the device the two-process launch gives rank 0 (cuda:0 under nccl, else the CPU with
    # one thread), so the bound's GPU steps are never divided by CPU piece costs; the first line says where
    import helpers.launching.ranks as ranks
    from helpers.pipeline import instruments
    seen = []
    real = ranks.choose_backend
    monkeypatch.setattr(ranks, "choose_backend", lambda n, backend=None: seen.append(n) or real(n, backend))
    costs = instruments.stage_cost(width=16, depth=2, batch=64, ms=(1, 2), repeats=1)
    assert seen == [2] and costs[0]["where"] == ("on the CPU with one thread" if real(2) == "gloo" else "on cuda:0")
    assert P.piece_cost_lines(costs).startswith(f"stage 0 alone, {costs[0]['where']}, 1 rounds:")   # rounds from the run
    # the m's are timed in rotated rounds, as the steps are: m = 1 is not always first (a position effect on the baseline)
    orders = []
    real_rot = instruments.rotated_rounds
    monkeypatch.setattr(instruments, "rotated_rounds", lambda items, n: orders.append(real_rot(items, n)) or orders[-1])
    instruments.stage_cost(width=16, depth=2, batch=64, ms=(1, 2), repeats=2, device="cpu")
    assert orders == [[[1, 2], [2, 1], [1, 2]]]
    cpu = instruments.stage_cost(width=16, depth=2, batch=64, ms=(1, 2), repeats=1, device="cpu")
    assert cpu[0]["where"] == "on the CPU with one thread"
