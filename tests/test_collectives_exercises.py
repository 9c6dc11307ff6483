"""Notebook 08's exercises 1, 2 and 3: the right answers follow from the ring model, plausible wrong ones are refused.

The expected answers are computed here from the course's own ring model (``ring_model_time``), so a
test also proves the stored answers are right.
"""
import pytest
import torch

from helpers.collectives import ring_model_time, ring_reduce_scatter
from helpers.core.checks import verify
from helpers.launching import launch

N, ALPHA, BETA, SIZE = 8, 50e-6, 1e-9, 16e6   # exercise 1: 8 ranks, α = 50 µs, β = 1 ns per byte, 16 MB


def test_ring_time_right_answer_is_the_models():
    ms = ring_model_time(SIZE, N, ALPHA, BETA) * 1e3
    assert verify("08.ring_ms_n8_16mb", ms)[0]
    assert verify("08.ring_ms_n8_16mb", round(ms, 1))[0]


@pytest.mark.parametrize("wrong", [
    2 * (N - 1) * SIZE / N * BETA * 1e3,                    # α left out
    (ALPHA + 2 * (N - 1) / N * SIZE * BETA) * 1e3,          # one α for the whole all-reduce
    (N - 1) * (ALPHA + SIZE / N * BETA) * 1e3,              # one half of the ring only
    2 * N * (ALPHA + SIZE / N * BETA) * 1e3,                # 2n steps
    (N - 1) * (ALPHA + SIZE * BETA) * 1e3,                  # the naive ring: whole messages
    2 * (N - 1) * (ALPHA + SIZE * BETA) * 1e3,              # chunks as large as the message
    ring_model_time(SIZE, N, ALPHA, BETA),                  # seconds, not ms
], ids=["no alpha", "one alpha", "one half", "2n steps", "naive ring", "whole-message chunks", "seconds"])
def test_ring_time_refuses_wrong_answers(wrong):
    assert not verify("08.ring_ms_n8_16mb", wrong)[0]


def _alpha_part(b):
    return 2 * (N - 1) * ALPHA


def _bytes_part(b):
    return 2 * (N - 1) * b / N * BETA


def test_crossover_right_answer_is_where_the_two_parts_of_the_model_are_equal():
    kb = N * ALPHA / BETA / 1e3
    b = kb * 1e3
    assert _alpha_part(b) == pytest.approx(_bytes_part(b))
    assert _alpha_part(0.9 * b) > _bytes_part(0.9 * b) and _alpha_part(1.1 * b) < _bytes_part(1.1 * b)
    assert verify("08.ring_crossover_kb_n8", kb)[0]


@pytest.mark.parametrize("wrong", [
    ALPHA / BETA / 1e3,                 # the chunk taken as the whole message
    (N - 1) * ALPHA / BETA / 1e3,       # n − 1 instead of n
    2 * (N - 1) * ALPHA / BETA / 1e3,   # every step's α against one message's bytes
    N * ALPHA / BETA,                   # bytes, not kB
    N * ALPHA / BETA / 2**10,           # KiB, not kB
], ids=["alpha/beta", "n-1", "2(n-1)", "bytes", "KiB"])
def test_crossover_refuses_wrong_answers(wrong):
    assert not verify("08.ring_crossover_kb_n8", wrong)[0]


def _values_summed(rank: int, world_size: int) -> list[int]:
    """Each chunk of one value per rank, all ones, after the recipe's ring_reduce_scatter: how many ranks it summed."""
    t = torch.ones(world_size)
    ring_reduce_scatter(t)
    return [int(v) for v in t.tolist()]


def test_chunk_sums_right_answer_is_what_the_recipe_leaves_on_rank_2():
    counts = launch(_values_summed, 5, timeout=120, verbose=False)[2]
    assert sorted(counts) == [1, 2, 3, 4, 5]   # one chunk complete, one never added into, the rest in between
    assert verify("08.chunk_sums_r2_n5", counts)[0]
    assert verify("08.chunk_sums_r2_n5", tuple(counts))[0]


@pytest.mark.parametrize("wrong", [
    [5, 5, 5, 5, 5],      # every chunk fully summed (that is after the all-gather)
    [1, 1, 1, 5, 1],      # only the owned chunk changed
    [3, 4, 5, 1, 2],      # the ring run the other way round
    [4, 3, 2, 1, 5],      # the owned chunk taken as rank − 1
    [2, 1, 5, 4, 3],      # shifted by one chunk
    [2, 1, 0, 4, 3],      # contributions received, own value not counted
    3,                    # the owned chunk's index (the exercise's earlier question)
], ids=["all five", "owned only", "other direction", "owned rank-1", "shifted", "received only", "owned index"])
def test_chunk_sums_refuses_wrong_answers(wrong):
    assert not verify("08.chunk_sums_r2_n5", wrong)[0]
