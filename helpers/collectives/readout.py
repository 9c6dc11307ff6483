"""Notebook 08's ring check and falling sweep times read out in sentences generated from its numbers (08)."""
from __future__ import annotations

__all__ = ["ring_rank_lines", "falling_time_lines"]


def _size(x: float) -> str:
    return f"{x / 2**20:g} MiB" if x >= 2**20 else f"{x / 2**10:g} KiB"


def ring_rank_lines(diffs: dict) -> list[str]:
    """Whether each ring left every rank with the same bits, from ``run_ring_check``'s numbers (08).

    The naive ring has each rank add the n tensors in its own order, starting from its own, so the
    ranks may end with different last bits; in the bandwidth-optimal ring each chunk's sum is one chain
    of additions, one per step on a different rank, finished on one rank, and the all-gather copies
    that result, so every rank holds the same bits.
    """
    n, naive, ring = diffs["world_size"], diffs["naive_between_ranks"], diffs["ring_between_ranks"]
    lines = [f"every rank's result against rank 0's, largest |difference|: naive ring {naive:.1e}, ring {ring:.1e}"]
    lines.append(f"  naive ring: the {n} ranks end with different last bits: each added the {n} tensors in its own order, "
                 "so replicas stepping with these sums could differ after one step" if naive > 0 else
                 f"  naive ring: the {n} ranks hold the same bits here, though each added the {n} tensors in its own order")
    lines.append("  ring: every rank holds the same bits: each chunk's sum is one chain of additions, finished on one "
                 "rank, and the all-gather copied it to the others" if ring == 0 else
                 f"  ring: the ranks differ by up to {ring:.1e}, which copying finished chunks should not give")
    return lines


SERIES = {"library_s": "all_reduce", "ring_s": "ring", "step_s": "one step"}


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
    spread = {(key, lo["bytes"]): lo[key[:-2] + "_worst"] / lo[key] for key, _, lo, _ in drops if key[:-2] + "_worst" in lo}
    said = "; ".join(f"{name} {lo[key] * 1e3:.2f} ms at {_size(lo['bytes'])} → {hi[key] * 1e3:.2f} ms at {_size(hi['bytes'])}"
                     + (f", its slowest repeat ×{spread[key, lo['bytes']]:.1f} the best"
                        if (key, lo["bytes"]) in spread else "") for key, name, lo, hi in drops)
    where = " and ".join(f"the {name} at {_size(lo['bytes'])}" for _, name, lo, _ in drops)
    return [f"a time falls by more than {margin:.0%} from one size to the next ({said}; smaller falls, in the table above, "
            f"are not listed), which the α–β model, with β > 0, cannot give; each time is the "
            f"best of repeats taken in a fresh order, so every repeat of {where} was slow, not one passing burst "
            "of load (the cause is not identified here)"]
