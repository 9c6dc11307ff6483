"""Notebook 02's clocks: each step of DataParallel timed, and the ways to use two workers compared (02).

Split from ``instruments`` (what the steps do and move); this module times them.
"""
from __future__ import annotations

import copy
import statistics
import time
from typing import Callable

import torch
from torch import nn

from ..core.data import digits_batch
from ..core.device import gpu_count
from ..core.i18n import tr
from ..core.measure import torch_threads
from ..core.models import DigitsCNN
from .recipe import four_steps_gpu
from .instruments import LABELS, four_steps_cpu, run_threads_one_intraop
from .timing import timed, timing

__all__ = ["time_four_steps", "thread_variants", "rounds_verdict", "MARGIN", "gil_probe", "gil_by_rounds",
           "gil_by_rounds_said", "amdahl_cap", "parallel_apply_here"]


def time_four_steps(batch: int = 256, repeats: int = 20, cpu: bool = False) -> dict:
    """Mean seconds spent in scatter, replicate, apply, gather and backward per forward+backward pass (02).

    No optimizer step: ``repeats`` passes after two warm-up ones, gradients cleared before each of
    the two passes (so neither backward adds into gradients already set).
    ``one_worker_seconds``: the same batch's forward and backward on one thread (the serial step
    that Amdahl's law starts from), timed in turns with the four steps. ``cpu``: the CPU simulation
    even with GPUs (to set beside section 4's CPU threads).
    """
    x, y = digits_batch(batch)
    model = DigitsCNN()
    n = 0 if cpu else gpu_count()
    totals: dict[str, float] = {}
    one: dict[str, float] = {}
    with torch_threads(1):  # one core per "device" on a CPU, as if each were its own
        for r in range(repeats + 2):
            model.zero_grad(set_to_none=True)
            if n >= 2:
                res = four_steps_gpu(model.to("cuda:0"), x.to("cuda:0"), y, list(range(n)), record=timing)
            else:
                res = four_steps_cpu(model, x, y, n=2)
            model.zero_grad(set_to_none=True)  # both backwards start from None: neither adds into set gradients
            single: dict[str, float] = {}
            out = timed(single, "forward", lambda: model(x.to("cuda:0" if n >= 2 else "cpu")))
            timed(single, "backward", nn.functional.cross_entropy(out, y.to(out.device)).backward)
            if r >= 2:  # the first two are warm-up
                for k, v in res["times"].items():
                    totals[k] = totals.get(k, 0.0) + v
                for k, v in single.items():
                    one[k] = one.get(k, 0.0) + v
    return {"path": res["path"], "step_seconds": {k: v / repeats for k, v in totals.items()},
            "one_worker_seconds": {k: v / repeats for k, v in one.items()}}


def _throughput(step: Callable[[], None], batch: int, seconds: float, min_steps: int = 1) -> float:
    for _ in range(2):
        step()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds or n < min_steps:
        step()
        n += 1
    return n * batch / (time.perf_counter() - t0)


def thread_variants(batch: int = 256, seconds: float = 0.2, threads: int = 2, rounds: int = 3) -> dict:
    """Samples/s of one training step done three ways in this process, torch on 1 thread each (02).

    Each variant is timed for ``seconds`` in each of ``rounds`` rounds, the variants taking turns,
    so that a slow moment of the machine would hit them alike; returns every round's samples/s per variant.

    - ``single``: one thread, the whole batch.
    - ``threads_forward_only``: the four steps (replicas' forwards in threads), then one
      ``backward`` call from the main thread, as :func:`four_steps_cpu` does, and nothing else.
    - ``threads_forward_backward``: each thread runs forward *and* backward on its own replica;
      the main thread sums the gradients.
    """
    x, y = digits_batch(batch)
    torch.manual_seed(0)
    model = DigitsCNN()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    replicas = [copy.deepcopy(model) for _ in range(threads)]

    def single() -> None:
        opt.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    def forward_only() -> None:
        opt.zero_grad(set_to_none=True)
        four_steps_cpu(model, x, y, n=threads)
        opt.step()

    xs, ys = x.chunk(threads), y.chunk(threads)

    def work(i: int) -> None:
        replicas[i].zero_grad(set_to_none=True)
        (nn.functional.cross_entropy(replicas[i](xs[i]), ys[i]) / threads).backward()

    def forward_backward() -> None:
        run_threads_one_intraop(work, threads)
        with torch.no_grad():
            for p, *rs in zip(model.parameters(), *(r.parameters() for r in replicas)):
                p.grad = sum(r.grad for r in rs)
        opt.step()
        with torch.no_grad():  # the replicas take the new weights, as DataParallel's replicate would
            for r in replicas:
                for p, q in zip(model.parameters(), r.parameters()):
                    q.copy_(p)

    variants = {"single": single, "threads_forward_only": forward_only, "threads_forward_backward": forward_backward}
    runs: dict[str, list[float]] = {k: [] for k in variants}
    with torch_threads(1):
        for _ in range(rounds):
            for k, step in variants.items():
                runs[k].append(_throughput(step, batch, seconds))
    return runs


