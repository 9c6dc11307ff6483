"""Notebook 03's exercises: my_indices is judged against the sampler itself and refuses wrappers, hard-coded tables and
plausible wrong dealings; the all-reduce and sampler questions refuse the classic mistakes."""
import pytest

from helpers import ddp


# --- exercise 03.my_indices: the check judges by the sampler's rule, and refuses plausible wrong answers ---------

def _right(n, world_size, rank, drop_last=False):
    per = n // world_size if drop_last else -(-n // world_size)
    order = list(range(n))
    while len(order) < per * world_size:
        order += list(range(n))
    return order[:per * world_size][rank::world_size]


def test_the_checks_reference_is_the_sampler_itself_and_this_files_right_answer_matches_it(monkeypatch):
    """The fifth read: a two-line rule in lesson.py could be copied; the reference now builds a real sampler."""
    from torch.utils.data.distributed import DistributedSampler
    from helpers.ddp.lesson import _sampler_says
    for n in range(1, 25):
        for k in range(1, 10):
            for drop_last in (False, True):
                for rank in range(k):
                    assert _sampler_says(n, k, rank, drop_last) == _right(n, k, rank, drop_last)

    def refuse(self):
        raise RuntimeError("no sampler")
    monkeypatch.setattr(DistributedSampler, "__iter__", refuse)
    with pytest.raises(RuntimeError, match="no sampler"):  # no rule written out to fall back on, or to copy
        _sampler_says(10, 4, 0, False)


def test_my_indices_accepts_a_right_answer():
    from helpers.core.checks import verify
    ok, msg = verify("03.my_indices", _right)
    assert ok, msg


def test_my_indices_refuses_wrapping_distributed_sampler():
    from torch.utils.data import DistributedSampler
    from helpers.core.checks import verify

    def wrapped(n, world_size, rank, drop_last=False):
        return list(DistributedSampler(range(n), num_replicas=world_size, rank=rank, shuffle=False,
                                       drop_last=drop_last))

    def via_helper(n, world_size, rank, drop_last=False):
        return ddp.sampler_indices(n, world_size, drop_last=drop_last)[rank]

    for fn in (wrapped, via_helper):
        ok, msg = verify("03.my_indices", fn)
        assert not ok and "DistributedSampler" in msg
    from torch.utils.data.distributed import DistributedSampler as DS
    assert DS.__init__.__qualname__ == "DistributedSampler.__init__"  # the check put the real one back


def test_my_indices_refuses_calling_the_checks_own_rule_and_an_uninitialised_sampler():
    """The check's reference sits in the readable lesson module: an answer that calls it is refused, however imported."""
    from torch.utils.data.distributed import DistributedSampler
    from helpers.core.checks import verify
    from helpers.ddp import lesson
    from helpers.ddp.lesson import _sampler_says

    def imported(n, world_size, rank, drop_last=False):
        return _sampler_says(n, world_size, rank, drop_last)

    def via_module(n, world_size, rank, drop_last=False):
        return list(lesson._sampler_says(n, world_size, rank, drop_last))

    def no_init(n, world_size, rank, drop_last=False):  # a sampler built without __init__, its fields set by hand
        s = object.__new__(DistributedSampler)
        s.dataset, s.num_replicas, s.rank, s.shuffle, s.drop_last, s.seed, s.epoch = (
            range(n), world_size, rank, False, drop_last, 0, 0)
        s.num_samples = n // world_size if drop_last and n % world_size else -(-n // world_size)
        s.total_size = s.num_samples * world_size
        return list(s)

    for fn in (imported, via_module, no_init):
        ok, msg = verify("03.my_indices", fn)
        assert not ok and "yourself" in msg, msg
    assert DistributedSampler.__init__.__qualname__ == "DistributedSampler.__init__"  # the watch is off again
    assert _sampler_says(10, 4, 0, False) == [0, 4, 8]


def test_my_indices_names_the_dealing_when_blocks_replace_cards():
    """The classic mistake (contiguous blocks) is told to look at the dealing, not the padding, even at (10, 4)."""
    from helpers.ddp.lesson import _what_differs
    assert _what_differs([3, 4, 5], [1, 5, 9], 10, 4, 1, False) == "dealing"
    assert _what_differs([2, 6], [2, 6, 0], 10, 4, 2, False) == "padding"
    assert _what_differs([2, 6, 0], [2, 6], 10, 4, 2, True) == "drop_last"
    assert _what_differs([2, 6, 1], [2, 6, 0], 10, 4, 2, False) == "padding"


