"""Notebook 02 (inside nn.DataParallel): its exercises and its benchmark."""
from __future__ import annotations

import statistics
from typing import Callable

from ..core.checks import Exercise
from ..core.device import hardware_label
from ..core.i18n import tr
from ..launching.throughput import run_throughput
from .instruments import run_four_steps
from .speed import thread_variants, time_four_steps


NOTEBOOK = "02_data_parallel"


EXERCISES = [
    Exercise("02.gpus_idle_6_on_4", "int", digest="cd0d9dbc98e75c11a68faea66f39c24e0d221c338576a66acfb563f67e2f7d9c",
             hint="Section 2 names the function scatter cuts the batch with. Apply its documented behaviour and "
                  "examples to this batch, count the chunks it gives, and then the replicas DataParallel "
                  "runs on them.",
             why="torch.chunk makes chunks of ceil(n / k) rows, so it can return fewer than k: DataParallel then "
                 "runs only as many replicas as there are chunks."),
    Exercise("02.gathered_bytes", "ints", digest="431a11915f4d24acbedcffc22813df94ccf8736bb79c5bc9a73db5bcf7c1ce98",
             hint="Follow one step: how many rows does scatter give each GPU, where does each replica write its "
                  "chunk's logits, and what does gather add, and where? Count what each GPU holds at that moment.",
             why="The output device holds its own chunk's logits and a copy of every GPU's: five times what each "
                 "other GPU holds, before the loss and the gradients are even computed."),
    Exercise("02.reduce_gradients", "code", behaviour=lambda fn: _reduce_behaviour(fn),
             hint="Each replica's backward left its share of the gradient in its own parameters' .grad; the model "
                  "needs the whole, added to what its .grad already holds (autograd accumulates). Walk the model's "
                  "parameters and the replicas' parameters side by side, and mind .grad tensors that are None.",
             why="That sum is the backward of replicate: autograd does it every step on `device_ids[0]` (the "
                 "output device by default)."),
]


