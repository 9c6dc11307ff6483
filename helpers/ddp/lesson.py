"""Notebook 03 (DistributedDataParallel): its exercises and its benchmark."""
from __future__ import annotations

import random
from contextlib import contextmanager
from typing import Callable, Iterator

from ..core.checks import Exercise
from ..core.device import hardware_label
from ..core.i18n import tr
from ..launching.ranks import choose_backend
from ..launching.throughput import run_throughput
from .instruments import run_ddp_equivalence_check


NOTEBOOK = "03_ddp"


EXERCISES = [
    Exercise("03.per_rank_n17_k5", "int", digest="5fb6860b5e869de776bd25c3112a2191bb5e3c576bb294eb48a1824b1650f296",
             hint="The sampler pads the dataset to a multiple of the number of ranks, then deals it out like cards.",
             why="Every rank gets the same number of samples, so every rank runs the same number of steps; otherwise "
                 "a rank's extra step would wait at an all-reduce that the other ranks never reach (for uneven inputs "
                 "DDP has the Join context manager: "
                 "https://pytorch.org/docs/stable/distributed.algorithms.join.html)."),
    Exercise("03.padding_n17_k5", "int", digest="c57a7ef57fa5bd022849dbd0b4bbd823654402ed87e84e2910f7cc62885504d7",
             hint="How many indices does dealing need so that every rank gets the same number, and how many "
                  "samples are there?",
             why="Padding repeats samples; drop_last=True drops the tail instead."),
    Exercise("03.allreduce_8", "number", digits=3,
             digest="f62982aa54f48ac4d23343858709fe1f4258de73c3364835c051e3960955d9cc",
             hint="Look again at section 1's first launch: what each rank alone would have had per weight, and what "
                  "every rank held after backward. What rule ties the two? Apply it to r² for the ranks the question "
                  "names.",
             why="DDP divides each bucket of gradients by the number of ranks and all-reduces (sums) what the ranks "
                 "divided, so every rank ends with the same average: that keeps DDP's replicas identical, and it is "
                 "why one step on 2 × B/2 samples equals one step on B (section 3)."),
    Exercise("03.my_indices", "code", behaviour=lambda fn: _indices_behaviour(fn),
             hint="Read section 2's tables for N = 10 and 4 ranks again: which rank gets index i, where do the "
                  "repeated indices come from, and what does drop_last cut? Then think of a dataset smaller than "
                  "the number of ranks.",
             why="Every rank gets as many indices as every other, and together they cover the dataset: what the "
                 "all-reduce needs, and what set_epoch reshuffles each epoch."),
]


def _sampler_says(n: int, k: int, rank: int, drop_last: bool) -> list[int]:
    """What ``DistributedSampler`` itself gives ``rank`` without shuffling (03): the check's reference, no rule to copy."""
    from torch.utils.data.distributed import DistributedSampler

    return list(DistributedSampler(range(n), num_replicas=k, rank=rank, shuffle=False, drop_last=drop_last))


@contextmanager
def _sampler_watch() -> Iterator[list]:
    """Notes every ``DistributedSampler`` built or read while the student's function runs (03)."""
    from torch.utils.data.distributed import DistributedSampler

    built: list = []
    init, it = DistributedSampler.__init__, DistributedSampler.__iter__

    def noted_init(self, *args, **kwargs):
        built.append(1)
        init(self, *args, **kwargs)

    def noted_iter(self):
        built.append(1)
        return it(self)

    DistributedSampler.__init__, DistributedSampler.__iter__ = noted_init, noted_iter
    try:
        yield built
    finally:
        DistributedSampler.__init__, DistributedSampler.__iter__ = init, it


def _indices_cases() -> list[tuple[int, int]]:
    """Edge cases (padding longer than the data, one rank, more ranks than samples) and fresh random ones (03)."""
    fixed = [(10, 4), (12, 4), (13, 5), (2, 5), (3, 8), (1, 3), (7, 1), (5, 5)]
    rnd = random.Random()  # new cases at every check: a table of answers cannot pass
    return fixed + [(rnd.randint(1, 40), rnd.randint(1, 9)) for _ in range(12)]