def test_my_indices_refuses_a_hard_coded_table_of_the_fixed_cases():
    from helpers.core.checks import verify
    from helpers.ddp.lesson import _sampler_says
    fixed = [(10, 4), (12, 4), (13, 5), (2, 5), (3, 8), (1, 3), (7, 1), (5, 5)]
    table = {(n, k, r, d): _sampler_says(n, k, r, d) for n, k in fixed for d in (False, True) for r in range(k)}

    def looked_up(n, world_size, rank, drop_last=False):
        return table.get((n, world_size, rank, drop_last), list(range(rank, n, world_size)))

    assert not verify("03.my_indices", looked_up)[0]


def test_my_indices_refuses_padding_that_repeats_the_data_only_once():
    """The classic mistake: idx += idx[:pad] is short when the padding is longer than the data (n = 2, k = 5)."""
    from helpers.core.checks import verify

    def pad_once(n, world_size, rank, drop_last=False):
        idx = list(range(n))
        if drop_last:
            idx = idx[:n // world_size * world_size]
        else:
            idx += idx[:(-n) % world_size]
        return idx[rank::world_size]

    assert _right(10, 4, 2) == pad_once(10, 4, 2)  # right whenever the padding is shorter than the data
    ok, msg = verify("03.my_indices", pad_once)
    assert not ok and "padding" in msg


def test_my_indices_refuses_the_untouched_skeleton_and_dealing_in_blocks():
    from helpers.core.checks import verify

    def skeleton(n, world_size, rank, drop_last=False):
        ...

    def blocks(n, world_size, rank, drop_last=False):  # contiguous slices instead of dealing like cards
        per = -(-n // world_size)
        order = [i % n for i in range(per * world_size)]
        return order[rank * per:(rank + 1) * per]

    assert not verify("03.my_indices", skeleton)[0]
    assert not verify("03.my_indices", blocks)[0]


def test_the_all_reduce_exercise_asks_for_ddps_average_of_r_squared_and_refuses_the_classic_mistakes():
    """8 ranks, rank r's own gradient r²: every rank holds (0 + 1 + 4 + ... + 49) / 8 = 17.5 after DDP's backward.

    Refused: the sum (no division), ranks counted from 1, the square of the mean rank, the mean rank, one rank's own
    gradient, dividing by 7, dividing twice (by the ranks before and after the all-reduce), the old exercise's 4.5,
    and 17.5 rounded to 17 or 18 (the check compares 3 significant digits).
    """
    from helpers.core.checks import verify
    squares = [r * r for r in range(8)]
    assert verify("03.allreduce_8", sum(squares) / 8)[0] and verify("03.allreduce_8", 35 / 2)[0]
    wrong = (sum(squares), sum(r * r for r in range(1, 9)) / 8, sum(r * r for r in range(1, 9)), 3.5 ** 2, 3.5,
             0, 49, sum(squares) / 7, sum(squares) / 64, 4.5, 36 / 8, 17, 18)
    assert 17.5 not in wrong
    for answer in wrong:
        assert not verify("03.allreduce_8", answer)[0], answer
    # the hint points at the operation, not at which ranks to count (ranks counted from 1 is the mistake to catch)
    from helpers.ddp.lesson import EXERCISES
    hint = next(e.hint for e in EXERCISES if e.id == "03.allreduce_8")
    assert "rank 0" not in hint and "included" not in hint
    assert "12" not in hint and "operation" not in hint   # the launch's numbers, read by the student; no naming of the step


def test_the_sampler_exercises_refuse_the_worked_examples_answers_and_the_classic_mistakes():
    """N = 17, k = 5: 4 per rank, 3 repeated. Section 2's N = 10, k = 4 answers (3 per rank, 2 repeated) are refused."""
    from helpers.core.checks import verify
    assert verify("03.per_rank_n17_k5", 4)[0] and verify("03.padding_n17_k5", 3)[0]
    for wrong in (3, 17 // 5, 3.4, 5, 17, 20):  # the worked example / a floor; 17 / 5; ranks; samples; padded total
        assert not verify("03.per_rank_n17_k5", wrong)[0], wrong
    for wrong in (2, 17 % 5, 0, 5, 17, 20, 4):  # the worked example / the remainder; none; ranks; N; total; per rank
        assert not verify("03.padding_n17_k5", wrong)[0], wrong
    per_rank = ddp.sampler_indices(17, 5)  # the sampler itself: 4 each, 20 in all
    assert {len(r) for r in per_rank} == {4} and sum(len(r) for r in per_rank) - 17 == 3
