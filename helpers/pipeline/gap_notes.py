"""Two of ``gap_lines``' sentences: each m's estimates of the gap's parts, and the last line, where the estimates
together overshoot the gap, fall short of it, or span it (01)."""
from __future__ import annotations

from ..core.i18n import tr

__all__: list[str] = []


def _estimates_line(p_ms: float, o_ms: float, other_ms: float, msg1_ms: float, raw_ms: float, timed: bool) -> str:
    """The pieces' estimate and the step's parts outside its compute (m = 1's ``other_ms`` less its two messages'
    ``msg1_ms`` where they were ``timed``: ``raw_ms``, counted +0.0 below zero), in ms (01)."""
    said = dict(p=p_ms, o=o_ms, other=other_ms, msg=msg1_ms, raw=raw_ms)
    if raw_ms >= 0 and timed:
        return tr("01.gap_est", "        estimates in ms (not shares of the gap): the pieces, each stage's as they "
                  "took, through the bound's formula: {p:+.1f}; the step's parts outside its compute, if they took "
                  "m = 1's (those other ms less its two messages): {o:+.1f}", **said)
    if raw_ms >= 0:
        return tr("01.gap_est_untimed", "        estimates in ms (not shares of the gap): the pieces, each stage's as "
                  "they took, through the bound's formula: {p:+.1f}; the step's parts outside its compute, if they "
                  "took m = 1's (those other ms, messages included): {o:+.1f}", **said)
    if timed:
        return tr("01.gap_est_below", "        estimates in ms (not shares of the gap): the pieces, each stage's as "
                  "they took, through the bound's formula: {p:+.1f}; the step's parts outside its compute: not "
                  "estimated, counted +0.0 (m = 1's other {other:.1f} ms less its two messages' {msg:.1f} ms is "
                  "{raw:+.1f}, below zero: the messages cost less inside the step than alone)", **said)
    return tr("01.gap_est_below_untimed", "        estimates in ms (not shares of the gap): the pieces, each stage's "
              "as they took, through the bound's formula: {p:+.1f}; the step's parts outside its compute: not "
              "estimated, counted +0.0 (m = 1's other {other:.1f} ms is {raw:+.1f}, below zero: the messages cost "
              "less inside the step than alone)", **said)


def _clause(kind: str, rest: str, **f) -> str:
    """One clause of ``_residual_line``, the clauses after it (``rest``, said already) its last field: each clause
    a message whose own text comes before the next one's, so a stored line is said again clause by clause (01)."""
    if kind == "over":
        return tr("01.res_over", "by the medians the estimates together overshoot the gap at m = {ms} "
                  "({by}){rest}", rest=rest, **f)
    if kind in ("short", "short_after"):
        return (tr("01.res_short", "by the medians the estimates together fall short of the gap at m = {ms} "
                   "({by}){rest}", rest=rest, **f) if kind == "short" else
                tr("01.res_short_after", "; by the medians the estimates together fall short of the gap at m = {ms} "
                   "({by}){rest}", rest=rest, **f))
    if kind == "noise":
        return tr("01.res_noise", "; at m = {ms} by no more than that m's rounds' spread (slowest less fastest step: "
                  "{sp} ms), so this run shows no difference between the gap and the estimates there{rest}",
                  rest=rest, **f)
    if kind == "real":
        return tr("01.res_real", "; at m = {ms} by more than that m's rounds' spread ({sp} ms): what would make them "
                  "overshoot is a cost in m = 1's step that this m's step does not pay, and no event here times "
                  "one{rest}", rest=rest, **f)
    if kind == "real_out":
        return tr("01.res_real_out", "; at m = {ms} by more than that m's rounds' spread ({sp} ms): the outside term "
                  "is m = 1's difference of medians, itself an estimate; what would make them overshoot is a cost in "
                  "m = 1's step that this m's step does not pay, and no event here times one{rest}", rest=rest, **f)
    if kind == "noise_real":   # one message: a shorter "noise" before a longer "real" would be cut at the wrong "at m"
        return tr("01.res_noise_real", "; at m = {ms} by no more than that m's rounds' spread (slowest less fastest "
                  "step: {sp} ms), so this run shows no difference between the gap and the estimates there; at "
                  "m = {ms2} by more than that m's rounds' spread ({sp2} ms): what would make them overshoot is a "
                  "cost in m = 1's step that this m's step does not pay, and no event here times one{rest}",
                  rest=rest, **f)
    if kind == "noise_real_out":
        return tr("01.res_noise_real_out", "; at m = {ms} by no more than that m's rounds' spread (slowest less "
                  "fastest step: {sp} ms), so this run shows no difference between the gap and the estimates there; "
                  "at m = {ms2} by more than that m's rounds' spread ({sp2} ms): the outside term is m = 1's "
                  "difference of medians, itself an estimate; what would make them overshoot is a cost in m = 1's "
                  "step that this m's step does not pay, and no event here times one{rest}", rest=rest, **f)
    if kind == "fit":
        return tr("01.res_fit", "; at m = {ms} the pieces and the messages alone span the gap: by these estimates, "
                  "the step's parts outside its compute added less there than m = 1's {o:+.1f} ms{rest}",
                  rest=rest, **f)
    if kind == "inside":
        return tr("01.res_inside", "; at m = {ms} by no more than that m's rounds' spread (slowest less fastest step: "
                  "{sp} ms), so this run does not show a cost beyond the estimates there{rest}", rest=rest, **f)
    if kind == "beyond":
        return tr("01.res_beyond", "; at m = {ms} by more than that m's rounds' spread ({sp} ms): nothing timed here "
                  "accounts for the rest{rest}", rest=rest, **f)
    return (tr("01.res_within", "at m = {ms} the gap lies within the estimates' range", **f) if kind == "within" else
            tr("01.res_within_after", "; at m = {ms} the gap lies within the estimates' range", **f))


