"""Kernel bodies of row groups: micro-op lines (loads, pointwise, reductions, scans) in
either orientation, and the ``single`` and ``looped`` / ``online`` strategies.

Reductions are scheduled by *level*: a reduction whose input needs a per-row value
computed from another reduction (the sum of exp(x - max) needs the max) has a higher
level. The looped strategy makes one pass over the row per level (all reductions of a
level share it), then one pass for full-size outputs. Fused pairs lower the count: a
sum and the sum of squared deviations from its mean (variance, layer / batch norm) are
one pass of per-lane Welford states merged with Chan's formula; with ``online`` each
max / sum(exp(x - max)) pair is one pass with a running max that rescales the sum.
"""

from __future__ import annotations

import re

import torch
import torch.fx

from kernelevolve.errors import LoweringError

from ...emit.operands import load_cast
from ...frontend.fx_meta import dtype_of
from ...plan.lower_reduction import Micro
from .row_builder import RowBuilder
from .row_layout import IndexGen

# @triton.jit helpers a row kernel may call (emitted once per kernel source that uses them)
ROW_HELPERS = {
    "_prod_combine": """@triton.jit
def _prod_combine(a, b):
    return a * b
""",
    "_max_combine": """@triton.jit
def _max_combine(a, b):
    return tl.maximum(a, b)
""",
    "_min_combine": """@triton.jit
def _min_combine(a, b):
    return tl.minimum(a, b)
""",
    "_welford_combine": """@triton.jit
def _welford_combine(mean_a, m2_a, n_a, mean_b, m2_b, n_b):
    # Chan et al.: merge two (mean, sum of squared deviations, count) states
    n = n_a + n_b
    w = tl.where(n == 0.0, 0.0, n_b / tl.maximum(n, 1.0))
    delta = mean_b - mean_a
    return mean_a + delta * w, m2_a + m2_b + delta * delta * n_a * w, n
""",
}
NEUTRAL = {"pick": "0.0", "cumsum": "0.0", "cumsum_rev": "0.0", "cumprod": "1.0", "cumprod_rev": "1.0",
           "cummax": 'float("-inf")', "cummax_rev": 'float("-inf")', "cummin": 'float("inf")',
           "cummin_rev": 'float("inf")',
           "sum": "0.0", "max": 'float("-inf")', "min": 'float("inf")', "prod": "1.0",
           "argmax": 'float("-inf")', "argmin": 'float("inf")'}
BIG_INDEX = "2147483647"


def is_scan(mi: Micro) -> bool:
    return mi.reduce.startswith("cum")


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


def _bare(expr: str) -> str:
    expr = expr.replace(" ", "")
    while expr.startswith("(") and expr.endswith(")") and expr.count("(") == 1:
        expr = expr[1:-1]
    return expr


def centered_pairs(micros: list[Micro]) -> dict[str, Micro]:
    """sum s1 over x, mu = s1 / N, then sum s2 of (x - mu) * (x - mu): {s1.name: s2}
    (variance, layer / batch / group norm). Such pairs can be computed in one pass
    with Welford's running mean and sum of squared deviations."""
    by_name = {mi.name: mi for mi in micros}
    pairs: dict[str, Micro] = {}
    for s2 in micros:
        q = by_name.get(s2.src)
        if s2.reduce != "sum" or q is None or q.layout != "full" or q.reduce or q.load >= 0:
            continue
        sq = re.fullmatch(r"(\w+)\*(\w+)", _bare(q.expr))
        d = by_name.get(sq.group(1)) if sq and sq.group(1) == sq.group(2) else None
        if d is None or d.layout != "full" or d.reduce or d.load >= 0:
            continue
        diff = re.fullmatch(r"(\w+)-(\w+)", _bare(d.expr))
        mu = by_name.get(diff.group(2)) if diff else None
        if mu is None or mu.layout != "row" or mu.reduce:
            continue
        mean = re.fullmatch(r"(\w+)/N", _bare(mu.expr))
        s1 = by_name.get(mean.group(1)) if mean else None
        if diff is not None and s1 is not None and s1.reduce == "sum" and s1.src == diff.group(1) \
                and s1.name not in pairs:
            pairs[s1.name] = s2
    return pairs


