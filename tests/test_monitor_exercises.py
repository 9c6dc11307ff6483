"""Notebook 05's code exercise (``05.log_epoch``): the right answer passes, and plausible wrong ones are refused.

The check draws its tags, epochs and values at random on every call, so an answer that hard-codes the
tags, the steps or a table of values cannot pass; each wrong answer below is the kind a student writes.
"""
from __future__ import annotations

import random

import pytest

from helpers.core.checks import verify
from helpers.monitor import lesson

EX = "05.log_epoch"


def right(writer, epoch, metrics):
    for tag, value in metrics.items():
        writer.add_scalar(tag, value, epoch)


def right_with_global_step_keyword(writer, epoch, metrics):
    for tag in sorted(metrics):
        writer.add_scalar(tag=tag, scalar_value=float(metrics[tag]), global_step=epoch)


def hard_coded_tags(writer, epoch, metrics):          # the tags of the old fixed check
    writer.add_scalar("loss/train", metrics.get("loss/train", 0.0), epoch)
    writer.add_scalar("acc/val", metrics.get("acc/val", 0.0), epoch)


def add_scalars_instead(writer, epoch, metrics):      # one sub-run per key
    writer.add_scalars("metrics", metrics, epoch)


def epoch_plus_one(writer, epoch, metrics):
    for tag, value in metrics.items():
        writer.add_scalar(tag, value, epoch + 1)


def _counting():
    calls = {"n": 0}

    def own_counter(writer, epoch, metrics):          # counts its own calls as the step: 1, 2, 3 …
        calls["n"] += 1
        for tag, value in metrics.items():
            writer.add_scalar(tag, value, calls["n"])
    return own_counter


def no_step(writer, epoch, metrics):
    for tag, value in metrics.items():
        writer.add_scalar(tag, value)


def first_metric_only(writer, epoch, metrics):
    tag, value = next(iter(metrics.items()))
    writer.add_scalar(tag, value, epoch)


def value_and_step_swapped(writer, epoch, metrics):
    for tag, value in metrics.items():
        writer.add_scalar(tag, epoch, value)


def its_own_writer(writer, epoch, metrics, _dirs=[]):  # writes, but not into the writer it was given
    import tempfile

    from torch.utils.tensorboard import SummaryWriter

    if not _dirs:
        _dirs.append(tempfile.mkdtemp(prefix="bog-05-own-"))
    with SummaryWriter(_dirs[0]) as mine:
        right(mine, epoch, metrics)


def table_of_the_old_check(writer, epoch, metrics):   # the old check's values, memorised
    old = {1: {"loss/train": 1.5, "acc/val": 0.5}, 2: {"loss/train": 0.9, "acc/val": 0.75},
           3: {"loss/train": 0.4, "acc/val": 0.9}}
    for tag, value in old.get(epoch, {}).items():
        writer.add_scalar(tag, value, epoch)


def rounded_values(writer, epoch, metrics):
    for tag, value in metrics.items():
        writer.add_scalar(tag, round(value, 1), epoch)


@pytest.mark.parametrize("fn", [right, right_with_global_step_keyword], ids=lambda f: f.__name__)
def test_right_answers_pass_every_time(fn):
    for _ in range(3):                                 # new tags, epochs and values each time
        ok, message = verify(EX, fn)
        assert ok, message


@pytest.mark.parametrize("fn", [hard_coded_tags, add_scalars_instead, epoch_plus_one, _counting(), no_step,
                                first_metric_only, value_and_step_swapped, its_own_writer, table_of_the_old_check,
                                rounded_values], ids=lambda f: f.__name__)
def test_wrong_answers_are_refused(fn):
    ok, message = verify(EX, fn)
    assert not ok and message.startswith("❌"), message


def test_the_check_draws_new_tags_and_epochs():
    logs = {repr(lesson._random_log(random.Random(seed))) for seed in range(5)}
    assert len(logs) == 5
    for seed in range(20):
        epochs, metrics = lesson._random_log(random.Random(seed))
        assert epochs == sorted(set(epochs)) and epochs[0] >= 2 and 2 <= len(metrics[0]) <= 4
        assert all(list(m) == list(metrics[0]) for m in metrics)
