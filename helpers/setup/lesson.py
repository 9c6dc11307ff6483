"""Notebook 00 (setup): its exercises. The code it teaches is the course's core: device, data, models, train."""
from __future__ import annotations

from typing import Callable

from ..core.checks import Exercise
from ..core.i18n import tr
from .readings import libgomp_spin_count, openmp_runtime  # noqa: F401  (section 3's OpenMP check)

NOTEBOOK = "00_setup"


class _UsedTheReference(Exception):
    """Raised by the stand-in for the course's evaluate() while a student's accuracy() runs."""


def _accuracy_behaviour(accuracy: Callable) -> str | None:
    """The student's ``accuracy(model, loader)`` on several models and loaders, counted by rule, with the course's
    ``evaluate`` out of reach and autograd watched (00). One model has BatchNorm and is handed over in training mode
    (a function without ``model.eval()`` answers differently), and again in evaluation mode, to go back in it (an
    unconditional ``model.train()`` at the end fails); one DigitsCNN comes with its ``features`` frozen
    (``requires_grad=False``, as notebook 07 freezes a backbone), and must go back so: a function that freezes every
    parameter and then unfreezes them all fails; where a GPU or MPS exists, one model sits there (a function that
    does not send batches to the model's device fails). Each model must come back on the device, and with the
    parameter values and dtypes, and the buffers (BatchNorm's running statistics), it came with (``model.to("cpu")``
    fails where a GPU exists). Every expected fraction is counted before the student's function runs, by a local
    loop that no module exposes."""
    import copy

    import torch
    from torch import nn
    from torch.utils.data import DataLoader, Subset

    from ..core.data import load_datasets
    from ..core.device import get_device, model_device
    from ..core.models import MLP, DigitsCNN
    from ..core.saved import SavedTensorTracker

    def counted(model, loader) -> tuple[float, float]:   # (eval mode, train mode) on a copy: BatchNorm stats kept
        model = copy.deepcopy(model)
        dev = next(model.parameters()).device
        out = []
        for mode in (False, True):
            model.train(mode)
            right = seen = 0
            with torch.no_grad():
                for x, y in loader:
                    right += (model(x.to(dev)).argmax(1).cpu() == y).sum().item()
                    seen += len(y)
            out.append(right / seen)
        return out[0], out[1]

    def frozen_features() -> nn.Module:   # a frozen backbone and a trainable head, as notebook 07 trains one
        model = DigitsCNN()
        model.features.requires_grad_(False)
        return model

    def with_batchnorm() -> nn.Module:
        return nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 10))

    ds = load_datasets("digits")
    accel = get_device()
    cases = [(lambda: DigitsCNN(), DataLoader(ds["val"], batch_size=64),
              tr("lesson.accuracy_no_grad.case_cnn", "an untrained DigitsCNN, batches of 64"), True),
             (lambda: MLP(), DataLoader(ds["test"], batch_size=100),
              tr("lesson.accuracy_no_grad.case_mlp", "an untrained MLP, batches of 100"), True),
             (lambda: DigitsCNN(hidden=16), DataLoader(Subset(ds["train"], range(77)), batch_size=32),
              tr("lesson.accuracy_no_grad.case_small", "a small DigitsCNN on 77 samples, batches of 32"), True),
             (with_batchnorm, DataLoader(ds["val"], batch_size=50), tr("lesson.accuracy_no_grad.case_bn_train",
              "an untrained MLP with BatchNorm, handed over in training mode, batches of 50"), True),
             (with_batchnorm, DataLoader(ds["test"], batch_size=128), tr("lesson.accuracy_no_grad.case_bn_eval",
              "an untrained MLP with BatchNorm, handed over in evaluation mode, batches of 128"), False),
             (frozen_features, DataLoader(ds["val"], batch_size=64), tr("lesson.accuracy_no_grad.case_frozen",
              "a DigitsCNN whose features are frozen (requires_grad=False), batches of 64"), True)]
    if accel.type != "cpu":
        cases.append((lambda: DigitsCNN().to(accel), DataLoader(ds["val"], batch_size=64),
                      tr("lesson.accuracy_no_grad.case_accel", "an untrained DigitsCNN on {device}, batches of 64 "
                         "from a loader on the CPU", device=str(accel)), True))
    models, expected = [], []
    for seed, (make, loader, what, _) in enumerate(cases):
        torch.manual_seed(seed)
        models.append(make())
        expected.append(counted(models[-1], loader))
    from ..core.train import evaluate_refused  # imported here: importing the lesson stays light
    with evaluate_refused(_UsedTheReference) as calls:
        for model, (eval_frac, train_frac), (_, loader, what, came_training) in zip(models, expected, cases):
            model.train(came_training)
            came_on = model_device(model)
            came_as = [(p.device, p.dtype, p.detach().clone()) for p in model.parameters()]
            came_grad = [p.requires_grad for p in model.parameters()]
            came_bufs = [(b.device, b.dtype, b.detach().clone()) for b in model.buffers()]   # BatchNorm's statistics
            try:
                with SavedTensorTracker() as tracker:
                    got = accuracy(model, loader)
            except _UsedTheReference:
                got = None
            finally:
                grad_was_on = torch.is_grad_enabled()
                torch.set_grad_enabled(True)
            if calls:
                return tr("00.uses_evaluate", "your function calls the course's evaluate(): the exercise is to "
                          "write what evaluate() does, with your own loop")
            if not grad_was_on:
                return tr("00.left_grad_off", "your function switched autograd off and left it off: after it "
                          "returns, no training step anywhere in this process would build a graph. Switch it "
                          "off only inside your function (a with block restores it)")
            if not isinstance(got, (float, int)) or isinstance(got, bool):
                return tr("00.not_a_number", "for {what}, your function returned a {type}; return a Python number "
                          "(a one-element tensor's .item() is one)", what=what, type=type(got).__name__)
            bufs_changed = any(b.device != d or b.dtype != t or not torch.equal(b.detach(), v)
                               for b, (d, t, v) in zip(model.buffers(), came_bufs))
            changed_bufs = tr("00.changed_buffers", "for {what}, your function changed the model's buffers "
                              "(BatchNorm's running statistics, which a forward in training mode updates): "
                              "evaluation only reads them. Hand them back as they came", what=what)
            if abs(got - eval_frac) > 1e-9:
                if abs(got - train_frac) <= 1e-9 and abs(eval_frac - train_frac) > 1e-9:
                    return tr("00.train_mode", "for {what}, your function returned what the model predicts in "
                              "training mode; which mode does evaluation use?", what=what)
                if bufs_changed:
                    return changed_bufs
                return tr("00.not_the_fraction", "for {what}, your function returned {got:.4g}, which is not the "
                          "fraction of those samples whose largest output is the label", what=what, got=float(got))
            if tracker.peak > 0:
                return tr("00.kept_graph", "it kept {bytes:,} bytes of activations for a backward pass that "
                          "evaluation never runs: no graph is needed here", bytes=tracker.peak)
            if not came_training and any(m.training for m in model.modules()):
                return tr("00.left_train", "for {what}, your function handed the model back in training mode; it "
                          "came in evaluation mode, as a model that is only being evaluated does. Hand it back in the "
                          "mode it came in", what=what)
            if came_training and not all(m.training for m in model.modules()):
                return tr("00.left_eval", "for {what}, your function handed the model back in evaluation mode; "
                          "it came in training mode, and the training that goes on after your function would run "
                          "its layers as in evaluation. Hand it back in the mode it came in", what=what)
            now_grad = [p.requires_grad for p in model.parameters()]
            frozen = sum(was and not now for was, now in zip(came_grad, now_grad))
            unfrozen = sum(now and not was for was, now in zip(came_grad, now_grad))
            if unfrozen:
                return tr("00.unfroze_params", "for {what}, your function handed {n} of the model's parameter tensors "
                          "back with requires_grad=True; they came frozen (requires_grad=False), and training would "
                          "now update them, as it would a backbone that notebook 07 freezes. Leave each parameter's "
                          "requires_grad as it came", what=what, n=unfrozen)
            if frozen:
                return tr("00.froze_params", "for {what}, your function left {n} of the model's parameter tensors "
                          "with requires_grad=False: training would no longer update them. Leave the model's "
                          "parameters as they came", what=what, n=frozen)
            if model_device(model) != came_on:
                return tr("00.moved_model", "for {what}, your function handed the model back on {now}; it came on "
                          "{came}, where the training that goes on after your function expects it. Send the batches "
                          "to the model's device, not the model to where the batches are", what=what,
                          now=str(model_device(model)), came=str(came_on))
            if any(p.device != d or p.dtype != t or not torch.equal(p.detach(), v)
                   for p, (d, t, v) in zip(model.parameters(), came_as)):
                return tr("00.changed_params", "for {what}, your function changed the model's parameters (their "
                          "values, dtype or device): evaluation only reads them. Hand them back as they came", what=what)
            if bufs_changed:
                return changed_bufs
    return None