def fused_pairs(micros: list[Micro], online: bool = True) -> dict[str, Micro]:
    """Reduction pairs computed in one pass: {first.name: second}; the first is a max
    (online softmax pair) or a sum (centered pair, Welford)."""
    return {**(online_pairs(micros) if online else {}), **centered_pairs(micros)}


def levels(micros: list[Micro], pairs: dict[str, Micro]) -> dict[str, int]:
    """Number of reduction barriers before each value exists (loads: 0)."""
    paired = {s.name: m for m, s in pairs.items()}
    lv: dict[str, int] = {}
    for mi in micros:
        base = max((lv.get(d, 0) for d in mi.deps), default=0)
        lv[mi.name] = base + 1 if mi.reduce and not is_scan(mi) else base
        if mi.name in paired:
            lv[mi.name] = lv[paired[mi.name]]
    return lv


def load_line(b: RowBuilder, ig: IndexGen, mi: Micro) -> str:
    op = b.operands[mi.load]
    i = mi.load
    dt = dtype_of(op.value) if isinstance(op.value, torch.fx.Node) else torch.float32
    if op.cls == "full":
        ptr, mask = f"in{i}_ptr + off", "mask"
    elif op.cls == "row":
        ptr, mask = f"in{i}_ptr + rows", "rmask"
    elif op.cls == "col":
        ptr, mask = f"in{i}_ptr + cols", "cmask"
    elif op.cls == "one":
        ptr, mask = f"in{i}_ptr + rows * 0", "rmask"
    else:  # strided: per-dim indices, broadcast dims dropped; the zero term fixes the shape
        terms = [f"i{d} * in{i}_s{d}" for d in op.dims]
        shape, mask = ("off * 0", "mask") if op.layout == "full" else ("rows * 0", "rmask")
        ptr = f"in{i}_ptr + " + " + ".join(terms + [shape])
    return f"{mi.name} = tl.load({ptr}, mask={mask}, other=0){load_cast(dt)}"


def micro_lines(b: RowBuilder, ig: IndexGen, mi: Micro) -> list[str]:
    """A micro-op over the whole reduced extent in registers (single strategy)."""
    if mi.load >= 0:
        return [load_line(b, ig, mi)]
    if not mi.reduce:
        return [f"{mi.name} = {mi.expr}"]
    ax, keep = ig.ax, ig.keep
    masked = f"tl.where(mask, {mi.src}, {NEUTRAL[mi.reduce]})"
    if mi.reduce == "pick":
        return [f"{mi.name} = tl.sum(tl.where(mask & (cols == {mi.index}), {mi.src}, 0.0), axis={ax}){keep}"]
    if is_scan(mi):
        fn, _, rev = mi.reduce.partition("_")
        r = ", reverse=True" if rev else ""
        if fn in ("cummax", "cummin"):  # no tl builtin: an associative scan with max / min
            b.helpers.add(f"_{fn[3:]}_combine")
            return [f"{mi.name} = tl.associative_scan({masked}, {ax}, _{fn[3:]}_combine{r})"]
        return [f"{mi.name} = tl.{fn}({masked}, axis={ax}{r})"]
    if mi.reduce == "prod":
        b.helpers.add("_prod_combine")
        return [f"{mi.name} = tl.reduce({masked}, {ax}, _prod_combine){keep}"]
    return [f"{mi.name} = tl.{mi.reduce}({masked}, axis={ax}){keep}"]


