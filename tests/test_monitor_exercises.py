"""Notebook 05's exercises: the right answers pass, and plausible wrong ones are refused.

``05.log_epoch`` draws its ranks, shard sizes, tags, epochs and values at random on every call, so an answer
that hard-codes the tags, the steps or a table of values cannot pass; each wrong answer below is the kind a
student writes (rank 0's own numbers, the plain mean of the ranks' means, handing the work to Monitor.log …).
"""
from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from helpers.core.checks import verify
from helpers.monitor import lesson

EX = "05.log_epoch"


def _mean(gathered, tag):
    return sum(n * m[tag] for n, m in gathered) / sum(n for n, _ in gathered)


def right(writer, epoch, gathered):
    for tag in gathered[0][1]:
        writer.add_scalar(tag, _mean(gathered, tag), epoch)


def right_with_keywords_and_totals(writer, epoch, gathered):
    total = sum(n for n, _ in gathered)
    sums = {}
    for n, metrics in gathered:
        for tag, value in metrics.items():
            sums[tag] = sums.get(tag, 0.0) + n * value
    for tag in sorted(sums):
        writer.add_scalar(tag=tag, scalar_value=sums[tag] / total, global_step=epoch)


def rank0_only(writer, epoch, gathered):               # the classic DDP mistake: rank 0's shard as the run
    for tag, value in gathered[0][1].items():
        writer.add_scalar(tag, value, epoch)


def plain_mean(writer, epoch, gathered):               # the mean of the ranks' means, shards of any size
    for tag in gathered[0][1]:
        writer.add_scalar(tag, sum(m[tag] for _, m in gathered) / len(gathered), epoch)


def summed(writer, epoch, gathered):
    for tag in gathered[0][1]:
        writer.add_scalar(tag, sum(m[tag] for _, m in gathered), epoch)


def weighted_sum_not_divided(writer, epoch, gathered):
    for tag in gathered[0][1]:
        writer.add_scalar(tag, sum(n * m[tag] for n, m in gathered), epoch)


def every_rank_written(writer, epoch, gathered):       # one point per rank at the same step
    for _, metrics in gathered:
        for tag, value in metrics.items():
            writer.add_scalar(tag, value, epoch)


def through_monitor_log(writer, epoch, gathered):      # the course's Monitor.log, handed a stand-in
    from helpers.monitor import Monitor

    metrics = {tag: _mean(gathered, tag) for tag in gathered[0][1]}
    Monitor.log(SimpleNamespace(active=True, tb=writer, wandb_run=None), metrics, epoch)


def through_run_mean(writer, epoch, gathered):      # the check's own reference, imported
    from helpers.monitor.lesson import _run_mean

    for tag in gathered[0][1]:
        writer.add_scalar(tag, _run_mean(gathered, tag), epoch)


_imported_run_mean = lesson._run_mean      # held before the check runs, as `from ... import _run_mean` at the top


def through_run_mean_imported_early(writer, epoch, gathered):      # a wrapper of that alias
    for tag in gathered[0][1]:
        writer.add_scalar(tag, _imported_run_mean(gathered, tag), epoch)


def through_run_epoch_means(writer, epoch, gathered):      # the notebook's helper of section 4, fed the gathered pairs
    from helpers.monitor import run_epoch_means

    ranks = [{"samples": n, **{tag: [v] for tag, v in m.items()}} for n, m in gathered]
    for tag in gathered[0][1]:
        writer.add_scalar(tag, run_epoch_means(ranks, tag)[0], epoch)


def new_style(writer, epoch, gathered):
    for tag in gathered[0][1]:
        writer.add_scalar(tag, _mean(gathered, tag), epoch, new_style=True)


def hard_coded_tags(writer, epoch, gathered):
    writer.add_scalar("loss/train", gathered[0][1].get("loss/train", 0.0), epoch)
    writer.add_scalar("acc/val", gathered[0][1].get("acc/val", 0.0), epoch)


def add_scalars_instead(writer, epoch, gathered):     # one sub-run per main tag and key
    writer.add_scalars("metrics", {tag: _mean(gathered, tag) for tag in gathered[0][1]}, epoch)