EXERCISES = [
    Exercise("00.threads_3_on_16", "int", digest="fa80b2475d6f28ed7f9b935f72876aaf7a3f536ea60c351a5bd62cde480fd2c6",
             hint="Every thread of every process needs a core of its own: how many threads in all may the processes "
                  "run, and what share of them may each take without going over?",
             why="More threads than cores take turns on them; the rounding goes down, leaving a core idle rather "
                 "than oversubscribed."),
    Exercise("00.gpus_visible_2_0_3", "ints", digest="24dcb037b85061247d7376a490d08ac869f5f0fff3fc5bc96b8a318bd3c68a4a",
             hint="Write down the list of GPUs this process can see, in the variable's order; then count and number "
                  "that list the way section 2 says torch does.",
             why="Launchers such as Ray give each worker its GPUs this way: inside, torch numbers the listed GPUs "
                 "from 0 in the listed order, whatever their numbers outside."),
    Exercise("00.params_hidden128", "int", digest="87f5a9c253ba0d5f7aa79c59027ee19bc43f32d9d83f422477e20ac25383b545",
             hint="In print(model), which layer's input size comes from the pooled feature maps? Work out the shape "
                  "Flatten would hand it without the pool; a Linear has in·out weights plus out biases.",
             why="The 2×2 pool quarters what the first Linear (`features.6`, just before the ReLU that ends "
                 "`features`) sees, and that Linear holds most of the model's parameters."),
    Exercise("00.batches_of_100", "int", digest="4ece535d08f61c2076c37aaf4e2a68b64213ce729ebb5f051d1269cc8f58590a",
             hint="How many training samples are there, and how many whole batches of 100 do they fill? See what "
                  "DataLoader's drop_last argument does with the rest.",
             why="With drop_last=True every batch is full, and the samples left over are skipped; the shuffle "
                 "decides which ones, so each epoch skips different ones."),
    Exercise("00.accuracy_no_grad", "code", behaviour=_accuracy_behaviour,
             hint="What does autograd keep while a forward runs, and which context tells it not to? Batches go "
                  "where the model is; a prediction is the class with the largest output, and the last batch can "
                  "be smaller than the others. Which of a model's layers behave differently in evaluation?",
             why="Without a graph, evaluation keeps no activations for a backward pass (the check measured what "
                 "autograd kept while your function ran). "
                 "On a machine with no GPU or MPS, the check had no second device to put a model on, so it could not "
                 "test that your batches go where the model is; on one that has, it does."),
]