def gil_probe(batches: tuple[int, ...] = (1, 4, 16, 64, 256), seconds: float = 0.1, rounds: int = 3,
              min_steps: int = 10) -> list[dict]:
    """Speedup of 2 threads over 1 running forward+backward, at each per-thread batch size (02).

    One and two threads take turns, ``rounds`` times for ``seconds`` each and at least
    ``min_steps`` steps (large batches take few steps in ``seconds``); ``speedup`` is the median
    of the rounds' ratios, ``speedup_min``/``speedup_max`` their range, ``side`` the verdict
    (every round more than ``MARGIN`` beyond 1× on one side, else no clear difference). With tiny batches a
    step is mostly Python (module calls, autograd bookkeeping), which holds the GIL; with large
    batches it is mostly inside operators, which release it.
    """
    rows = []
    for b in batches:
        x, y = digits_batch(b)
        models = [DigitsCNN() for _ in range(2)]

        def step(i: int) -> None:
            nn.functional.cross_entropy(models[i](x), y).backward()

        def one() -> None:
            step(0)

        def two() -> None:
            run_threads_one_intraop(step, 2)

        ratios, t1s, t2s = [], [], []
        with torch_threads(1):
            for _ in range(rounds):
                t1s.append(_throughput(one, b, seconds, min_steps))
                t2s.append(_throughput(two, 2 * b, seconds, min_steps))
                ratios.append(t2s[-1] / t1s[-1])
        rows.append({"batch_per_thread": b, "one_thread": statistics.median(t1s), "two_threads": statistics.median(t2s),
                     "speedup": statistics.median(ratios), "speedup_min": min(ratios), "speedup_max": max(ratios),
                     "ratios": ratios, "side": _side(ratios)})
    return rows


MARGIN = 0.03  # a ratio within 3 % of 1× counts as no clear difference: rounds on a shared machine vary more


def _side(ratios: list[float], margin: float = MARGIN) -> str:
    if all(r < 1 - margin for r in ratios):
        return "slower"
    if all(r > 1 + margin for r in ratios):
        return "faster"
    return "no clear difference"


def rounds_verdict(runs: dict, name: str, baseline: str = "single", margin: float = MARGIN) -> dict:
    """How ``runs[name]`` compared with ``runs[baseline]`` round by round (timed in turns): ratios and a verdict (02).

    Faster or slower only when every round is more than ``margin`` beyond 1× on that side.
    """
    ratios = [a / b for a, b in zip(runs[name], runs[baseline])]
    side = _side(ratios, margin)
    m = f"{margin:.0%}"
    verdict = (tr("02.faster_than_one_thread", "faster than one thread in every round, each by more than {margin}",
                  margin=m)
               if side == "faster" else
               tr("02.slower_than_one_thread", "slower than one thread in every round, each by more than {margin}",
                  margin=m)
               if side == "slower" else
               tr("02.no_clear_rounds", "no clear difference (not every round more than {margin} on one side of 1×)",
                  margin=m))
    return {"ratios": ratios, "verdict": verdict, "side": side}


def gil_by_rounds(rows: list[dict], margin: float = MARGIN) -> dict:
    """The probe's batches per thread where 2 threads beat 1 in every round, lost in every round, or neither (02).

    Beat or lost: every round more than ``margin`` beyond 1× on that side.
    """
    by: dict[str, list[int]] = {"faster": [], "slower": [], "no clear difference": []}
    for r in rows:
        by[_side(r["ratios"], margin)].append(r["batch_per_thread"])
    return {k: v for k, v in by.items() if v}


def gil_by_rounds_said(rows: list[dict], margin: float = MARGIN) -> str:
    """:func:`gil_by_rounds` said: ``slower [1, 4]; no clear difference [16]``, each side a message ending in the
    ones after it (02)."""
    said = ""
    for side, batches in reversed(gil_by_rounds(rows, margin).items()):
        b = ", ".join(str(n) for n in batches)
        if said:
            said = (tr("02.gil_faster_more", "faster [{batches}]; {more}", batches=b, more=said) if side == "faster"
                    else tr("02.gil_slower_more", "slower [{batches}]; {more}", batches=b, more=said)
                    if side == "slower" else
                    tr("02.gil_no_clear_more", "no clear difference [{batches}]; {more}", batches=b, more=said))
        else:
            said = (tr("02.gil_faster", "faster [{batches}]", batches=b) if side == "faster" else
                    tr("02.gil_slower", "slower [{batches}]", batches=b) if side == "slower" else
                    tr("02.gil_no_clear", "no clear difference [{batches}]", batches=b))
    return said


def amdahl_cap(serial_share: float, workers: int = 2) -> float:
    """Amdahl's bound: the most ``workers`` can speed up work of which ``serial_share`` stays on one (02)."""
    return 1 / (serial_share + (1 - serial_share) / workers)


def parallel_apply_here() -> str:
    """What ``torch.nn.parallel.parallel_apply`` does on this machine with two CPU modules: its error, or "ran" (02).

    An error comes with the line of ``parallel_apply.py`` it came through, read from its traceback.
    """
    import traceback

    from torch.nn.parallel import parallel_apply

    m = nn.Linear(3, 2)
    try:
        parallel_apply([m, m], [(torch.zeros(1, 3),), (torch.zeros(1, 3),)])
    except Exception as e:  # noqa: BLE001 - the message is what the notebook shows
        frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename.endswith("parallel_apply.py")]
        error = f"{type(e).__name__}: {str(e).split('. ')[0].rstrip('.')}"
        if not frames:
            return error
        return tr("02.raised_through", "{error} (raised through parallel_apply.py line {line}: {code})", error=error,
                  line=frames[-1].lineno, code=frames[-1].line)
    return tr("02.parallel_apply_ran", "ran")
