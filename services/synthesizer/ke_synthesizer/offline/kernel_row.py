"""Code generation for row groups: pointwise prologues, reductions over a set of dims
and epilogues (including values broadcast back over the row, as in softmax/norms) in
one kernel over the [M, N] view of the group's full shape.

Two strategies (genome ``gK.strategy``):
- ``single``: one program owns BLOCK_M whole rows (BLOCK_N = next_power_of_2(N));
  every value stays in registers, memory is read once.
- ``looped``: rows are walked in BLOCK_N chunks, one pass per reduction plus one for
  full outputs, recomputing cheap pointwise values instead of keeping them; works for
  rows of any length.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import torch
import torch.fx

from .capture import dtype_of, shape_of
from .graph import Group, Plan, group_outputs
from .kernel_pointwise import kernel_name, load_cast, persistent
from .kernel_row_split import split_kernels, split_reduction
from .lower_pointwise import PointwiseEmitter, literal
from .lower_reduction import ROW_OPS, Micro, RowInfo, expand_composite

# Upper bound on BLOCK_M * BLOCK_N elements per program (registers on GPU).
MAX_TILE = 16384
# On a GPU, BLOCK_M shrinks until about this many programs are launched (a few per SM).
GPU_MIN_PROGRAMS = 512
# The split strategy uses at most this many programs per row block (one atomic add each).
SPLIT_PROGRAMS = 512

HELPER_PROD = '''@triton.jit
def _prod_combine(a, b):
    return a * b
'''

_NEUTRAL = {"pick": "0.0", "cumsum": "0.0", "cumsum_rev": "0.0", "cumprod": "1.0", "cumprod_rev": "1.0",
            "sum": "0.0", "max": 'float("-inf")', "min": 'float("inf")', "prod": "1.0",
            "argmax": 'float("-inf")', "argmin": 'float("inf")'}


class _RowBuilder:
    def __init__(self, plan: Plan, group: Group, emitter: PointwiseEmitter) -> None:
        self.plan, self.group, self.emitter = plan, group, emitter
        self.rinfo: RowInfo = group.info["row"]
        self.layouts: dict[torch.fx.Node, str] = group.info["layouts"]
        self.operands: list[tuple[Any, str]] = []  # (value, full|row|rowflat)
        self.scalars: list[torch.fx.Node] = []
        self.micros: list[Micro] = []
        self._tmp = 0
        rank = len(self.rinfo.full)
        kept = [d for d in range(rank) if d not in self.rinfo.dims]
        # reduced dims that are not the innermost ones: index through strides instead
        # of materialising a permuted copy
        self.unravel = kept + list(self.rinfo.dims) != list(range(rank))
        self.p, self.q = len(kept), len(self.rinfo.dims)

    def new(self, prefix: str) -> str:
        self._tmp += 1
        return f"{prefix}{self._tmp}"

    def load(self, v: Any, layout: str) -> str:
        key = (v, layout)
        if key not in self.operands:
            self.operands.append(key)
            i = len(self.operands) - 1
            self.micros.append(Micro(f"a{i}", "full" if layout == "full" else "row", load=i))
        return f"a{self.operands.index(key)}"

    def value(self, v: Any, layout: str) -> str:
        if isinstance(v, torch.fx.Node) and self.plan.group_of.get(v) is self.group:
            return f"v_{v.name}"
        if isinstance(v, str) or (isinstance(v, torch.fx.Node) and shape_of(v) is not None):
            return self.load(v, layout)
        if isinstance(v, torch.fx.Node):
            if v not in self.scalars:
                self.scalars.append(v)
            return f"s{self.scalars.index(v)}"
        lit = literal(v)
        if lit is None:
            raise ValueError(f"unsupported operand {v!r}")
        return lit

    def _value_at(self, layout: str, v: Any) -> str:
        return self.value(v, layout)

    def build(self) -> None:
        for m in self.group.members:
            op = self.group.ops[m]
            layout = self.layouts[m]
            if op.op in ROW_OPS:
                x = self.value(op.args["input"], "full")
                extra = {k: self.value(op.args[k], "full") for k in ("weight", "bias") if op.args.get(k) is not None}
                if op.op == "gather":
                    extra["index"] = self.value(op.args["index"], "row")
                self.micros += expand_composite(op, f"v_{m.name}", x, extra, self.new)
                continue
            expr = self.emitter.emit(op, functools.partial(self._value_at, layout))
            if expr is None:
                raise ValueError(f"cannot emit {op.op}")
            known = {mi.name for mi in self.micros}
            deps = [t for t in re.findall(r"\b[a-z]\w*\b", expr) if t in known]
            self.micros.append(Micro(f"v_{m.name}", "full" if layout == "full" else "row", expr=expr, deps=deps))

    def closure(self, roots: list[str]) -> list[Micro]:
        by_name = {mi.name: mi for mi in self.micros}
        need: set[str] = set()
        stack = list(roots)
        while stack:
            n = stack.pop()
            mi = by_name.get(n)
            if mi is None or mi.layout != "full" or n in need:
                continue
            need.add(n)
            stack += mi.deps
        return [mi for mi in self.micros if mi.name in need]


def _load_line(b: _RowBuilder, mi: Micro) -> str:
    v, layout = b.operands[mi.load]
    dt = dtype_of(v) if isinstance(v, torch.fx.Node) else torch.float32
    i = mi.load
    if b.unravel:
        # strided view: row / column indices unravelled over the kept / reduced dims
        row_off = " + ".join(f"row_i{j} * in{i}_k{j}" for j in range(b.p))
        if layout == "full":
            col_off = " + ".join(f"col_i{j} * in{i}_r{j}" for j in range(b.q))
            return f"{mi.name} = tl.load(in{i}_ptr + {row_off} + {col_off}, mask=mask, other=0){load_cast(dt)}"
        return f"{mi.name} = tl.load(in{i}_ptr + {row_off}, mask=rmask, other=0){load_cast(dt)}"
    if layout == "full":
        return f"{mi.name} = tl.load(in{i}_ptr + rows * in{i}_sm + cols * in{i}_sn, mask=mask, other=0){load_cast(dt)}"
    return f"{mi.name} = tl.load(in{i}_ptr + rows * in{i}_sm, mask=rmask, other=0){load_cast(dt)}"


def _unravel(index: str, sizes: str, count: int, var: str) -> list[str]:
    """Split a flat row / column index into per-dim indices (innermost first)."""
    if count == 1:
        return [f"{var}0 = {index}"]
    lines = [f"rem_{var} = {index}"]
    for j in reversed(range(1, count)):
        lines += [f"{var}{j} = rem_{var} % {sizes}{j}", f"rem_{var} = rem_{var} // {sizes}{j}"]
    return lines + [f"{var}0 = rem_{var}"]


def _col_lines(b: _RowBuilder) -> list[str]:
    return _unravel("cols", "R", b.q, "col_i") if b.unravel else []


def _micro_line(b: _RowBuilder, mi: Micro) -> list[str]:
    if mi.load >= 0:
        return [_load_line(b, mi)]
    if not mi.reduce:
        return [f"{mi.name} = {mi.expr}"]
    neutral = _NEUTRAL[mi.reduce]
    masked = f"tl.where(mask, {mi.src}, {neutral})"
    if mi.reduce == "pick":
        return [f"{mi.name} = tl.sum(tl.where(mask & (cols == {mi.index}), {mi.src}, 0.0), axis=1)[:, None]"]
    if mi.reduce.startswith("cum"):
        # scans along the row (single strategy only: needs the whole row)
        fn, _, rev = mi.reduce.partition("_")
        return [f"{mi.name} = tl.{fn}({masked}, axis=1{', reverse=True' if rev else ''})"]
    if mi.reduce in ("sum", "max", "min"):
        return [f"{mi.name} = tl.{mi.reduce}({masked}, axis=1)[:, None]"]
    if mi.reduce == "prod":
        b.emitter.helpers.add("_prod_combine")
        return [f"{mi.name} = tl.reduce({masked}, 1, _prod_combine)[:, None]"]
    return [f"{mi.name} = tl.{mi.reduce}({masked}, axis=1)[:, None]"]


def _single_body(b: _RowBuilder, outs: list[tuple[torch.fx.Node, str]]) -> list[str]:
    lines = ["cols = tl.arange(0, BLOCK_N)[None, :]", "mask = rmask & (cols < N)"] + _col_lines(b)
    for mi in b.micros:
        lines += _micro_line(b, mi)
    lines += _stores(outs)
    return lines


def _stores(outs: list[tuple[torch.fx.Node, str]], full_only: bool | None = None) -> list[str]:
    lines = []
    for j, (m, layout) in enumerate(outs):
        if layout == "full" and full_only is not False:
            lines.append(f"tl.store(out{j}_ptr + rows * N + cols, v_{m.name}, mask=mask)")
        elif layout != "full" and full_only is not True:
            lines.append(f"tl.store(out{j}_ptr + rows, v_{m.name}, mask=rmask)")
    return lines


def _chunk_loop(b: _RowBuilder, roots: list[str], tail: list[str], head: list[str] | None = None) -> list[str]:
    lines = list(head or [])
    lines.append("for start in range(0, N, BLOCK_N):")
    body = ["cols = start + tl.arange(0, BLOCK_N)[None, :]", "mask = rmask & (cols < N)"] + _col_lines(b)
    for mi in b.closure(roots):
        body += _micro_line(b, mi)
    body += tail
    lines += ["    " + line for line in body]
    return lines


def online_pairs(micros: list[Micro]) -> dict[str, Micro]:
    """max m over x followed by sum s of exp(x - m): {m.name: s}. Such pairs can be
    computed in one pass with a running max that rescales the running sum."""
    by_name = {mi.name: mi for mi in micros}
    pairs: dict[str, Micro] = {}
    for s in micros:
        if s.reduce != "sum":
            continue
        e = by_name.get(s.src)
        if e is None or e.layout != "full" or e.reduce or len(e.deps) != 2:
            continue
        x, m = e.deps
        mm = by_name.get(m)
        if mm is not None and mm.reduce == "max" and mm.src == x and e.expr == f"tl.exp({x} - {m})":
            pairs[m] = s
    return pairs


def _online_pass(b: _RowBuilder, m: Micro, s: Micro) -> list[str]:
    am, as_ = f"acc_{m.name}", f"acc_{s.name}"
    head = [f"{am} = tl.full([BLOCK_M, BLOCK_N], float(\"-inf\"), tl.float32)",
            f"{as_} = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)"]
    tail = [f"xv = tl.where(mask, {m.src}, float(\"-inf\"))",
            f"m_new = tl.maximum({am}, xv)",
            "m_ref = tl.where(m_new == float(\"-inf\"), 0.0, m_new)  # lanes with nothing seen yet",
            f"{as_} = {as_} * tl.exp({am} - m_ref) + tl.exp(xv - m_ref)",
            f"{am} = m_new"]
    final = [f"{m.name} = tl.max({am}, axis=1)[:, None]",
             f"m_row = tl.where({m.name} == float(\"-inf\"), 0.0, {m.name})",
             f"{s.name} = tl.sum({as_} * tl.exp({am} - m_row), axis=1)[:, None]"]
    return ["# online max + sum of exp: one pass, the running sum is rescaled as the max grows"] + \
        _chunk_loop(b, [m.src], tail, head) + final


def _looped_body(b: _RowBuilder, outs: list[tuple[torch.fx.Node, str]], online: bool = False) -> list[str]:
    lines: list[str] = []
    pairs = online_pairs(b.micros) if online else {}
    fused_sums = {s.name for s in pairs.values()}
    for mi in b.micros:
        if mi.layout == "full":
            continue  # recomputed inside each pass that needs it
        if mi.name in fused_sums:
            continue  # computed by the online pass of its max
        if mi.name in pairs:
            lines += _online_pass(b, mi, pairs[mi.name])
            continue
        if not mi.reduce:
            lines += _micro_line(b, mi)
            continue
        acc, neutral, src = f"acc_{mi.name}", _NEUTRAL[mi.reduce], mi.src
        head = [f"{acc} = tl.full([BLOCK_M, BLOCK_N], {neutral}, tl.float32)"]
        masked = f"tl.where(mask, {src}, {neutral})"
        if mi.reduce == "pick":
            masked = f"tl.where(mask & (cols == {mi.index}), {src}, 0.0)"
            mi = Micro(mi.name, mi.layout, reduce="sum", src=src, deps=mi.deps)
        if mi.reduce in ("argmax", "argmin"):
            cmp = ">" if mi.reduce == "argmax" else "<"
            head.append(f"{acc}_i = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.int32)")
            tail = [f"cand = {masked}", f"better = cand {cmp} {acc}",
                    f"{acc}_i = tl.where(better, cols + 0 * {acc}_i, {acc}_i)",
                    f"{acc} = tl.where(better, cand, {acc})"]
            fin = "max" if mi.reduce == "argmax" else "min"
            final = [f"best = tl.{fin}({acc}, axis=1)[:, None]",
                     f"{mi.name} = tl.min(tl.where({acc} == best, {acc}_i, 2147483647), axis=1)[:, None]"]
        else:
            combine = {"sum": f"{acc} + {masked}", "max": f"tl.maximum({acc}, {masked})",
                       "min": f"tl.minimum({acc}, {masked})", "prod": f"{acc} * {masked}"}[mi.reduce]
            tail = [f"{acc} = {combine}"]
            if mi.reduce == "prod":
                b.emitter.helpers.add("_prod_combine")
                final = [f"{mi.name} = tl.reduce({acc}, 1, _prod_combine)[:, None]"]
            else:
                final = [f"{mi.name} = tl.{mi.reduce}({acc}, axis=1)[:, None]"]
        lines += _chunk_loop(b, [src], tail, head) + final
    full_outs = [f"v_{m.name}" for m, layout in outs if layout == "full"]
    if full_outs:
        lines += _chunk_loop(b, full_outs, _stores(outs, full_only=True))
    lines += _stores(outs, full_only=False)
    return lines


def gen_row(plan: Plan, group: Group, genome: dict[str, str], emitter: PointwiseEmitter) -> tuple[str, str, str]:
    b = _RowBuilder(plan, group, emitter)
    b.build()
    rinfo = b.rinfo
    outs = [(m, b.layouts[m]) for m in group_outputs(plan, group)]
    strategy = genome.get(f"{group.key}.strategy", group.info.get("default_strategy", "single"))
    block_m = int(genome.get(f"{group.key}.BLOCK_M", "4"))
    block_n = int(genome.get(f"{group.key}.BLOCK_N", "1024"))
    warps = int(genome.get(f"{group.key}.num_warps", "4"))
    name = kernel_name(group, "row")

    sig = [f"in{i}_ptr" for i in range(len(b.operands))] + [f"out{j}_ptr" for j in range(len(outs))] + ["M", "N"]
    if b.unravel:
        sig += [f"K{j}" for j in range(1, b.p)] + [f"R{j}" for j in range(1, b.q)]
    for i, (_, layout) in enumerate(b.operands):
        if b.unravel:
            sig += [f"in{i}_k{j}" for j in range(b.p)]
            sig += [f"in{i}_r{j}" for j in range(b.q)] if layout == "full" else []
        else:
            sig += [f"in{i}_sm", f"in{i}_sn"] if layout == "full" else [f"in{i}_sm"]
    sig += [f"s{i}" for i in range(len(b.scalars))]
    fused = " -> ".join(group.ops[m].op for m in group.members)
    split_red = split_reduction(b, outs) if strategy == "split" else None
    if strategy == "split" and split_red is None:
        strategy = "looped"  # not applicable to this group (see kernel_row_split)
    how = {"split": "row slices summed by many programs",
           "single": "whole rows in registers, one read of the input",
           "looped": "rows walked in BLOCK_N chunks, one pass per reduction",
           "online": "rows walked in BLOCK_N chunks, max and exp-sum in one online pass"}[strategy]
    lines = ["@triton.jit", f"def {name}(", f"    {', '.join(sig)},",
             "    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,", "):",
             f"    # Fuses {fused} over dims {list(rinfo.dims)} ({how}).",
             "    pid = tl.program_id(0)",
             "    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)[:, None]",
             "    rmask = rows < M"]
    if b.unravel:
        lines += ["    " + line for line in _unravel("rows", "K", b.p, "row_i")]
    programs = genome.get(f"{group.key}.programs", "grid")
    if split_red is not None:
        row_lines = ["    " + line for line in _unravel("rows", "K", b.p, "row_i")] if b.unravel else []
        kernel = split_kernels(b, outs, split_red, name, sig, fused, row_lines)
        programs = "grid"
    else:
        body = _single_body(b, outs) if strategy == "single" else _looped_body(b, outs, online=strategy == "online")
        lines += ["    " + line for line in body]
        if programs != "grid":
            lines = persistent(lines, lines.index("    pid = tl.program_id(0)"), "M", "BLOCK_M", "pid")
        kernel = "\n".join(lines) + "\n"
    if "_prod_combine" in emitter.helpers:
        emitter.helpers.discard("_prod_combine")
        kernel = HELPER_PROD + "\n\n" + kernel

    # ---- launcher ----
    rank = len(rinfo.full)
    dims = list(rinfo.dims)
    kept = [d for d in range(rank) if d not in dims]
    perm = kept + dims
    inv = [perm.index(i) for i in range(rank)]
    params = [f"t{i}" for i in range(len(b.operands))] + [f"s{i}" for i in range(len(b.scalars))]
    launcher = f"launch_{name}"
    full_ops = [f"t{i}.shape" for i, (_, lay) in enumerate(b.operands) if lay == "full"]
    ll = [f"def {launcher}({', '.join(params)}):",
          f"    full = torch.broadcast_shapes({', '.join(full_ops)})",
          f"    # [M, N] view: kept dims {kept} as rows, reduced dims {dims} as columns",
          f"    m = math.prod([full[d] for d in {kept}])",
          f"    n = math.prod([full[d] for d in {dims}])",
          f"    keep = [1 if d in {dims} else full[d] for d in range({rank})]",
          f"    flat = [full[d] for d in {kept}]"]
    identity = perm == list(range(rank))
    permute = "" if identity else f".permute({perm})"
    call = []
    for i, (_, layout) in enumerate(b.operands):
        target = {"full": "full", "row": "keep", "rowflat": "flat"}[layout]
        if b.unravel:
            ll.append(f"    t{i} = t{i}.expand({target})  # read in place through its strides")
        elif layout == "full":
            ll.append(f"    t{i} = t{i}.expand(full){permute}.reshape(m, n)")
        else:
            ll.append(f"    t{i} = t{i}.expand({target}).reshape(m)")
        call += [f"t{i}"]
    device = "t0.device"
    for j, (m, layout) in enumerate(outs):
        dt = dtype_of(m) or torch.float32
        shape = "(m, n)" if layout == "full" else "(m,)"
        ll.append(f"    out{j} = torch.empty({shape}, device={device}, dtype={dt})")
        call.append(f"out{j}")
    call += ["m", "n"]
    if b.unravel:
        call += [f"full[{kept[j]}]" for j in range(1, b.p)] + [f"full[{dims[j]}]" for j in range(1, b.q)]
    for i, (_, layout) in enumerate(b.operands):
        if not b.unravel:
            call += [f"t{i}.stride(0)", f"t{i}.stride(1)"] if layout == "full" else [f"t{i}.stride(0)"]
        elif layout == "full":
            call += [f"t{i}.stride({d})" for d in kept] + [f"t{i}.stride({d})" for d in dims]
        elif layout == "row":
            call += [f"t{i}.stride({d})" for d in kept]
        else:
            call += [f"t{i}.stride({j})" for j in range(b.p)]
    call += [f"s{i}" for i in range(len(b.scalars))]
    if strategy == "single":
        ll.append("    block_n = triton.next_power_of_2(max(n, 1))")
    else:
        ll.append(f"    block_n = min({block_n}, triton.next_power_of_2(max(n, 1)))")
    ll.append(f"    block_m = max(1, min({block_m}, {MAX_TILE} // block_n, triton.next_power_of_2(max(m, 1))))")
    ll += ["    if t0.is_cuda:  # few rows: fewer rows per program so every SM gets work",
           f"        block_m = max(1, min(block_m, triton.next_power_of_2(triton.cdiv(m, {GPU_MIN_PROGRAMS}))))"]
    ll.append("    if m > 0:")
    if split_red is not None:
        ll += ["        acc = torch.zeros((m,), device=t0.device, dtype=torch.float32)",
               f"        grid = (triton.cdiv(m, block_m), min(triton.cdiv(n, block_n), {SPLIT_PROGRAMS}))",
               f"        {name}_partial[grid](acc, {', '.join(call)}, BLOCK_M=block_m, BLOCK_N=block_n,"
               f" num_warps={warps})",
               "        grid = (triton.cdiv(m, block_m),)",
               f"        {name}_finish[grid](acc, {', '.join(call)}, BLOCK_M=block_m, BLOCK_N=block_n,"
               f" num_warps={warps})"]
    elif programs == "grid":
        ll.append("        grid = (triton.cdiv(m, block_m),)")
    else:
        ll.append(f"        grid = (min(triton.cdiv(m, block_m), {int(programs)}),)  # persistent programs")
    if split_red is None:
        ll.append(f"        {name}[grid]({', '.join(call)}, BLOCK_M=block_m, BLOCK_N=block_n, num_warps={warps})")
    rets = []
    for j, (_m, layout) in enumerate(outs):
        if layout == "full":
            if identity:
                rets.append(f"out{j}.reshape(full)")
            else:
                rets.append(f"out{j}.reshape([full[d] for d in {perm}]).permute({inv})")
        else:
            rets.append(f"out{j}.reshape({'keep' if layout == 'row' else 'flat'})")
    ll.append(f"    return {', '.join(rets)}")
    # drop the row-shape helpers when no operand or output uses them
    used = "\n".join(line for line in ll if not line.lstrip().startswith(("keep =", "flat =")))
    ll = [line for line in ll if not (line.lstrip().startswith("keep =") and "keep" not in used)
          and not (line.lstrip().startswith("flat =") and "flat" not in used)]
    return kernel, "\n".join(ll) + "\n", launcher


def row_launch_args(plan: Plan, group: Group) -> tuple[list[Any], list[torch.fx.Node]]:
    b = _RowBuilder(plan, group, PointwiseEmitter())
    b.build()
    return [v for v, _ in b.operands] + list(b.scalars), group_outputs(plan, group)