def epoch_plus_one(writer, epoch, gathered):
    for tag in gathered[0][1]:
        writer.add_scalar(tag, _mean(gathered, tag), epoch + 1)


def no_step(writer, epoch, gathered):
    for tag in gathered[0][1]:
        writer.add_scalar(tag, _mean(gathered, tag))


def first_metric_only(writer, epoch, gathered):
    tag = next(iter(gathered[0][1]))
    writer.add_scalar(tag, _mean(gathered, tag), epoch)


def value_and_step_swapped(writer, epoch, gathered):
    for tag in gathered[0][1]:
        writer.add_scalar(tag, epoch, _mean(gathered, tag))


def its_own_writer(writer, epoch, gathered, _dirs=[]):  # writes, but not into the writer it was given
    import tempfile

    from torch.utils.tensorboard import SummaryWriter

    if not _dirs:
        _dirs.append(tempfile.mkdtemp(prefix="bog-05-own-"))
    with SummaryWriter(_dirs[0]) as mine:
        right(mine, epoch, gathered)


@pytest.fixture(autouse=True, scope="module")
def _remove_its_own_writers_folder():
    """its_own_writer's folder is none of the check's: removed after this module, not left in the system's /tmp."""
    yield
    import shutil

    for folder in its_own_writer.__defaults__[0]:
        shutil.rmtree(folder, ignore_errors=True)


def rounded_values(writer, epoch, gathered):
    for tag in gathered[0][1]:
        writer.add_scalar(tag, round(_mean(gathered, tag), 1), epoch)


@pytest.mark.parametrize("fn", [right, right_with_keywords_and_totals], ids=lambda f: f.__name__)
def test_right_answers_pass_every_time(fn):
    for _ in range(3):                                 # new ranks, tags, epochs and values each time
        ok, message = verify(EX, fn)
        assert ok, message


@pytest.mark.parametrize("fn", [rank0_only, plain_mean, summed, weighted_sum_not_divided, every_rank_written,
                                through_monitor_log, through_run_mean, through_run_mean_imported_early, through_run_epoch_means, new_style, hard_coded_tags, add_scalars_instead, epoch_plus_one,
                                no_step, first_metric_only, value_and_step_swapped, its_own_writer, rounded_values],
                         ids=lambda f: f.__name__)
def test_wrong_answers_are_refused(fn):
    for _ in range(3):
        ok, message = verify(EX, fn)
        assert not ok and message.startswith("❌"), message


@pytest.mark.parametrize("fn, words", [(rank0_only, "rank 0"), (plain_mean, "differ in size"),
                                       (through_monitor_log, "Monitor.log"), (new_style, "new_style"),
                                       (through_run_mean, "_run_mean"), (through_run_mean_imported_early, "_run_mean"),
                                       (through_run_epoch_means, "_run_mean")])
def test_the_classic_mistakes_are_named(fn, words):
    ok, message = verify(EX, fn)
    assert not ok and words in message, message


def test_the_check_draws_new_ranks_and_epochs():
    logs = {repr(lesson._random_log(random.Random(seed))) for seed in range(5)}
    assert len(logs) == 5
    for seed in range(20):
        epochs, gathered = lesson._random_log(random.Random(seed))
        assert epochs == sorted(set(epochs)) and epochs[0] >= 2 and len(gathered) == len(epochs)
        assert 2 <= len(gathered[0]) <= 4 and len({n for n, _ in gathered[0]}) == len(gathered[0])
        assert all(list(m) == list(gathered[0][0][1]) for g in gathered for _, m in g)


def test_the_check_draws_only_per_sample_means_in_their_ranges():
    # the run's value is the sample-weighted mean only for a per-sample mean (not perplexity, F1, throughput, lr)
    ranges = {"loss": (0, 5), "nll": (0, 5), "acc": (0, 1), "error": (0, 1)}
    names = set()
    for seed in range(200):
        _, gathered = lesson._random_log(random.Random(seed))
        for g in gathered:
            for tag in g[0][1]:
                name, split = tag.split("/")
                assert name in ranges and split in ("train", "val", "test"), tag
                names.add(name)
                low, high = ranges[name]
                assert all(low <= m[tag] <= high for _, m in g), (tag, g)
                want = lesson._run_mean(g, tag)        # every classic mistake stays more than 0.01 away
                assert abs(g[0][1][tag] - want) > 0.01
                assert abs(sum(m[tag] for _, m in g) / len(g) - want) > 0.01
                assert abs(sum(m[tag] for _, m in g) - want) > 0.01
    assert names == set(ranges)