def stores(outs: list[tuple[torch.fx.Node, str]], full: bool, row_mask: str = "rmask") -> list[str]:
    lines = []
    for j, (m, layout) in enumerate(outs):
        if layout == "full" and full:
            lines.append(f"tl.store(out{j}_ptr + off, v_{m.name}, mask=mask)")
        elif layout == "total" and not full:  # the block's share of a scalar (zero-filled)
            lines.append(f"tl.atomic_add(out{j}_ptr, tl.sum(tl.where({row_mask}, v_{m.name}, 0.0)))")
        elif layout != "full" and not full:
            lines.append(f"tl.store(out{j}_ptr + rows, v_{m.name}, mask={row_mask})")
    return lines


def single_body(b: RowBuilder, ig: IndexGen, outs: list[tuple[torch.fx.Node, str]]) -> list[str]:
    lines = ig.col_lines("0", "N")
    for mi in b.micros:
        lines += micro_lines(b, ig, mi)
    return lines + stores(outs, True) + stores(outs, False)


# ---- chunked passes --------------------------------------------------------------------

def _scan_step(b: RowBuilder, ig: IndexGen, mi: Micro) -> tuple[list[str], list[str]]:
    """(head, body) of a scan walked in chunks: the carry holds the previous chunks."""
    fn, _, rev = mi.reduce.partition("_")
    carry = f"carry_{mi.name}"
    neutral = NEUTRAL[mi.reduce]
    masked = f"tl.where(mask, {mi.src}, {neutral})"
    shape = "[BLOCK_M, 1]" if ig.ax == 1 else "[1, BLOCK_M]"
    head = [f"{carry} = tl.full({shape}, {neutral}, tl.float32)"]
    r = ", reverse=True" if rev else ""
    if fn == "cumsum":
        body = [f"{mi.name} = tl.cumsum({masked}, axis={ig.ax}{r}) + {carry}",
                f"{carry} = {carry} + tl.sum({masked}, axis={ig.ax}){ig.keep}"]
    elif fn in ("cummax", "cummin"):
        m = fn[3:]
        b.helpers.add(f"_{m}_combine")
        body = [f"{mi.name} = tl.{m}imum(tl.associative_scan({masked}, {ig.ax}, _{m}_combine{r}), {carry})",
                f"{carry} = tl.{m}imum({carry}, tl.{m}({masked}, axis={ig.ax}){ig.keep})"]
    else:
        b.helpers.add("_prod_combine")
        body = [f"{mi.name} = tl.cumprod({masked}, axis={ig.ax}{r}) * {carry}",
                f"{carry} = {carry} * tl.reduce({masked}, {ig.ax}, _prod_combine){ig.keep}"]
    return head, body


def chunk_pass(b: RowBuilder, ig: IndexGen, roots: list[str], tail: list[str], head: list[str],
               lo: str = "0", hi: str = "N") -> list[str]:
    """One walk over columns [lo, hi) in BLOCK_N chunks computing ``roots`` (and what
    they need) in each chunk, then ``tail``. Scans carry their running value; reverse
    scans walk the chunks from the end."""
    micros = b.closure(roots)
    scans = [mi for mi in micros if is_scan(mi)]
    reverse = {mi.reduce.endswith("_rev") for mi in scans}
    if len(reverse) > 1:
        raise LoweringError("forward and reverse scans in one pass")
    lines = list(head)
    body: list[str] = []
    if True in reverse:
        lines.append("for it in range(0, tl.cdiv(N, BLOCK_N)):")
        body.append("start = (tl.cdiv(N, BLOCK_N) - 1 - it) * BLOCK_N")
    else:
        lines.append(f"for start in range({lo}, {hi}, BLOCK_N):")
    body += ig.col_lines("start", hi)
    for mi in micros:
        if is_scan(mi):
            h, step = _scan_step(b, ig, mi)
            lines[:0] = h
            body += step
        else:
            body += micro_lines(b, ig, mi)
    return lines + ["    " + line for line in body + tail]


