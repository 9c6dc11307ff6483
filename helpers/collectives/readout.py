"""Notebook 08's ring check read out in sentences generated from its numbers (08)."""
from __future__ import annotations

__all__ = ["ring_rank_lines"]


def ring_rank_lines(diffs: dict) -> list[str]:
    """Whether each ring left every rank with the same bits, from ``run_ring_check``'s numbers (08).

    The naive ring has each rank add the n tensors in its own order, starting from its own, so the
    ranks may end with different last bits; the bandwidth-optimal ring sums each chunk once, on one
    rank, and the all-gather copies it, so every rank holds the same bits.
    """
    n, naive, ring = diffs["world_size"], diffs["naive_between_ranks"], diffs["ring_between_ranks"]
    lines = [f"every rank's result against rank 0's, largest |difference|: naive ring {naive:.1e}, ring {ring:.1e}"]
    lines.append(f"  naive ring: the {n} ranks end with different last bits: each added the {n} tensors in its own order, "
                 "so replicas updated with these sums would drift apart" if naive > 0 else
                 f"  naive ring: the {n} ranks hold the same bits here, though each added the {n} tensors in its own order")
    lines.append("  ring: every rank holds the same bits: each chunk was summed once, on one rank, and the all-gather "
                 "copied it" if ring == 0 else
                 f"  ring: the ranks differ by up to {ring:.1e}, which copying finished chunks should not give")
    return lines