@pytest.mark.parametrize("answer, ok", [(6, True), (5, False), (3, False), (4, False), (10, False), (25, False),
                                        (30, False)])
def test_add_scalars_runs_counts_names_and_the_writers_own(answer, ok):
    # 5: forgot the writer's own run; 3/4: keys of one call (+1); 10/25/30: counted per call or per point
    assert verify("05.add_scalars_runs_2calls", answer)[0] is ok


def test_add_scalars_runs_answer_is_what_tensorboard_lists(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    from helpers.monitor import read_back

    with SummaryWriter(tmp_path) as w:
        for step in range(5):
            w.add_scalars("loss", {"train": 1.0, "val": 2.0}, step)
            w.add_scalars("acc", {"train": 1.0, "val": 2.0, "test": 3.0}, step)
    assert verify("05.add_scalars_runs_2calls", len(read_back(tmp_path)["runs"]))[0]


@pytest.mark.parametrize("answer, ok", [(200, True), (100, False), (400, False), (99, False), (198, False),
                                        (2, False), (0, False)])
def test_rerun_points_counts_both_writers_files(answer, ok):
    # 100: thinks the rerun overwrites; 400: counts both of cell 9's tags; 99/198: counts steps from 1;
    # 2: counts event files; 0: thinks the reader gives up on a folder of two files
    assert verify("05.rerun_points", answer)[0] is ok


def test_rerun_points_answer_is_what_tensorboards_reader_returns(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    from helpers.monitor import read_back

    for _ in range(2):                                  # cell 9 run twice, without its rmtree
        with SummaryWriter(tmp_path) as w:
            for n_iter in range(100):
                w.add_scalar("Loss/train", random.random(), n_iter)
                w.add_scalar("Accuracy/train", random.random(), n_iter)
    points = read_back(tmp_path)["runs"]["."]["scalars"]["Loss/train"]
    assert len(list(tmp_path.glob("events.out.tfevents.*"))) == 2
    assert [s for s, _ in points] == list(range(100)) * 2          # the second run's steps follow the first's
    assert verify("05.rerun_points", len(points))[0]


@pytest.mark.parametrize("answer, ok", [(6, True), (3, False), (9, False), (12, False), (18, False), (8, False),
                                        (20, False)])
def test_profiler_steps_counts_active_steps_of_both_cycles(answer, ok):
    # 3: one cycle only; 9: cycles until the loop ends (repeat=0); 12: the steps both cycles span (wait + warmup
    # + active, twice); 18: every step after the first wait; 8: warm-up and active steps of both; 20: every step
    assert verify("05.profiler_steps_repeat2", answer)[0] is ok


def test_profiler_steps_answer_is_what_torchs_schedule_records():
    from torch.profiler import ProfilerAction, schedule

    s = schedule(wait=2, warmup=1, active=3, repeat=2)
    recorded = sum(s(step) in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE) for step in range(20))
    assert verify("05.profiler_steps_repeat2", recorded)[0]


def test_run_epoch_means_weights_each_rank_by_its_samples():
    from helpers.monitor import run_epoch_means

    ranks = [{"samples": 3, "train/loss": [1.0, 2.0]}, {"samples": 1, "train/loss": [5.0, 2.0]}]
    assert run_epoch_means(ranks, "train/loss") == [2.0, 2.0]       # (3·1 + 1·5) / 4; equal values stay


def test_the_reference_is_restored_after_the_check():
    code = lesson._run_mean.__code__
    verify(EX, through_run_mean_imported_early)
    assert lesson._run_mean.__code__ is code and lesson._run_mean([(1, {"t": 2.0}), (3, {"t": 6.0})], "t") == 5.0