def _indices_behaviour(my_indices: Callable) -> str | None:
    """The student's ``my_indices(n, world_size, rank, drop_last)`` judged against the sampler on varied cases (03).

    The expected indices come from a real ``DistributedSampler``, built before the student's function runs, so
    this module holds no rule to copy; a ``DistributedSampler`` built or read by the answer is refused.
    """
    cases = [(n, k, drop_last, rank) for n, k in _indices_cases() for drop_last in (False, True) for rank in range(k)]
    wants = [_sampler_says(n, k, rank, drop_last) for n, k, drop_last, rank in cases]
    with _sampler_watch() as built:
        for (n, k, drop_last, rank), want in zip(cases, wants):
            got = my_indices(n, k, rank, drop_last)
            if built:
                return tr("lesson.my_indices.uses_sampler", "my_indices uses a DistributedSampler, or the check's own "
                          "reference that builds one: the exercise is to write the rule yourself, from n, world_size, "
                          "rank and drop_last")
            try:
                got = [int(i) for i in got]
            except (TypeError, ValueError):
                return tr("lesson.my_indices.not_ints", "my_indices({n}, {k}, {rank}, {drop_last}) returned {got!r}; "
                          "return a list of ints", n=n, k=k, rank=rank, drop_last=drop_last, got=got)
            if got != want:
                what = _what_differs(got, want, n, k, rank, drop_last)
                return tr("lesson.my_indices.differs", "my_indices({n}, {k}, {rank}, drop_last={drop_last}) = {got}, "
                          "not what the sampler gives (look at the {what})", n=n, k=k, rank=rank, drop_last=drop_last,
                          got=got, what=_part_name(what))
    return None


def _what_differs(got: list, want: list, n: int, k: int, rank: int, drop_last: bool) -> str:
    """Which part of the rule a wrong answer missed: the dealing, the padding, or drop_last (03)."""
    if len(got) == len(want):
        first = next(j for j, (a, b) in enumerate(zip(got, want)) if a != b)
        if first * k + rank < n:  # an index from the data itself, before any padding: not dealt like cards
            return "dealing"
    return "drop_last" if drop_last and n % k else ("padding" if n % k else "dealing")


def _part_name(what: str) -> str:
    """The words a student reads for :func:`_what_differs`' label, in the course's language (03)."""
    return {"dealing": tr("lesson.my_indices.part_dealing", "dealing"),
            "padding": tr("lesson.my_indices.part_padding", "padding"),
            "drop_last": tr("lesson.my_indices.part_drop_last", "drop_last")}[what]


def bench_ddp(global_batch: int = 2048, seconds: float = 2.0) -> dict:
    """1 vs 2 single-threaded DDP processes at the same global batch, plus the equivalence error (03)."""
    batches = tuple(sorted({256, 1024, global_batch}))
    rows = run_throughput(nprocs_list=(1, 2), batches=batches, seconds=seconds, repeats=3)
    eq = run_ddp_equivalence_check(nprocs=2, batch=64)
    t1 = next(r for r in rows if r["processes"] == 1 and r["global_batch"] == global_batch)
    t2 = next(r for r in rows if r["processes"] == 2 and r["global_batch"] == global_batch)
    return {"backend": choose_backend(2), "device": hardware_label("cpu" if choose_backend(2) == "gloo" else "cuda:0",
                                                                  threads=1),
            "model": "DigitsCNN", "global_batch": global_batch, "throughput_1": round(t1["samples_per_s"], 1),
            "throughput_2": round(t2["samples_per_s"], 1), "speedup": round(t2["samples_per_s"] / t1["samples_per_s"], 3),
            "max_abs_diff": eq["max_abs_diff"], "allreduce_bytes_per_step": t2["allreduce_bytes_per_step"],
            "speedup_by_batch": {r["global_batch"]: round(r["speedup"], 3) for r in rows if r["processes"] == 2}}


BENCH = {"ddp": bench_ddp}


def readme_figures(results: dict) -> str:
    """The key figures of notebook 03 for the README's table, from ``bench_ddp``'s JSON."""
    d = results["ddp"]
    by = ", ".join(f"{s:.2f}× at {b}" for b, s in d["speedup_by_batch"].items())
    return (f"DigitsCNN, {d['backend']}, 2 vs 1 single-threaded processes by global batch: {by} "
            f"({d['throughput_1']:.0f} → {d['throughput_2']:.0f} samples/s at {d['global_batch']}); DDP step = "
            f"single-process step to {d['max_abs_diff']:.0e}")
