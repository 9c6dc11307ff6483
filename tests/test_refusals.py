"""Issue 21: bad input is refused before any process starts, with an error naming the fix; training mistakes,
odd answers to the self-checks and a deadlocked ring get words instead of raw errors or silence."""
from __future__ import annotations

import sys
import time

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from helpers import DigitsCNN, MLP, make_loaders, train
from helpers.collectives import bus_bandwidth, run_reduce_scatter_check
from helpers.core.checks import verify
from helpers.launching.ranks import agree
from helpers.sharding import comm_per_step, memory_per_rank, run_sharding, run_tp_block
from helpers.sharding import strategies


class Launched(Exception):
    """What the fake launcher raises instead of starting processes: the arguments it was given."""


@pytest.fixture
def no_spawn(monkeypatch):
    """Replace the launcher in helpers.sharding: a call to it means the arguments were not refused first."""
    def fake_launch(fn, nprocs, args=(), **kwargs):
        raise Launched(nprocs, args)

    monkeypatch.setattr(strategies, "launch", fake_launch)


# --- (a) sharding: refused before spawning ---------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, words", [
    (dict(strategies=("zero2",)), ["'zero2'", "'ddp', 'zero1', 'fsdp2', 'tp'", "memory_per_rank"]),
    (dict(world_sizes=(2, 3), strategies=("tp",), batch=12), ["3", "divide", "1, 2, 4, 8"]),
    (dict(world_sizes=(1, 6), strategies=("ddp", "tp"), batch=12), ["6", "1, 2, 4, 8"]),
    (dict(world_sizes=(0,)), ["positive", "(1, 2, 4)"]),
    (dict(world_sizes=(2, 2.5)), ["positive", "(1, 2, 4)"]),
    (dict(world_sizes=()), ["at least one"]),
    (dict(steps=0), ["steps", "at least 1"]),
    (dict(world_sizes=(2, 3), strategies=("ddp", "zero1")), ["batch (256)", "3", "batch=258"]),
    (dict(strategies=("tp",), layers=3), ["pairs", "even"]),
    (dict(strategies=()), ["at least one"]),
    (dict(repeats=-1), ["repeats"]),
    (dict(lr=0), ["lr", "1e-3"]),
])
def test_run_sharding_refuses_bad_arguments_before_any_process_starts(no_spawn, kwargs, words):
    with pytest.raises(ValueError) as e:
        run_sharding(**kwargs)
    for w in words:
        assert w in str(e.value), f"{kwargs}: {w!r} not in: {e.value}"


def test_run_sharding_reads_an_int_as_one_world_size_and_a_str_as_one_strategy(no_spawn):
    with pytest.raises(Launched) as e:
        run_sharding(2, "fsdp2")
    nprocs, args = e.value.args
    assert nprocs == 2 and args[0] == ("fsdp2",)


def test_the_tensor_parallel_block_refuses_zero_ranks(monkeypatch):
    monkeypatch.setattr(strategies, "launch", lambda *a, **k: pytest.fail("a process was started"))
    with pytest.raises(ValueError, match="nprocs must be an int of at least 1"):
        run_tp_block(0)


@pytest.mark.parametrize("call", [lambda: memory_per_rank(-5, 2), lambda: comm_per_step(-5, 2),
                                  lambda: memory_per_rank(100, 2, "tp", replicated=200),
                                  lambda: memory_per_rank(float("nan"), 2)])
def test_the_calculator_refuses_impossible_parameter_counts(call):
    with pytest.raises(ValueError, match="parameters"):
        call()


def test_the_calculator_still_takes_big_counts_written_as_floats():
    assert memory_per_rank(7e9, 8, "zero3", "deepspeed")["total"] == 14 * 10**9


def test_unknown_collectives_and_reductions_list_the_choices():
    with pytest.raises(ValueError, match="all_reduce.*all_gather.*reduce_scatter.*broadcast.*reduce"):
        bus_bandwidth(1e6, 1e-3, 4, "allreduce")
    with pytest.raises(ValueError, match="world_size"):
        bus_bandwidth(1e6, 1e-3, 0)
    with pytest.raises(ValueError, match="'max', 'min'.*'rank0'"):
        agree(1.0, "sum")  # refused before it touches torch.distributed (no process group here)


# --- (b) training mistakes ----------------------------------------------------------------------------------------

