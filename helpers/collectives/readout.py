"""Notebook 08's ring check, sweep and falling sweep times read out in sentences generated from its numbers (08)."""
from __future__ import annotations

from ..core.i18n import tr

__all__ = ["ring_check_lines", "ring_rank_lines", "falling_time_lines", "sweep_summary", "ratios_at"]


def _size(x: float) -> str:
    return f"{x / 2**20:g} MiB" if x >= 2**20 else f"{x / 2**10:g} KiB"


def ring_check_lines(diffs: dict, names: tuple[str, ...]) -> list[str]:
    """A line for each comparison ``names`` picks from ``run_ring_check``'s numbers: the largest |difference|,
    whether the two are bitwise equal, and how large the values compared are (08)."""
    lines = []
    for name in names:
        if diffs[name] == 0:
            equal = tr("collectives.bitwise_equal", "bitwise equal")
        else:
            equal = tr("collectives.not_bitwise_equal", "not bitwise equal")
        lines.append(tr("collectives.ring_check_row", "{name}: largest |difference| {diff} ({equal}), values up to "
                        "{scale}", name=f"{name:>22}", diff=f"{diffs[name]:.1e}", equal=equal, scale=f"{diffs['scale']:.1f}"))
    return lines


def ring_rank_lines(diffs: dict) -> list[str]:
    """Whether each ring left every rank with the same bits, from ``run_ring_check``'s numbers (08).

    The naive ring has each rank add the n tensors in its own order, starting from its own, so the
    ranks may end with different last bits; in the bandwidth-optimal ring each chunk's sum is one chain
    of additions, one per step on a different rank, finished on one rank, and the all-gather copies
    that result, so every rank holds the same bits.
    """
    n, naive, ring = diffs["world_size"], diffs["naive_between_ranks"], diffs["ring_between_ranks"]
    lines = [tr("collectives.ranks_vs_rank0", "every rank's result against rank 0's, largest |difference|: naive ring "
                "{naive}, ring {ring}", naive=f"{naive:.1e}", ring=f"{ring:.1e}")]
    lines.append(tr("collectives.naive_bits_differ", "  naive ring: the {n} ranks end with different last bits: each "
                    "added the {n} tensors in its own order, so replicas stepping with these sums could differ after "
                    "one step", n=n) if naive > 0 else
                 tr("collectives.naive_bits_same", "  naive ring: the {n} ranks hold the same bits here, though each "
                    "added the {n} tensors in its own order", n=n))
    lines.append(tr("collectives.ring_bits_same", "  ring: every rank holds the same bits: each chunk's sum is one "
                    "chain of additions, finished on one rank, and the all-gather copied it to the others")
                 if ring == 0 else
                 tr("collectives.ring_bits_differ", "  ring: the ranks differ by up to {ring}, which copying finished "
                    "chunks should not give", ring=f"{ring:.1e}"))
    return lines

def ratios_at(pairs: list[tuple[str, int]]) -> str:
    """"×1.00 at 1 KiB, ×1.28 at 4 KiB": each ``(ratio, bytes)`` (the ratio without its "×") a message, the list
    grown on its right (08)."""
    said = ""
    for ratio, size in reversed(pairs):
        said = (tr("collectives.ratio_at_more", "×{ratio} at {size}, {rest}", ratio=ratio, size=_size(size), rest=said)
                if said else tr("collectives.ratio_at", "×{ratio} at {size}", ratio=ratio, size=_size(size)))
    return said


SERIES = {"library_s": "all_reduce", "ring_s": "ring", "step_s": "one step"}


def _series(name: str) -> str:
    """A series' name said in the course's language ("all_reduce", the API's name, stays)."""
    return (tr("collectives.series_ring", "ring") if name == "ring" else
            tr("collectives.series_one_step", "one step") if name == "one step" else name)


