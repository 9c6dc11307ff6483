"""Notebook 00 (setup), section 3: which thread count trained faster, and whether the timed runs waited for a CPU
(PSI and steal time), each said from the numbers in the course's language."""
from __future__ import annotations

from ..core.i18n import tr


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
    shown = "\n".join(tr("setup.runs", "{n} thread(s), s per epoch in time order: {times} (median {median})", n=n,
                          times=", ".join(f"{s:.3f}" for s in ss), median=f"{statistics.median(ss):.3f}")
                       for n, ss in by.items())
    for n, ss in by.items():   # a trend in time: the first k >= 2 runs each slower than every later one (k largest)
        k = max((k for k in range(2, len(ss) - 1) if min(ss[:k]) > max(ss[k:])), default=0)
        if k:   # k = 1 (first run slowest) and k = n - 1 (last run fastest) happen by chance 1 time in n: not printed
            shown += "\n" + tr("setup.trend", "the first {k} run(s) of {n} thread(s) were each slower than all {later} "
                               "later ones (a trend in time, such as warm-up or drift, would do this; so would chance, "
                               "1 time in {comb} for the first {k} of {runs} if the runs are exchangeable)", k=k, n=n,
                               later=len(ss) - k, comb=math.comb(len(ss), k), runs=len(ss))
    slow_runs = [tr("setup.slow_run", "run {i} of {n} thread(s) ({s} s, {x}× that count's median)", i=i + 1, n=n,
                    s=f"{s:.3f}", x=f"{s / statistics.median(ss):.1f}")
                 for n, ss in by.items() for i, s in enumerate(ss) if s > outlier * statistics.median(ss)]
    if slow_runs:   # the clean-split rule cannot set such a run aside: it alone can make the counts overlap
        shown += "\n" + tr("setup.slow_runs", "over {outlier}× its count's median: {runs} (what slowed it is not "
                           "measured here)", outlier=f"{outlier:g}", runs="; ".join(slow_runs))
    if len(by) < 2:
        return default, shown + "\n" + tr("setup.one_count", "one count only, nothing to compare; training keeps "
                                          "{keep} thread(s)", keep=default)
    fast, slow = sorted(by, key=lambda n: min(by[n]))
    a, b = len(by[fast]), len(by[slow])
    orders = math.comb(a + b, a)
    chance = dict(a=a, b=b, orders=orders, pct=f"{200 / orders:.1f}")
    if max(by[fast]) < min(by[slow]):
        said = tr("setup.faster", "{fast} thread(s) faster in every run ({slowest} s slowest against {fastest} s "
                  "fastest; {chance})", fast=fast, slowest=f"{max(by[fast]):.3f}", fastest=f"{min(by[slow]):.3f}",
                  chance=tr("setup.chance", "with {a} and {b} runs, equally fast counts would split this cleanly by "
                            "chance 2 times in {orders} ({pct} %), if the runs are exchangeable, which a trend in time "
                            "breaks", **chance))
    else:
        said = tr("setup.no_difference", "no clear difference (the runs overlap; a clean split is required, which "
                  "{chance})", chance=tr("setup.chance_so", "with {a} and {b} runs, equally fast counts would split so "
                                         "by chance 2 times in {orders} ({pct} %), if the runs are exchangeable, which a "
                                         "trend in time breaks", **chance))
    if wait_policy is not None and wait_policy.upper() == "PASSIVE":   # each part a message around the one before
        said = tr("setup.policy_passive", "{said}; this holds for OMP_WAIT_POLICY={policy} (with more than one thread, a "
                  "sleeping OpenMP thread must be woken, and each parallel region waits for its slowest thread, which "
                  "another program can keep off a CPU; neither cost is measured here); other policies are not measured "
                  "here", said=said, policy=wait_policy)
    elif wait_policy is not None:
        said = tr("setup.policy", "{said}; this holds for OMP_WAIT_POLICY={policy} (with more than one thread, each "
                  "parallel region waits for its slowest thread, which another program can keep off a CPU; this cost is "
                  "not measured here); other policies are not measured here", said=said, policy=wait_policy)
    if max(by[fast]) < min(by[slow]):
        return fast, shown + "\n" + tr("setup.use_fast", "{said}: {fast} thread(s) used for the training run below",
                                        said=said, fast=fast)
    return default, shown + "\n" + tr("setup.keep_default", "{said}: the training run below keeps the default, {keep} "
                                      "thread(s)", said=said, keep=default)


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
    if steal_ticks is None:
        steal_share = None
        steal = tr("setup.steal_unread", "; steal time, which PSI does not count, is not read here (no /proc/stat steal "
                   "column)")
    else:
        steal_share = round(steal_ticks / hz / (wall_s * cpus), 4) if wall_s > 0 else 0.0
        tick = 1e3 / hz   # each reading is the all-CPU total cut down to whole ticks: the change is within ±1 tick
        spent = (tr("setup.steal_under", "under {tick} ms", tick=f"{tick:.0f}") if steal_ticks == 0 else
                 tr("setup.steal_between", "between {low} and {high} ms", low=f"{(steal_ticks - 1) * tick:.0f}",
                    high=f"{(steal_ticks + 1) * tick:.0f}"))
        steal = tr("setup.steal", "; steal time, which PSI does not count: {ticks} tick(s) of {tick} ms ({spent}), "
                   "{share} of the {cpus} CPU(s)' time", ticks=steal_ticks, tick=f"{tick:.0f}", spent=spent,
                   share=f"{steal_share:.2%}", cpus=cpus)
    head = tr("setup.psi_head", "waiting for a CPU during the timed runs ({wall} s): PSI's CPU \"some\" time grew by "
              "{ms} ms ({share} of the time){steal}", wall=f"{wall_s:.2f}", ms=f"{stalled_us / 1e3:.1f}",
              share=f"{share:.2%}", steal=steal)
    note = "\n" + (tr("setup.psi_note_one", "(both counters are the whole system's and do not say whose tasks waited; "
                      "with one CPU, PSI's time is that CPU's own: the time in which some task waited for it)")
                   if cpus <= 1 else tr(
                       "setup.psi_note_two", "(both counters are the whole system's and do not say whose tasks waited; "
                       "PSI is a per-CPU average weighted by non-idle time: with {cpus} CPUs, a task waiting on one adds "
                       "its wait times that CPU's share of all {cpus} CPUs' non-idle time: all of it if the other CPU was "
                       "idle, 1/{cpus} if all were equally busy, less if the other CPU was busier, so the share is no "
                       "upper bound on the runs' waiting)", cpus=cpus) if cpus == 2 else tr(
                       "setup.psi_note_many", "(both counters are the whole system's and do not say whose tasks waited; "
                       "PSI is a per-CPU average weighted by non-idle time: with {cpus} CPUs, a task waiting on one adds "
                       "its wait times that CPU's share of all {cpus} CPUs' non-idle time: all of it if the others were "
                       "idle, 1/{cpus} if all were equally busy, less if the others were busier, so the share is no upper "
                       "bound on the runs' waiting)", cpus=cpus))
    if share < 0.01 and steal_share is not None and steal_share < 0.01:
        return tr("setup.psi_both_small", "{head}: both shares are under 1%", head=head) + note
    if share < 0.01 and steal_share is None:
        return tr("setup.psi_small_unknown", "{head}: PSI's share is under 1%; what a hypervisor took, if any, is not "
                  "known", head=head) + note
    shares = dict(head=head, psi=f"{share:.2%}", steal=f"{steal_share:.2%}" if steal_share is not None else "")
    if steal_share is None:   # each verdict whole, so that the stored Korean output can find where {head} ends
        return tr("setup.big_psi_only", "{head}: PSI's share ({psi}) is not small (1% or more), so some of the runs' "
                  "time may have gone to waiting for a CPU (which thread count's, not known)", **shares) + note
    if share >= 0.01 and steal_share >= 0.01:
        return tr("setup.big_both", "{head}: neither share is small (1% or more: PSI's {psi}, steal's {steal}), so some "
                  "of the runs' time may have gone to waiting for a CPU (which thread count's, not known)", **shares) + note
    if share >= 0.01:
        return tr("setup.big_psi", "{head}: PSI's share ({psi}) is not small (1% or more); steal's is {steal}, so some of "
                  "the runs' time may have gone to waiting for a CPU (which thread count's, not known)", **shares) + note
    return tr("setup.big_steal", "{head}: steal's share ({steal}) is not small (1% or more); PSI's is {psi}, so some of "
              "the runs' time may have gone to waiting for a CPU (which thread count's, not known)", **shares) + note