def _small_loader(n: int = 256, batch: int = 64) -> DataLoader:
    ds = make_loaders(batch)["train"].dataset
    return DataLoader(torch.utils.data.Subset(ds, range(n)), batch_size=batch)


def test_a_dataset_instead_of_a_dataloader_is_refused_with_the_fix():
    ds = make_loaders(64)["train"].dataset
    with pytest.raises(TypeError, match=r"DataLoader\(.*batch_size=64"):
        train(DigitsCNN(), ds, progress=False)
    with pytest.raises(TypeError, match="val_loader.*DataLoader"):
        train(DigitsCNN(), _small_loader(), ds, progress=False)


def test_a_half_precision_model_on_the_cpu_is_told_to_use_float32():
    with pytest.raises(TypeError, match=r"float16.*\.float\(\)"):
        train(DigitsCNN().half(), _small_loader(), epochs=1, progress=False)


def test_too_few_classes_for_the_labels_says_how_many():
    with pytest.raises(ValueError, match="num_classes=10"):
        train(DigitsCNN(num_classes=5), _small_loader(), epochs=1, progress=False)
    bad = DataLoader(TensorDataset(torch.zeros(4, 64), torch.tensor([0, 1, -1, 2])), batch_size=4)
    with pytest.raises(ValueError, match="negative"):
        train(MLP(), bad, epochs=1, progress=False)


def test_an_exploding_loss_stops_training_and_asks_for_a_smaller_lr():
    torch.manual_seed(0)
    with pytest.raises(FloatingPointError, match=r"diverged.*lr=1e\+06.*smaller"):
        train(DigitsCNN(), _small_loader(1024), epochs=2, lr=1e6, progress=False)


def test_a_sensible_run_is_unchanged():
    torch.manual_seed(0)
    hist = train(MLP(), _small_loader(512), epochs=2, lr=3e-3, progress=False)
    assert hist.train_loss[-1] < hist.train_loss[0]


# --- (c) self-checks never crash ----------------------------------------------------------------------------------

@pytest.mark.parametrize("exercise, answer", [
    ("03.allreduce_8", 10**400), ("03.allreduce_8", 10**5000), ("01.bubble_slow_stage", 10**400),
    ("01.bubble_slow_stage", -10**400), ("03.allreduce_8", torch.tensor(36.0, device="meta")),
    ("04.rungs_rf2", torch.ones(5, device="meta")), ("04.rungs_rf2", [1, 2, 10**400]),
], ids=["int 10**400", "int 10**5000", "number 10**400", "number -10**400", "meta scalar", "meta list", "list"])
def test_answers_the_check_cannot_read_are_wrong_answers_not_crashes(exercise, answer):
    ok, msg = verify(exercise, answer)
    assert not ok and "Hint" in msg


def exits_like_a_script(numels, world_size):
    sys.exit("done")


def exits_with_the_builtin(numels, world_size):
    exit()


@pytest.mark.parametrize("fn", [exits_like_a_script, exits_with_the_builtin])
def test_a_student_function_calling_exit_gets_a_hint(fn):
    ok, msg = verify("09.zero1_partition", fn)
    assert not ok and "exit" in msg and "return" in msg and "Hint" in msg


# --- (d) a deadlocked ring says what it waits for, and gives up sooner ----------------------------------------------

def blocking_send_first(t):
    """Every rank sends with the blocking dist.send before anyone receives (module level: the ranks import it)."""
    import torch.distributed as dist
    rank, n = dist.get_rank(), dist.get_world_size()
    chunk = t.view(-1).tensor_split(n)[rank].contiguous()
    dist.send(chunk, (rank + 1) % n)  # gloo's send waits for the receiver, even for a few bytes
    dist.recv(chunk, (rank - 1) % n)
    return (rank + 1) % n


def test_a_deadlocked_ring_says_what_it_waits_for_and_gives_up_early(capfd):
    t0 = time.monotonic()
    with pytest.raises(TimeoutError, match="dist.isend") as e:
        run_reduce_scatter_check(blocking_send_first, nprocs=2, numel=101, timeout=120, patience=2, give_up=6)
    assert time.monotonic() - t0 < 60, "it waited for the whole timeout"
    said = capfd.readouterr()
    printed = said.out + said.err
    assert "dist.send(chunk" in printed and "test_refusals.py" in printed and "waiting" in printed
    assert "deadlock" in str(e.value)