def reduce_pass(b: RowBuilder, ig: IndexGen, reds: list[Micro], pairs: dict[str, Micro],
                lo: str = "0", hi: str = "N", keep_best: bool = False) -> list[str]:
    """One pass computing several reductions of the same level into per-row values
    (``keep_best``: argmax / argmin also keep their best value as ``<name>_v``)."""
    ax, keep, tile = ig.ax, ig.keep, ig.tile
    head: list[str] = []
    tail: list[str] = []
    final: list[str] = []
    roots: list[str] = []
    for mi in reds:
        acc = f"acc_{mi.name}"
        roots.append(mi.src)
        if mi.name in pairs and mi.reduce == "max":
            s = pairs[mi.name]
            acs = f"acc_{s.name}"
            head += ["# online max + sum of exp: one pass, the running sum is rescaled as the max grows",
                     f'{acc} = tl.full({tile}, float("-inf"), tl.float32)',
                     f"{acs} = tl.zeros({tile}, dtype=tl.float32)"]
            tail += [f'xv = tl.where(mask, {mi.src}, float("-inf"))',
                     f"m_new = tl.maximum({acc}, xv)",
                     'm_ref = tl.where(m_new == float("-inf"), 0.0, m_new)  # lanes with nothing seen yet',
                     f"{acs} = {acs} * tl.exp({acc} - m_ref) + tl.exp(xv - m_ref)",
                     f"{acc} = m_new"]
            final += online_final(mi.name, s.name, acc, acs, ax, keep)
            continue
        if mi.name in pairs:  # centered pair: per-lane Welford (count, mean, M2)
            s = pairs[mi.name]
            acs, acn = f"acc_{s.name}", f"acc_{mi.name}_n"
            head += ["# sum and centred sum of squares in one pass: per-lane Welford states, then merged",
                     f"{acc} = tl.zeros({tile}, dtype=tl.float32)", f"{acs} = tl.zeros({tile}, dtype=tl.float32)",
                     f"{acn} = tl.zeros({tile}, dtype=tl.float32)"]
            tail += [f"wv = tl.where(mask, {mi.src}, 0.0)", f"{acn} = {acn} + tl.where(mask, 1.0, 0.0)",
                     f"w_delta = wv - {acc}",
                     f"{acc} = {acc} + tl.where(mask, w_delta / tl.maximum({acn}, 1.0), 0.0)",
                     f"{acs} = {acs} + tl.where(mask, w_delta * (wv - {acc}), 0.0)"]
            final += welford_final(mi.name, s.name, acc, acs, acn, ax, keep)
            continue
        neutral = NEUTRAL[mi.reduce]
        head.append(f"{acc} = tl.full({tile}, {neutral}, tl.float32)")
        masked = f"tl.where(mask, {mi.src}, {neutral})"
        if mi.reduce == "pick":
            tail.append(f"{acc} = {acc} + tl.where(mask & (cols == {mi.index}), {mi.src}, 0.0)")
            final.append(f"{mi.name} = tl.sum({acc}, axis={ax}){keep}")
        elif mi.reduce in ("argmax", "argmin"):
            cmp = ">" if mi.reduce == "argmax" else "<"
            head.append(f"{acc}_i = tl.zeros({tile}, dtype=tl.int32)")
            tail += [f"cand = {masked}", f"better = cand {cmp} {acc}",
                     f"{acc}_i = tl.where(better, cols + 0 * {acc}_i, {acc}_i)",
                     f"{acc} = tl.where(better, cand, {acc})"]
            final += arg_final(mi, acc, ax, keep, keep_best)
        else:
            combine = {"sum": f"{acc} + {masked}", "max": f"tl.maximum({acc}, {masked})",
                       "min": f"tl.minimum({acc}, {masked})", "prod": f"{acc} * {masked}"}[mi.reduce]
            tail.append(f"{acc} = {combine}")
            final.append(finish_line(b, mi.name, mi.reduce, acc, ax, keep))
    return chunk_pass(b, ig, roots, tail, head, lo, hi) + final


def finish_line(b: RowBuilder, name: str, kind: str, acc: str, ax: int, keep: str) -> str:
    if kind == "prod":
        b.helpers.add("_prod_combine")
        return f"{name} = tl.reduce({acc}, {ax}, _prod_combine){keep}"
    return f"{name} = tl.{kind}({acc}, axis={ax}){keep}"


