"""Notebook 08's exercises 1 and 2: the right answers follow from the ring model, plausible wrong ones are refused.

The expected answers are computed here from the course's own ring model (``ring_model_time``), so a
test also proves the stored answers are right.
"""
import pytest

from helpers.collectives import ring_model_time
from helpers.core.checks import verify

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
