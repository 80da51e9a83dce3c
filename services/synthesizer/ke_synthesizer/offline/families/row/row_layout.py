"""Index structure of a row group: how the [M, N] view (kept dims -> rows, reduced dims
-> columns) maps onto memory, and how each operand is addressed.

Adjacent dims with the same role are merged into *runs* (batch norm over (0, 2, 3) of
NCHW: runs N | C | HW), so a flat row / column index unravels into one index per run
(one div/mod per extra run, not per dim). Full-size operands and outputs are read and
written in their contiguous layout through these run indices.

Orientation: ``row`` when the innermost dim is reduced (tiles [BLOCK_M rows, BLOCK_N
columns], reduced along axis 1, memory contiguous along the row); ``col`` when the
innermost dim is kept (column / mid-dim reductions: tiles [BLOCK_N, BLOCK_M], each
program owns BLOCK_M contiguous kept columns of one outer index and reduces along
axis 0, so loads stay coalesced).

Operand classes (decided at code-generation time from the captured shapes/strides):
``full`` (full shape, contiguous: offset ``off``), ``row`` (one value per row,
contiguous: offset ``rows``), ``col`` (varies along reduced dims only, contiguous:
offset ``cols``, e.g. a layer-norm weight), ``one`` (a single element) and ``strided``
(anything else: per-dim indices times stride arguments, broadcast dims dropped).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.fx

from kernelevolve.errors import LoweringError

from ...frontend.fx_meta import shape_of, tensor_meta
from ...plan.lower_reduction import RowInfo


@dataclass(frozen=True)
class RowLayout:
    rank: int
    dims: tuple[int, ...]  # reduced dims
    kept: tuple[int, ...]
    runs: tuple[tuple[str, tuple[int, ...]], ...]  # ("k" | "r", dims), outermost first
    orient: str  # row | col

    @property
    def kept_runs(self) -> list[int]:
        return [j for j, (role, _) in enumerate(self.runs) if role == "k"]

    @property
    def red_runs(self) -> list[int]:
        return [j for j, (role, _) in enumerate(self.runs) if role == "r"]

    def size_name(self, j: int) -> str:
        """Kernel-side name of run j's extent."""
        role = self.runs[j][0]
        if role == "k" and len(self.kept_runs) == 1:
            return "M"
        if role == "r" and len(self.red_runs) == 1:
            return "N"
        return f"S{j}"

    def size_args(self) -> list[int]:
        """Runs whose extent is a kernel argument of its own."""
        return [j for j in range(1, len(self.runs)) if self.size_name(j) == f"S{j}"]

    def stride(self, j: int) -> str:
        """Contiguous stride of run j as an expression ('' when 1)."""
        return " * ".join(self.size_name(i) for i in range(j + 1, len(self.runs)))

    def dim_args(self) -> list[int]:
        """Dims whose extent strided operands need (inner dims of multi-dim runs)."""
        return [d for _, ds in self.runs for d in ds[1:]]


def make_layout(rinfo: RowInfo) -> RowLayout:
    rank = len(rinfo.full)
    runs: list[tuple[str, list[int]]] = []
    for d in range(rank):
        role = "r" if d in rinfo.dims else "k"
        if runs and runs[-1][0] == role:
            runs[-1][1].append(d)
        else:
            runs.append((role, [d]))
    kept = tuple(d for d in range(rank) if d not in rinfo.dims)
    orient = "col" if rank and (rank - 1) not in rinfo.dims else "row"
    return RowLayout(rank, tuple(rinfo.dims), kept, tuple((r, tuple(ds)) for r, ds in runs), orient)


@dataclass
class Operand:
    value: Any
    layout: str  # layout of the consuming micro: full | row | rowflat
    cls: str  # full | row | col | one | strided
    rank: int  # the operand's own rank
    dims: tuple[int, ...] = ()  # strided: full-rank dims that carry a stride argument
    guard: bool = True  # the launcher makes it contiguous (no-op when it already is)