def threads_verdict(runs: list[tuple[int, float]], default: int, outlier: float = 1.5,
                    wait_policy: str | None = None) -> tuple[int, str]:
    """Section 3's reading of ``(threads, seconds)`` runs: every run printed, and a winner only when the faster
    count's slowest run beats the other count's fastest; otherwise no clear difference, and ``default`` (00).
    With *a* and *b* runs, a split that clean happens by chance, if every run's time were drawn alike whatever the
    count, in 2 of the C(a + b, a) equally likely orderings (either count all below): the exact two-sided
    Mann–Whitney p-value of a complete separation, printed. Each count's median is printed, and every run slower
    than ``outlier`` times its count's median is named. With ``wait_policy`` (the OMP_WAIT_POLICY the runs had), the
    verdict says it holds for that policy and names more than one thread's unmeasured costs (the slowest thread of each
    parallel region; under PASSIVE, waking). First k runs each slower than all later ones (2 <= k <= n-2): with 1/C(n, k)."""
    import math
    import statistics

    by = {}
    for n, s in runs:
        by.setdefault(n, []).append(s)
    shown = "\n".join(f"{n} thread(s), s per epoch in time order: " + ", ".join(f"{s:.3f}" for s in ss)
                      + f" (median {statistics.median(ss):.3f})" for n, ss in by.items())
    for n, ss in by.items():   # a trend in time: the first k >= 2 runs each slower than every later one (k largest)
        k = max((k for k in range(2, len(ss) - 1) if min(ss[:k]) > max(ss[k:])), default=0)
        if k:   # k = 1 (first run slowest) and k = n - 1 (last run fastest) happen by chance 1 time in n: not printed
            shown += (f"\nthe first {k} run(s) of {n} thread(s) were each slower than all {len(ss) - k} later ones "
                      f"(a trend in time, such as warm-up or drift, would do this; so would chance, 1 time in "
                      f"{math.comb(len(ss), k)} for the first {k} of {len(ss)} if the runs are exchangeable)")
    slow_runs = [f"run {i + 1} of {n} thread(s) ({s:.3f} s, {s / statistics.median(ss):.1f}× that count's median)"
                 for n, ss in by.items() for i, s in enumerate(ss) if s > outlier * statistics.median(ss)]
    if slow_runs:   # the clean-split rule cannot set such a run aside: it alone can make the counts overlap
        shown += (f"\nover {outlier:g}× its count's median: " + "; ".join(slow_runs)
                  + " (what slowed it is not measured here)")
    if len(by) < 2:
        return default, f"{shown}\none count only, nothing to compare; training keeps {default} thread(s)"
    fast, slow = sorted(by, key=lambda n: min(by[n]))
    a, b = len(by[fast]), len(by[slow])
    orders = math.comb(a + b, a)
    chance = (f"with {a} and {b} runs, equally fast counts would split this cleanly by chance 2 times in {orders} "
              f"({200 / orders:.1f} %), if the runs are exchangeable, which a trend in time breaks")
    policy = ""
    if wait_policy is not None:
        policy = f"; this holds for OMP_WAIT_POLICY={wait_policy}"
        wake = "a sleeping OpenMP thread must be woken, and " if wait_policy.upper() == "PASSIVE" else ""
        policy += (f" (with more than one thread, {wake}each parallel region waits for its slowest thread, which "
                   f"another program can keep off a CPU; {'neither cost is' if wake else 'this cost is not'} "
                   f"measured here)")
        policy += "; other policies are not measured here"
    if max(by[fast]) < min(by[slow]):
        return fast, (f"{shown}\n{fast} thread(s) faster in every run ({max(by[fast]):.3f} s slowest against "
                      f"{min(by[slow]):.3f} s fastest; {chance}){policy}: used for the training run below")
    return default, (f"{shown}\nno clear difference (the runs overlap; a clean split is required, which "
                     f"{chance.replace('this cleanly', 'so')}){policy}: the training run below keeps the default, "
                     f"{default} thread(s)")