def online_final(m: str, s: str, acc_m: str, acc_s: str, ax: int, keep: str) -> list[str]:
    return [f"{m} = tl.max({acc_m}, axis={ax}){keep}",
            f'm_row = tl.where({m} == float("-inf"), 0.0, {m})',
            f"{s} = tl.sum({acc_s} * tl.exp({acc_m} - m_row), axis={ax}){keep}"]


def welford_final(s1: str, s2: str, mean: str, m2: str, cnt: str, ax: int, keep: str) -> list[str]:
    """Per-row sum and centred sum of squares from per-lane Welford states (count, mean,
    M2): M2 = sum of lane M2 + sum of count * (lane mean - row mean)^2."""
    return [f"{s1} = tl.sum({mean} * {cnt}, axis={ax}){keep}",
            f"w_mu = {s1} / tl.maximum(tl.sum({cnt}, axis={ax}){keep}, 1.0)",
            f"{s2} = tl.sum({m2} + {cnt} * ({mean} - w_mu) * ({mean} - w_mu), axis={ax}){keep}"]


def arg_final(mi: Micro, acc: str, ax: int, keep: str, keep_best: bool) -> list[str]:
    fin = "max" if mi.reduce == "argmax" else "min"
    best = f"{mi.name}_v" if keep_best else "best"
    return [f"{best} = tl.{fin}({acc}, axis={ax}){keep}",
            f"{mi.name} = tl.min(tl.where({acc} == {best}, {acc}_i, {BIG_INDEX}), axis={ax}){keep}"]


def level_reductions(b: RowBuilder, lv: dict[str, int], pairs: dict[str, Micro], k: int) -> list[Micro]:
    fused = {s.name for s in pairs.values()}
    return [mi for mi in b.micros if mi.reduce and not is_scan(mi) and lv[mi.name] == k and mi.name not in fused]


def needed_rows(b: RowBuilder, reds: list[Micro]) -> set[str]:
    """Per-row values that the reductions ``reds`` read (directly or through full values)."""
    by_name = {mi.name: mi for mi in b.micros}
    stack = [d for mi in b.closure([r.src for r in reds]) for d in mi.deps] + [r.index for r in reds if r.index]
    need: set[str] = set()
    while stack:
        n = stack.pop()
        mi = by_name.get(n)
        if mi is None or mi.layout == "full" or n in need:
            continue
        need.add(n)
        if not mi.reduce:
            stack += mi.deps
    return need


def row_micros(b: RowBuilder, ig: IndexGen, lv: dict[str, int], below: int, done: set[str],
               only: set[str] | None = None) -> list[str]:
    """Per-row micro-ops available before pass ``below`` that were not emitted yet
    (``only``: just these)."""
    lines: list[str] = []
    for mi in b.micros:
        if mi.layout == "full" or mi.reduce or mi.name in done or lv[mi.name] >= below:
            continue
        if only is not None and mi.name not in only:
            continue
        done.add(mi.name)
        lines += micro_lines(b, ig, mi)
    return lines


def looped_body(b: RowBuilder, ig: IndexGen, outs: list[tuple[torch.fx.Node, str]], online: bool) -> list[str]:
    pairs = fused_pairs(b.micros, online)
    lv = levels(b.micros, pairs)
    top = max(lv.values(), default=0)
    lines: list[str] = []
    done: set[str] = set()
    for k in range(1, top + 1):
        lines += row_micros(b, ig, lv, k, done)
        reds = level_reductions(b, lv, pairs, k)
        if reds:
            lines += reduce_pass(b, ig, reds, pairs)
    lines += row_micros(b, ig, lv, top + 1, done)
    full_outs = [f"v_{m.name}" for m, layout in outs if layout == "full"]
    if full_outs:
        lines += chunk_pass(b, ig, full_outs, stores(outs, True), [])
    return lines + stores(outs, False)