def _reduce_behaviour(reduce_gradients: Callable) -> str | None:
    """The student's ``reduce_gradients(model, replicas)`` against the whole batch's gradients (02).

    Varied cases: uneven chunks, one replica, a frozen parameter (no replica has a gradient for
    it, so the model's ``.grad`` stays as it was: None, or an earlier gradient), a parameter that some replicas only have a gradient for (the
    others' count as nothing), and a model whose ``.grad`` already holds an earlier step's
    gradients: autograd accumulates, so the sum is added.
    """
    import copy

    import torch
    from torch import nn

    for rows, n, frozen, earlier, partial in ((12, 3, False, False, False), (10, 4, False, False, False),
                                              (6, 4, False, False, False), (5, 1, False, False, False),
                                              (9, 2, True, False, False), (8, 2, False, True, False),
                                              (7, 3, True, True, False), (11, 3, False, False, True)):
        torch.manual_seed(rows)
        model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3))
        if frozen:
            model[0].bias.requires_grad_(False)
        x, y = torch.randn(rows, 8), torch.randint(0, 3, (rows,))
        nn.functional.cross_entropy(model(x), y).backward()
        want = [None if p.grad is None else p.grad.clone() for p in model.parameters()]
        model.zero_grad(set_to_none=True)
        replicas = [copy.deepcopy(model) for _ in x.chunk(n)]
        if earlier:  # an earlier step's gradients, not zeroed: the model's .grad keeps them and adds this step's
            for i, (p, w) in enumerate(zip(model.parameters(), want)):
                p.grad = torch.randn_like(p)  # a frozen parameter too: its .grad from before it was frozen stays
                want[i] = p.grad.clone() if w is None else w + p.grad
        for r, xi, yi in zip(replicas, x.chunk(n), y.chunk(n)):  # each chunk's share of the batch-mean loss
            (nn.functional.cross_entropy(r(xi), yi, reduction="sum") / rows).backward()
        if partial:  # the last replica has no gradient for the last bias (as if its chunk never used it)
            last = list(replicas[-1].parameters())[-1]
            want[-1] -= last.grad
            last.grad = None
        kept = [[None if p.grad is None else p.grad.clone() for p in r.parameters()] for r in replicas]
        reduce_gradients(model, replicas)
        where = (tr("lesson.reduce_gradients.where", "with {rows} rows on {n} replica(s)", rows=rows, n=len(replicas))
                 + (tr("lesson.reduce_gradients.where_set", " and .grad already set") if earlier else "")
                 + (tr("lesson.reduce_gradients.where_partial", " and one replica without a gradient for a parameter "
                       "the others have one for") if partial else ""))
        got = [p.grad for p in model.parameters()]
        if frozen and earlier and model[0].bias.grad is None:
            return tr("lesson.reduce_gradients.frozen_set_none", "{where} and a frozen parameter whose .grad was "
                      "already set, your function set it to None; no replica has a gradient for it, so its .grad "
                      "should stay as it was", where=where)
        if any(g is None for g, w in zip(got, want) if w is not None):
            return tr("lesson.reduce_gradients.no_grad", "{where}, some of the model's parameters have no .grad after "
                      "your function", where=where)
        if any(g is not None for g, w in zip(got, want) if w is None):
            return tr("lesson.reduce_gradients.frozen_given_grad", "{where} and a frozen parameter (no replica has a "
                      "gradient for it), your function gave it a .grad; it should stay None", where=where)
        if frozen and earlier and (model[0].bias.grad - want[1]).abs().max().item() > 0:
            return tr("lesson.reduce_gradients.frozen_changed", "{where} and a frozen parameter whose .grad was "
                      "already set, your function changed it; no replica has a gradient for it, so its .grad should "
                      "stay as it was", where=where)
        if max((g - w).abs().max().item() for g, w in zip(got, want) if w is not None) > 1e-6:
            if earlier:
                return tr("lesson.reduce_gradients.differ_added", "{where}, the model's gradients differ from one "
                          "device's on the whole batch added to what .grad held before", where=where)
            return tr("lesson.reduce_gradients.differ", "{where}, the model's gradients differ from one device's on "
                      "the whole batch", where=where)
        for r, ks in zip(replicas, kept):
            for p, q, k in zip(model.parameters(), r.parameters(), ks):
                if (q.grad is None) != (k is None) or (k is not None and (q.grad - k).abs().max().item() > 0):
                    return tr("lesson.reduce_gradients.replicas_changed", "{where}, your function changed the "
                              "replicas' gradients; only the model's should change", where=where)
                if p.grad is not None and q.grad is not None and p.grad.data_ptr() == q.grad.data_ptr():
                    return tr("lesson.reduce_gradients.shared_tensor", "{where}, the model's .grad is a replica's own "
                              "tensor; give the model a tensor of its own (a replica's next backward would change it)",
                              where=where)
    return None


def bench_data_parallel(batch: int = 256) -> dict:
    """DataParallel's four steps timed, the output device's byte share, threads vs processes (02)."""
    steps = time_four_steps(batch=batch)
    share = run_four_steps(batch=batch)["output_device_share"]
    threads = {k: statistics.median(v) for k, v in thread_variants(batch=batch, seconds=0.7).items()}
    procs = run_throughput(nprocs_list=(1, 2), batches=(batch,), seconds=2.0)
    return {"device": hardware_label("cpu", threads=1), "path": steps["path"], "global_batch": batch,
            "step_seconds": {k: round(v, 6) for k, v in steps["step_seconds"].items()},
            "output_device_byte_share": round(share, 4),
            "throughput": {"single": round(threads["single"], 1),
                           "threads_forward_only": round(threads["threads_forward_only"], 1),
                           "threads": round(threads["threads_forward_backward"], 1),
                           "processes": round(next(r["samples_per_s"] for r in procs if r["processes"] == 2), 1)}}


BENCH = {"data_parallel": bench_data_parallel}


def readme_figures(results: dict) -> str:
    """The key figures of notebook 02 for the README's table, from ``bench_data_parallel``'s JSON."""
    d = results["data_parallel"]
    t, s = d["throughput"], d["step_seconds"]
    return (f"batch {d['global_batch']}: apply {1e3 * s['apply']:.1f} ms, backward {1e3 * s['backward']:.1f} ms, "
            f"scatter+replicate+gather {1e3 * (s['scatter'] + s['replicate'] + s['gather']):.2f} ms per step; output "
            f"device {d['output_device_byte_share']:.1%} of the bytes; vs 1 thread: forward-only threads "
            f"{t['threads_forward_only'] / t['single']:.2f}×, forward+backward threads {t['threads'] / t['single']:.2f}×, "
            f"2 processes {t['processes'] / t['single']:.2f}×")