def cpu_pressure_total(path: str = "/proc/pressure/cpu") -> int | None:
    """The "some" line's ``total`` of Linux PSI (https://docs.kernel.org/accounting/psi.html), in microseconds since
    boot: each CPU's time with a runnable task waiting for it, averaged over the CPUs weighted by their non-idle
    time (psi.c's header comment), not the time in which some task waited anywhere; None where the file is missing
    (not Linux, a kernel without PSI, or PSI off at boot: psi=0, or CONFIG_PSI_DEFAULT_DISABLED without psi=1, as
    psi.c's psi_proc_init creates /proc/pressure only when PSI is on) or unreadable (00)."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("some "):
                    return int(dict(kv.split("=") for kv in line.split()[1:])["total"])
    except (OSError, KeyError, ValueError):
        return None
    return None


def pressure_meaning(stalled_us: int, wall_s: float, steal_ticks: int | None = None, hz: int = 100,
                     cpus: int = 1) -> str:
    """What PSI's CPU "some" time during section 3's timed runs says about them, generated from the numbers (00).
    The system-wide "some" total is a per-CPU average: each CPU's time with a task waiting for it, weighted by that
    CPU's non-idle time (psi.c's header comment), so a wait on one of several non-idle CPUs counts for a fraction of
    its length and the share is no upper bound on the waiting; it does not say whose tasks waited, and /proc/pressure
    is the whole system's. Steal (``steal_ticks`` of ``1/hz`` s summed over ``cpus``; None where it was not read),
    time a virtual machine's CPUs spent in other operating systems, is not in it and is said beside it."""
    share = round(stalled_us / 1e6 / wall_s, 4) if wall_s > 0 else 0.0   # as printed, so 1% is judged as shown
    head = (f"waiting for a CPU during the timed runs ({wall_s:.2f} s): PSI's CPU \"some\" time grew by "
            f"{stalled_us / 1e3:.1f} ms ({share:.2%} of the time)")
    if steal_ticks is None:
        steal_share = None
        head += "; steal time, which PSI does not count, is not read here (no /proc/stat steal column)"
    else:
        steal_share = round(steal_ticks / hz / (wall_s * cpus), 4) if wall_s > 0 else 0.0
        tick = 1e3 / hz   # each reading is the all-CPU total cut down to whole ticks: the change is within ±1 tick
        spent = (f"under {tick:.0f} ms" if steal_ticks == 0 else
                 f"between {(steal_ticks - 1) * tick:.0f} and {(steal_ticks + 1) * tick:.0f} ms")
        head += (f"; steal time, which PSI does not count: {steal_ticks} tick(s) of {tick:.0f} ms ({spent}), "
                 f"{steal_share:.2%} of the {cpus} CPU(s)' time")
    other = "other CPU was" if cpus == 2 else "others were"
    note = ("\n(both counters are the whole system's and do not say whose tasks waited; " +
            (f"PSI is a per-CPU average weighted by non-idle time: with {cpus} CPUs, a task waiting on one adds "
             f"its wait times that CPU's share of all {cpus} CPUs' non-idle time: all of it if the {other} idle, "
             f"1/{cpus} if all were equally busy, less if the {other} busier, so the share is no upper bound on the runs' waiting)"
             if cpus > 1 else
             "with one CPU, PSI's time is that CPU's own: the time in which some task waited for it)"))
    if share < 0.01 and steal_share is not None and steal_share < 0.01:
        return f"{head}: both shares are under 1%{note}"
    if share < 0.01 and steal_share is None:
        return f"{head}: PSI's share is under 1%; what a hypervisor took, if any, is not known{note}"
    if steal_share is None:
        big = f"PSI's share ({share:.2%}) is not small (1% or more)"
    elif share >= 0.01 and steal_share >= 0.01:
        big = f"neither share is small (1% or more: PSI's {share:.2%}, steal's {steal_share:.2%})"
    elif share >= 0.01:
        big = f"PSI's share ({share:.2%}) is not small (1% or more); steal's is {steal_share:.2%}"
    else:
        big = f"steal's share ({steal_share:.2%}) is not small (1% or more); PSI's is {share:.2%}"
    return f"{head}: {big}, so some of the runs' time may have gone to waiting for a CPU (which thread count's, not known){note}"