def operand_meta(plan_spec: Any, v: Any) -> tuple[tuple[int, ...], bool, bool]:
    """(shape, contiguous, is_parameter) of an operand at capture time."""
    if isinstance(v, str):
        obj: Any = plan_spec.model
        for part in v[1:].split("."):
            obj = getattr(obj, part)
        return tuple(obj.shape), bool(obj.is_contiguous()), True
    shape = shape_of(v) or ()
    meta = tensor_meta(v)
    stride = tuple(getattr(meta, "stride", ()) or ())
    return shape, _contiguous(shape, stride), isinstance(v, torch.fx.Node) and v.op == "get_attr"


def _contiguous(shape: tuple[int, ...], stride: tuple[int, ...]) -> bool:
    if len(stride) != len(shape):
        return False
    expect = 1
    for s, st in zip(reversed(shape), reversed(stride), strict=True):
        if s != 1 and st != expect:
            return False
        expect *= s
    return True


def classify(plan_spec: Any, lay: RowLayout, rinfo: RowInfo, v: Any, layout: str) -> Operand:
    shape, contiguous, param = operand_meta(plan_spec, v)
    if layout == "rowflat":
        target = rinfo.flat_shape
        full_dims = list(lay.kept)
    else:
        target = rinfo.keep_shape if layout == "row" else rinfo.full
        full_dims = list(range(lay.rank))
    r = len(target)
    if len(shape) > r:
        raise LoweringError(f"operand of rank {len(shape)} in a rank-{r} row group")
    padded = (1,) * (r - len(shape)) + tuple(shape)
    op = Operand(v, layout, "strided", len(shape), guard=not param)
    # full: the operand's own shape, not only its padded one (the launcher checks
    # t.shape == full; a LayerNorm weight [5, 5, 2] of a batch-1 input [1, 5, 5, 2] pads
    # to the full shape but is a col operand, and is one at any batch size)
    if layout == "full" and tuple(shape) == rinfo.full and contiguous:
        op.cls = "full"
    elif all(s == 1 for s in padded):
        op.cls, op.guard = "one", False
    elif layout == "full" and padded == rinfo.keep_shape and contiguous:
        op.cls = "row"
    elif layout != "full" and padded == target and contiguous:
        op.cls = "row"
    elif layout == "full" and contiguous and all(
            padded[d] == (rinfo.full[d] if d in lay.dims else 1) for d in range(r)):
        op.cls = "col"
    else:
        op.guard = False  # read in place through its strides
        # a dim where the operand has extent 1 but the group does not is broadcast: no term.
        # A per-row operand (keepdim shape, `x.mean(dim=(2, 3), keepdim=True) + bias[C, 1, 1]`)
        # has extent 1 along the reduced dims, whose index names (i2, i3) are column indices of
        # the full tile (or undefined in a per-row epilogue): no term there either.
        op.dims = tuple(full_dims[j] for j in range(r) if not (padded[j] == 1 and target[j] != 1)
                        and j >= r - len(shape) and not (layout == "row" and full_dims[j] in lay.dims))
    return op


def own_dim(op: Operand, lay: RowLayout, d: int) -> int:
    """The operand's own dim index of full-rank dim d (strided operands)."""
    if op.layout == "rowflat":
        return lay.kept.index(d) - (len(lay.kept) - op.rank)
    return d - (lay.rank - op.rank)


def unravel(index: str, names: list[str], sizes: list[str]) -> list[str]:
    """Split a flat index into per-part indices (names/sizes outermost first)."""
    if len(names) == 1:
        return [f"{names[0]} = {index}"]
    rem = f"rem_{names[0]}"
    lines = [f"{rem} = {index}"]
    for j in reversed(range(1, len(names))):
        lines += [f"{names[j]} = {rem} % {sizes[j]}", f"{rem} = {rem} // {sizes[j]}"]
    return lines + [f"{names[0]} = {rem}"]