def falling_time_lines(sweep: dict, margin: float = 0.15) -> list[str]:
    """Where a timing falls as the message grows, which the α–β model cannot give, and what its repeats can say (08).

    Each time is the best of its repeats, and every repeat times the sizes in turn, in a fresh
    order each repeat, so a raised best means that every repeat at that size was slow, not one passing
    burst of load (however wide the spread between the slowest and the best repeat). The cause is not
    identified by the sweep, so none is named.
    """
    rows = sorted(sweep["sizes"], key=lambda r: r["bytes"])
    drops = [(key, name, lo, hi) for key, name in SERIES.items() if all(key in r for r in rows)
             for lo, hi in zip(rows, rows[1:]) if hi[key] < (1 - margin) * lo[key]]
    if not drops:
        return []
    spread = {(key, lo["bytes"]): lo[key[:-2] + "_worst"] / lo[key] for key, _, lo, _ in drops
              if key[:-2] + "_worst" in lo}
    falls = []   # "ring from 0.99 ms at 16 KiB to 0.82 ms at 64 KiB": each fall a message, joined by "; "
    for key, name, lo, hi in drops:
        fell = dict(name=_series(name), t0=f"{lo[key] * 1e3:.2f}", s0=_size(lo["bytes"]), t1=f"{hi[key] * 1e3:.2f}",
                    s1=_size(hi["bytes"]))
        falls.append(tr("collectives.fell_spread", "{name} from {t0} ms at {s0} to {t1} ms at {s1}, its slowest repeat "
                        "×{x} the best", x=f"{spread[key, lo['bytes']]:.1f}", **fell) if (key, lo["bytes"]) in spread
                     else tr("collectives.fell", "{name} from {t0} ms at {s0} to {t1} ms at {s1}", **fell))
    where = ""   # "the all_reduce at 16 KiB and the ring at 16 KiB"
    for _, name, lo, _ in reversed(drops):
        where = (tr("collectives.fell_where_more", "the {name} at {size} and {rest}", name=_series(name),
                    size=_size(lo["bytes"]), rest=where) if where else
                 tr("collectives.fell_where", "the {name} at {size}", name=_series(name), size=_size(lo["bytes"])))
    return [tr("collectives.time_falls", "a time falls by more than {margin} from one size to the next ({said}; "
               "smaller falls, in the table above, are not listed), which the α–β model, with β > 0, cannot give; each "
               "time is the best of repeats taken in a fresh order, so every repeat of {where} was slow, not one "
               "passing burst of load (the cause is not identified here)", margin=f"{margin:.0%}",
               said="; ".join(falls), where=where)]


def _odd_small(t: dict, b: list, grow: list, small: tuple) -> str:
    """:func:`sweep_summary`'s line on α and β where the small sizes' growth is below ×1 (a falling time)."""
    few = [t[x] for x in b if x <= 256 * 1024]   # up to 256 KiB: 256× the smallest size's bytes
    if len(few) > 2 and max(few) <= 2 * min(few):
        return tr("collectives.alpha_beta_odd_held", "  so small messages pay mostly α, large ones mostly β; the small "
                  "sizes' ×{g} < 1, a {lo} time above the {hi} one, is what no α–β line gives; from {first} to 256 KiB "
                  "({k}× the bytes) every time lies within {t_min}–{t_max} ms (×{spread}), so the verdict does not "
                  "rest on that odd time", g=f"{grow[0]:.1f}", lo=_size(small[0]), hi=_size(small[1]),
                  first=_size(b[0]), k=256 * 1024 // b[0], t_min=f"{min(few) * 1e3:.2f}",
                  t_max=f"{max(few) * 1e3:.2f}", spread=f"{max(few) / min(few):.2f}")
    return tr("collectives.alpha_beta_odd_rests", "  so small messages pay mostly α, large ones mostly β; the small "
              "sizes' ×{g} < 1, a {lo} time above the {hi} one, is what no α–β line gives, so their verdict rests on "
              "that odd time", g=f"{grow[0]:.1f}", lo=_size(small[0]), hi=_size(small[1]))


