"""Notebook 09's measurements and calculations as the tables it prints (09)."""
from __future__ import annotations

from ..core.i18n import tr
from .recipe import memory_per_rank

__all__ = ["calculator_table", "bytes_table", "amp_lines"]


def _diff(d: float) -> str:
    return "< 1e-5" if d < 1e-5 else f"{d:.1e}"


def calculator_table(psi: int, world_size: int, layer: int, precisions: tuple[str, ...] = ("fp32", "amp", "deepspeed"),
                     strategies: tuple[str, ...] = ("ddp", "zero1", "zero2", "zero3")) -> str:
    """:func:`~helpers.sharding.recipe.memory_per_rank` for each precision and strategy: params + grads + optim
    + gathered = total bytes per rank on ``world_size`` ranks, ``layer`` the parameters of the unit gathered whole
    (09)."""
    lines = [tr("sharding.calc_table_head", "Ψ = {psi:,} parameters; bytes per rank on {n} ranks", psi=psi,
                n=world_size)]
    for precision in precisions:
        for s in strategies:
            m = memory_per_rank(psi, world_size, s, precision, layer=layer)
            lines.append(f"{precision:>9} {s:>5}: {m['params']:>9,} + {m['grads']:>9,} + {m['optim']:>10,} "
                         f"+ gathered {m['gathered']:>9,} = {m['total']:>10,}")
    return "\n".join(lines)


def bytes_table(rows: list[dict]) -> str:
    """:func:`~helpers.sharding.strategies.run_sharding`'s rows: the largest rank's bytes by part, their total, the
    calculator's total, and the trained parameters' largest difference from one process's (09)."""
    columns = (f"{'strategy':>8} {'N':>2} {'params':>10} {'grads':>10} {'optim':>10} {'gathered':>10} {'total':>10} "
               f"{'calculator':>10}")   # the dict keys each row prints, aligned: English; the last column is free
    lines = [tr("sharding.bytes_table_head", "{columns}  max |Δ| vs one process", columns=columns)]
    for r in rows:
        m, p = r["measured_bytes"], r["predicted_bytes"]
        lines.append(f"{r['strategy']:>8} {r['world_size']:>2} {m['params']:>10,} {m['grads']:>10,} {m['optim']:>10,} "
                     f"{m['gathered']:>10,} {sum(m.values()):>10,} {sum(p.values()):>10,}  "
                     f"{_diff(r['max_abs_diff_vs_unsharded'])}")
    lines.append(tr("sharding.bytes_table_foot", "bytes measured on the largest rank; tp: tensor parallelism,"
                    " introduced in section 3; calculator: memory_per_rank's total; max |Δ|: trained parameters"
                    " against one process's"))
    return "\n".join(lines)


def amp_lines(rows: list[dict]) -> str:
    """Mixed-precision rows of run_sharding: each part's bytes, and whether they are the calculator's (09)."""
    out = []
    for r in rows:
        m = r["measured_bytes"]
        same = (tr("sharding.amp_exact", "exactly the calculator") if m == r["predicted_bytes"]
                else tr("sharding.amp_not_exact", "NOT the calculator"))
        out.append(tr("sharding.amp_line", "{precision} {strategy:>5} N={n}: {params:>9,} + {grads:>9,} + {optim:>10,} "
                      "+ gathered {gathered:>9,} B: {same}", precision=r["precision"], strategy=r["strategy"],
                      n=r["world_size"], params=m["params"], grads=m["grads"], optim=m["optim"],
                      gathered=m["gathered"], same=same))
    return "\n".join(out)
