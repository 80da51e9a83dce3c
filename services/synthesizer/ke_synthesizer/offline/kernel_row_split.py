"""The ``split`` row strategy: for few, long rows (full reductions such as losses), one
program per row leaves the GPU idle. Here the columns are split across programs: a
first kernel reduces its chunk and adds the partial sum atomically into a per-row fp32
buffer, a second, tiny kernel applies the per-row epilogue (mean, sqrt, ...) and stores.

Offered when the group has exactly one reduction, a sum, no full-size outputs, and the
values feeding the sum do not depend on per-row values.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch.fx

from .lower_reduction import Micro

if TYPE_CHECKING:
    from .kernel_row import _RowBuilder


def split_reduction(b: _RowBuilder, outs: list[tuple[torch.fx.Node, str]]) -> Micro | None:
    """The single sum micro of a group that can use the split strategy, else None."""
    reductions = [mi for mi in b.micros if mi.reduce]
    if len(reductions) != 1 or reductions[0].reduce != "sum":
        return None
    if any(layout == "full" for _, layout in outs):
        return None
    red = reductions[0]
    rows = {mi.name for mi in b.micros if mi.layout == "row" and mi.load < 0}
    for mi in b.closure([red.src]):
        if set(mi.deps) & rows:
            return None  # the summed values need a per-row value computed in the kernel
    return red


def split_kernels(b: _RowBuilder, outs: list[tuple[torch.fx.Node, str]], red: Micro, name: str,
                  sig: list[str], fused: str, row_lines: list[str]) -> str:
    from .kernel_row import _col_lines, _micro_line, _stores

    head = ["    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,", "):"]
    part = ["@triton.jit", f"def {name}_partial(", f"    acc_ptr, {', '.join(sig)},", *head,
            f"    # Fuses {fused}: partial sums of one BLOCK_N slice of the rows, added atomically.",
            "    pid = tl.program_id(0)",
            "    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)[:, None]",
            "    rmask = rows < M", *row_lines,
            "    # each program sums every num_programs(1)-th slice, then adds once (few atomics)",
            "    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)",
            "    for tile in range(tl.program_id(1), tl.cdiv(N, BLOCK_N), tl.num_programs(1)):"]
    body = ["cols = tile * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]", "mask = rmask & (cols < N)"] + _col_lines(b)
    for mi in b.micros:
        if mi.layout == "row" and mi.load >= 0:
            body += _micro_line(b, mi)
    for mi in b.closure([red.src]):
        body += _micro_line(b, mi)
    body += [f"acc += tl.where(mask, {red.src}, 0.0)"]
    part += ["        " + line for line in body]
    part += ["    partial = tl.sum(acc, axis=1)[:, None]",
             "    tl.atomic_add(acc_ptr + rows, partial, mask=rmask)"]

    fin = ["@triton.jit", f"def {name}_finish(", f"    acc_ptr, {', '.join(sig)},", *head,
           "    # Per-row epilogue on the completed sums.",
           "    pid = tl.program_id(0)",
           "    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)[:, None]",
           "    rmask = rows < M", *row_lines,
           f"    {red.name} = tl.load(acc_ptr + rows, mask=rmask, other=0.0)"]
    for mi in b.micros:
        if mi.layout == "row" and mi is not red:
            fin += ["    " + line for line in _micro_line(b, mi)]
    fin += ["    " + line for line in _stores(outs, full_only=False)]
    return "\n".join(part) + "\n\n\n" + "\n".join(fin) + "\n"