def sweep_summary(sweep: dict) -> list[str]:
    """What the sweep shows, in sentences generated from its numbers: α's and β's ranges, busbw, buckets (08)."""
    t = {r["bytes"]: r["library_s"] for r in sweep["sizes"]}
    b = sorted(t)
    small, large = (b[0], b[2]), (b[-3], b[-1])  # 1 → 16 KiB and 1 → 16 MiB: 16× the bytes each
    grow = [t[hi] / t[lo] for lo, hi in (small, large)]
    size = _size
    lines = [tr("collectives.growth_16x", "all_reduce time for 16× the bytes: ×{g_small} from {small_lo} to "
                "{small_hi}, ×{g_large} from {large_lo} to {large_hi} (α alone would give ×1, β alone ×16)",
                g_small=f"{grow[0]:.1f}", small_lo=size(small[0]), small_hi=size(small[1]), g_large=f"{grow[1]:.1f}",
                large_lo=size(large[0]), large_hi=size(large[1]))]
    flat, steep = 0.7 <= grow[0] <= 2, grow[1] >= 8  # α alone: ×1; β alone: ×16
    if grow[1] > 16:
        lines.append(tr("collectives.above_beta_alone", "  ×{g} is above even β alone (×16): the time per byte also "
                        "grew with the size here, which one α–β line with α ≥ 0 cannot give", g=f"{grow[1]:.1f}"))
    if flat and steep:   # a falling time (below ×1): do the small sizes' times stay flat without leaning on that pair?
        lines.append(_odd_small(t, b, grow, small) if grow[0] < 1 else
                     tr("collectives.alpha_beta_split", "  so small messages pay mostly α, large ones mostly β"))
    elif not flat:
        lines.append(tr("collectives.small_not_alpha", "  small sizes do not fit the α–β model here: ×{g} is outside "
                        "the ×0.7–2 that α alone would give, so this run does not show where α dominates",
                        g=f"{grow[0]:.1f}"))
    else:
        lines.append(tr("collectives.large_not_beta", "  large sizes: ×{g} for 16× the bytes, so β does not dominate "
                        "yet at these sizes here", g=f"{grow[1]:.1f}"))
    inv_beta, algbw = 1e-9 / sweep["beta_s_per_byte"], max(r["bytes"] / r["library_s"] / 1e9 for r in sweep["sizes"])
    over = [r for r in sweep["sizes"] if r["bytes"] / r["library_s"] / 1e9 >= inv_beta]
    lines.append(tr("collectives.inv_beta_above", "the fitted line's 1/β = {inv_beta} GB/s is above every size's "
                    "bytes/time (at most {algbw} GB/s), as the model with α > 0 says", inv_beta=f"{inv_beta:.2f}",
                    algbw=f"{algbw:.2f}") if not over else
                 tr("collectives.inv_beta_reached", "the fitted line's 1/β = {inv_beta} GB/s; at {sizes} bytes/time "
                    "reaches {rates} GB/s, which no line with α > 0 gives (bytes/(α + bytes·β) < 1/β): the line "
                    "misdescribes {which}", inv_beta=f"{inv_beta:.2f}", sizes=", ".join(size(r['bytes']) for r in over),
                    rates=", ".join(format(r['bytes'] / r['library_s'] / 1e9, '.2f') for r in over),
                    which=tr("collectives.that_size", "that size") if len(over) == 1 else
                    tr("collectives.those_sizes", "those sizes")))
    fastest = min(sweep["sizes"], key=lambda r: r["library_s"])
    if sweep["alpha_s"] > fastest["library_s"] and sweep["beta_s_per_byte"] >= 0:   # the line is ≥ α at every size
        lines.append(tr("collectives.alpha_above_fastest", "the fitted α ({alpha} µs) is above the fastest timed "
                        "all_reduce ({fastest} ms at {size}): a least-squares line passes between the times, above "
                        "some of them", alpha=f"{sweep['alpha_s'] * 1e6:.0f}",
                        fastest=f"{fastest['library_s'] * 1e3:.2f}", size=size(fastest['bytes'])))
    lines.append(tr("collectives.timed_over_line", "timed all_reduce / fitted line: {ratios}",
                    ratios=ratios_at([(f"{r['library_s'] / r['library_model_s']:.2f}", r["bytes"])
                                      for r in sorted(sweep["sizes"], key=lambda r: r["bytes"])])))
    busbw = [f"{r['library_busbw_gbs']:.2f}" for r in sweep["sizes"][-3:]]
    lines.append(tr("collectives.busbw_at", "bus bandwidth at {sizes}: {busbw} GB/s",
                    sizes=", ".join(size(r['bytes']) for r in sweep['sizes'][-3:]), busbw=", ".join(busbw)))
    k, one = b[-3] // b[0], sweep["sizes"][0]
    mid = next(r for r in sweep["sizes"] if r["bytes"] == b[-3])
    lines.append(tr("collectives.many_small", "{k} all-reduces of {small}: {k} × {t_one} ms (one, timed) = "
                    "{t_all} ms, or {line_all} ms from the fitted line; one of {big}, the same bytes: {line_big} ms "
                    "from the fitted line ({x_line}× less), {t_big} ms timed ({x_timed}× less than the timed {small} "
                    "times {k})",
                    k=f"{k:,}", small=size(b[0]), t_one=f"{t[b[0]] * 1e3:.3f}", t_all=f"{k * t[b[0]] * 1e3:.0f}",
                    line_all=f"{k * one['library_model_s'] * 1e3:.0f}", big=size(b[-3]),
                    line_big=f"{mid['library_model_s'] * 1e3:.1f}",
                    x_line=f"{k * one['library_model_s'] / mid['library_model_s']:.0f}",
                    t_big=f"{t[b[-3]] * 1e3:.1f}", x_timed=f"{k * t[b[0]] / t[b[-3]]:.0f}"))
    return lines
