"""Output coordinates of a flat kernel: the lines that unravel each lane's flat offset into
one coordinate per dim (row-major, sizes passed as run-time arguments). Kernels that
compute addresses by index arithmetic (index, scatter and integer families) share them."""

from __future__ import annotations


def unravel_lines(rank: int, sizes: str = "S", flat: str = "offs", indent: str = "    ") -> list[str]:
    """Kernel lines binding ``o0 .. o{rank-1}`` from ``flat`` over sizes ``{sizes}0 ..``
    (the outermost size is never read: the last quotient is ``o0``)."""
    if rank == 1:
        return [f"{indent}o0 = {flat}"]
    lines = [f"{indent}rem = {flat}"]
    for d in reversed(range(1, rank)):
        lines += [f"{indent}o{d} = rem % {sizes}{d}", f"{indent}rem = rem // {sizes}{d}"]
    return lines + [f"{indent}o0 = rem"]