def _residual_line(residuals: list[tuple[int, float, float, float]]) -> str:
    """Where the estimates together overshoot the gap, fall short of it, or span it; ``gap_lines``' last line (01).

    Each entry: m, the gap less the estimates with all 2m messages and with the 2 (lo ≤ hi), the
    outside term o, and the spread of that m's step rounds (slowest less fastest, ms). Where they overshoot
    and the gap lies within the estimates without o (lo + o ≤ 0 ≤ hi + o), the step's parts outside its
    compute added less than o there, by these estimates. An overshoot or a shortfall is a difference of
    medians: a difference between the gap and the estimates is said only where it exceeds that m's rounds' spread.
    """
    def ms(group: list) -> str:
        return ", ".join(str(e[0]) for e in group)

    def by(lo: float, hi: float) -> str:
        return tr("01.res_by", "by {lo:.1f} ms", lo=lo) if lo == hi else \
            tr("01.res_by_range", "by {lo:.1f} to {hi:.1f} ms", lo=lo, hi=hi)

    def spreads(group: list) -> str:
        return ", ".join(f"{e[4]:.1f}" for e in group)
    over = [e for e in residuals if e[2] < 0]
    short = [e for e in residuals if e[1] > 0]
    within = [e for e in residuals if e[1] <= 0 <= e[2]]
    clauses: list[tuple[str, dict]] = []   # in the order printed, each joined to the one before by "; "
    if over:
        noise = [e for e in over if -e[2] <= e[4]]   # the smallest overshoot within that m's rounds' spread
        real = [e for e in over if e not in noise]
        clauses.append(("over", dict(ms=ms(over), by=by(min(-e[2] for e in over), max(-e[1] for e in over)))))
        out = "_out" if any(e[3] for e in real) else ""
        if noise and real:
            clauses.append(("noise_real" + out, dict(ms=ms(noise), sp=spreads(noise), ms2=ms(real),
                                                     sp2=spreads(real))))
        elif noise:
            clauses.append(("noise", dict(ms=ms(noise), sp=spreads(noise))))
        elif real:
            clauses.append(("real" + out, dict(ms=ms(real), sp=spreads(real))))
        fit = [e for e in real if e[1] + e[3] <= 0 <= e[2] + e[3]]
        if fit:
            clauses.append(("fit", dict(ms=ms(fit), o=fit[0][3])))
    if short:
        beyond = [e for e in short if e[1] > e[4]]
        inside = [e for e in short if e not in beyond]
        clauses.append(("short_after" if clauses else "short",
                        dict(ms=ms(short), by=by(min(e[1] for e in short), max(e[2] for e in short)))))
        if inside:
            clauses.append(("inside", dict(ms=ms(inside), sp=spreads(inside))))
        if beyond:
            clauses.append(("beyond", dict(ms=ms(beyond), sp=spreads(beyond))))
    if within:
        clauses.append(("within_after" if clauses else "within", dict(ms=ms(within))))
    said = ""
    for kind, fields in reversed(clauses):
        said = _clause(kind, said, **fields)   # "within" comes last: nothing after it
    return said