class IndexGen:
    """Kernel lines that compute row / column indices, masks and offsets."""

    def __init__(self, lay: RowLayout, per_dim: bool, wide: bool = False) -> None:
        self.lay = lay
        self.per_dim = per_dim  # strided operands need one index per dim
        self.wide = wide  # 64-bit offsets (emit/grid.py): the row block ids and column offsets
        row = lay.orient == "row"
        self.ax = 1 if row else 0
        self.tile = "[BLOCK_M, BLOCK_N]" if row else "[BLOCK_N, BLOCK_M]"
        self.keep = "[:, None]" if row else "[None, :]"  # a per-row [BLOCK_M] vector as rows
        self.colx = "[None, :]" if row else "[:, None]"  # a reduced-axis vector as columns

    def inner_kept(self) -> int | None:
        """Col orientation with several kept runs: the innermost (contiguous) one."""
        k = self.lay.kept_runs
        return k[-1] if self.lay.orient == "col" and len(k) > 1 else None

    def nblocks(self) -> str:
        ki = self.inner_kept()
        if ki is None:
            return "tl.cdiv(M, BLOCK_M)"
        s = self.lay.size_name(ki)
        return f"(M // {s}) * tl.cdiv({s}, BLOCK_M)"

    def _term(self, idx: str, j: int) -> str:
        st = self.lay.stride(j)
        return f"{idx} * ({st})" if st else idx

    def row_lines(self, blk: str) -> list[str]:
        lay = self.lay
        kr = lay.kept_runs
        ki = self.inner_kept()
        lines: list[str] = []
        names = {j: f"k{j}" for j in kr}
        if ki is None:
            lines += [f"rows = {blk} * BLOCK_M + tl.arange(0, BLOCK_M){self.keep}", "rmask = rows < M"]
            if kr:
                lines += unravel("rows", [names[j] for j in kr], [lay.size_name(j) for j in kr])
        else:
            s = lay.size_name(ki)
            outer = kr[:-1]
            lines += [f"o = {blk} // tl.cdiv({s}, BLOCK_M)",
                      f"inner = ({blk} - o * tl.cdiv({s}, BLOCK_M)) * BLOCK_M + tl.arange(0, BLOCK_M){self.keep}",
                      f"rows = o * {s} + inner", f"rmask = inner < {s}"]
            lines += unravel("o", [names[j] for j in outer], [lay.size_name(j) for j in outer])
            lines.append(f"{names[ki]} = inner")
        roff = " + ".join(self._term(names[j], j) for j in kr) or "rows"
        lines.append(f"roff = {roff}")
        if self.per_dim:
            lines += self._dim_lines(kr, names)
        return lines

    def col_lines(self, start: str, end: str) -> list[str]:
        lay = self.lay
        rr = lay.red_runs
        names = {j: f"c{j}" for j in rr}
        lines = [f"cols = {start} + tl.arange(0, BLOCK_N){self.colx}", f"cmask = cols < {end}",
                 "mask = rmask & cmask"]
        # wide: column offsets from an int64 copy (cols itself stays int32: index outputs use it)
        src = "cols"
        if self.wide:
            lines.append("cols64 = cols.to(tl.int64)")
            src = "cols64"
        if rr:
            lines += unravel(src, [names[j] for j in rr], [lay.size_name(j) for j in rr])
        coff = " + ".join(self._term(names[j], j) for j in rr) or src
        lines.append(f"off = roff + {coff}")
        if self.per_dim:
            lines += self._dim_lines(rr, names)
        return lines

    def _dim_lines(self, runs: list[int], names: dict[int, str]) -> list[str]:
        lines: list[str] = []
        for j in runs:
            ds = self.lay.runs[j][1]
            lines += unravel(names[j], [f"i{d}" for d in ds], [f"D{d}" for d in ds])
        return lines
