"""The ``split`` row strategy: few, long rows (full reductions such as losses, batch-norm
statistics per channel, column reductions with few kept columns) would leave most of
the GPU idle with one program per row block. Here each row block's columns are split
into S contiguous ranges, one program each:

- one ``_part<k>`` kernel per reduction level (see row_body.levels): each program
  reduces its range and writes per-row partials to a [slots, S, M] fp32 buffer
  (deterministic: no atomics); a later kernel combines the S partials of earlier levels
  first (e.g. variance: level 1 sums x, level 2 sums (x - mean)^2);
- a ``_finish`` kernel combines all partials, applies the per-row epilogue and stores
  row outputs; with full-size outputs it runs on the same (rows, S) grid and each
  program writes its own column range.

Every reduction kind splits: sum, mean-like epilogues, max / min / prod, argmax / argmin
(value and index partials), gather picks, online max + sum(exp) pairs (combined with
rescaling) and centred pairs (sum and sum of squared deviations from the mean, as in
variance and batch norm: per-range Welford states merged with Chan's formula, so batch
norm needs one statistics kernel, then the normalizing one). Scans do not.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch.fx

from ...emit.grid import program_id_lines
from ...plan.lower_reduction import Micro
from .row_body import (
    BIG_INDEX,
    NEUTRAL,
    arg_final,
    chunk_pass,
    finish_line,
    fused_pairs,
    is_scan,
    level_reductions,
    levels,
    needed_rows,
    online_final,
    reduce_pass,
    row_micros,
    stores,
    welford_final,
)
from .row_builder import RowBuilder
from .row_layout import IndexGen


@dataclass
class SplitPlan:
    pairs: dict[str, Micro]
    lv: dict[str, int]
    top: int  # number of partial passes
    slots: dict[str, int] = field(default_factory=dict)  # fp32 partial slot per reduction value
    islots: dict[str, int] = field(default_factory=dict)  # int32 index slot (argmax / argmin)

    @property
    def nslots(self) -> int:
        return len(self.slots)


def split_plan(b: RowBuilder) -> SplitPlan | None:
    """How the group splits, or None (scans need whole rows in order)."""
    if any(is_scan(mi) for mi in b.micros) or "total" in b.layouts.values():
        return None  # a scalar total is accumulated by the row blocks of one kernel
    pairs = fused_pairs(b.micros)
    lv = levels(b.micros, pairs)
    plan = SplitPlan(pairs, lv, max(lv.values(), default=0))
    for k in range(1, plan.top + 1):
        for mi in level_reductions(b, lv, pairs, k):
            plan.slots[mi.name] = len(plan.slots)
            if mi.name in pairs:
                plan.slots[pairs[mi.name].name] = len(plan.slots)
            if mi.reduce in ("argmax", "argmin"):
                plan.islots[mi.name] = len(plan.islots)
    return plan if plan.top else None


def _combine(b: RowBuilder, ig: IndexGen, sp: SplitPlan, reds: list[Micro]) -> list[str]:
    """Per-row values of ``reds`` from their S partials."""
    if not reds:
        return []
    ax, keep = ig.ax, ig.keep
    tile = "[BLOCK_M, BLOCK_S]" if ig.ax == 1 else "[BLOCK_S, BLOCK_M]"
    head: list[str] = []
    body = [f"sidx = sb + tl.arange(0, BLOCK_S){ig.colx}", "smask = rmask & (sidx < S)", "poff = sidx * M + rows"]
    final: list[str] = []

    def part(name: str, neutral: str) -> str:
        return f"tl.load(part_ptr + {sp.slots[name]} * S * M + poff, mask=smask, other={neutral})"

    for mi in reds:
        acc = f"acc_{mi.name}"
        if mi.name in sp.pairs and mi.reduce == "sum":  # centered pair: Chan's merge of (sum, M2, count)
            s = sp.pairs[mi.name]
            acs, acn = f"acc_{s.name}", f"acc_{mi.name}_n"
            b.helpers.add("_welford_combine")
            head += [f"{acc} = tl.zeros({tile}, dtype=tl.float32)", f"{acs} = tl.zeros({tile}, dtype=tl.float32)",
                     f"{acn} = tl.zeros({tile}, dtype=tl.float32)"]
            body += ["cnt = tl.where(smask, tl.minimum(CHUNK, N - sidx * CHUNK), 0).to(tl.float32)",
                     f"mean = {part(mi.name, '0.0')} / tl.maximum(cnt, 1.0)",
                     f"m2 = {part(s.name, '0.0')}",
                     f"{acc}, {acs}, {acn} = _welford_combine({acc}, {acs}, {acn}, mean, m2, cnt)"]
            final += welford_final(mi.name, s.name, acc, acs, acn, ax, keep)
            continue
        if mi.name in sp.pairs:
            s = sp.pairs[mi.name]
            acs = f"acc_{s.name}"
            head += [f'{acc} = tl.full({tile}, float("-inf"), tl.float32)',
                     f"{acs} = tl.zeros({tile}, dtype=tl.float32)"]
            body += [f"mv = {part(mi.name, NEUTRAL['max'])}", f"sv = {part(s.name, '0.0')}",
                     f"m_new = tl.maximum({acc}, mv)", 'm_ref = tl.where(m_new == float("-inf"), 0.0, m_new)',
                     f"{acs} = {acs} * tl.exp({acc} - m_ref) + sv * tl.exp(mv - m_ref)", f"{acc} = m_new"]
            final += online_final(mi.name, s.name, acc, acs, ax, keep)
            continue
        kind = "sum" if mi.reduce == "pick" else mi.reduce
        neutral = NEUTRAL[kind]
        head.append(f"{acc} = tl.full({tile}, {neutral}, tl.float32)")
        if kind in ("argmax", "argmin"):
            cmp = ">" if kind == "argmax" else "<"
            head.append(f"{acc}_i = tl.full({tile}, {BIG_INDEX}, tl.int32)")
            idx = f"tl.load(pidx_ptr + {sp.islots[mi.name]} * S * M + poff, mask=smask, other={BIG_INDEX})"
            # ranges are visited in column order, so a strict compare keeps the first index
            body += [f"cand = {part(mi.name, neutral)}", f"better = cand {cmp} {acc}",
                     f"{acc}_i = tl.where(better, {idx}, {acc}_i)", f"{acc} = tl.where(better, cand, {acc})"]
            final += arg_final(mi, acc, ax, keep, False)
            continue
        update = {"sum": f"{acc} + v", "max": f"tl.maximum({acc}, v)", "min": f"tl.minimum({acc}, v)",
                  "prod": f"{acc} * v"}[kind]
        body += [f"v = {part(mi.name, neutral)}", f"{acc} = {update}"]
        final.append(finish_line(b, mi.name, kind, acc, ax, keep))
    return head + ["for sb in range(0, S, BLOCK_S):"] + ["    " + line for line in body] + final


def _store_partials(sp: SplitPlan, reds: list[Micro]) -> list[str]:
    lines = []
    for mi in reds:
        names = [mi.name] + ([sp.pairs[mi.name].name] if mi.name in sp.pairs else [])
        for n in names:
            val = f"{n}_v" if mi.reduce in ("argmax", "argmin") else n
            lines.append(f"tl.store(part_ptr + ({sp.slots[n]} * S + sid) * M + rows, {val}, mask=rmask)")
        if mi.name in sp.islots:
            lines.append(f"tl.store(pidx_ptr + ({sp.islots[mi.name]} * S + sid) * M + rows, {mi.name}, mask=rmask)")
    return lines


def split_kernels(b: RowBuilder, ig: IndexGen, sp: SplitPlan, outs: list[tuple[torch.fx.Node, str]],
                  header: Callable[[str, list[str], str], list[str]], fused: str) -> list[str]:
    """Kernel sources: ``header(suffix, extra_args, comment)`` gives each kernel's
    decorator, signature and comment lines."""
    extra = ["part_ptr"] + (["pidx_ptr"] if sp.islots else []) + ["S", "CHUNK"]
    # grid (row blocks, S): S stays under 1,000 (row_launcher), far inside CUDA's axis-1 limit
    ids = [ln.strip() for ln in program_id_lines(["blk", "sid"], wide=ig.wide)]
    prologue = [*ids, *ig.row_lines("blk"),
                "lo = sid * CHUNK", "hi = tl.minimum(lo + CHUNK, N)"]
    kernels = []
    done_reds: list[Micro] = []
    for k in range(1, sp.top + 1):
        reds = level_reductions(b, sp.lv, sp.pairs, k)
        what = ", ".join(f"{mi.reduce}" for mi in reds)
        lines = header(f"part{k}", extra, f"Fuses {fused}: level-{k} partial reductions ({what}) of one "
                                          f"column range per program (split strategy).")
        body = list(prologue) + _combine(b, ig, sp, done_reds)
        body += row_micros(b, ig, sp.lv, k, set(), needed_rows(b, reds))
        body += reduce_pass(b, ig, reds, sp.pairs, "lo", "hi", keep_best=True)
        body += _store_partials(sp, reds)
        kernels.append("\n".join(lines + ["    " + line for line in body]) + "\n")
        done_reds += reds
    has_full = any(layout == "full" for _, layout in outs)
    lines = header("finish", extra, f"Fuses {fused}: combines the split partials, per-row epilogue"
                                    + (", full outputs of one column range per program." if has_full else "."))
    body = (prologue if has_full else
            [*(ln.strip() for ln in program_id_lines(["blk"], wide=ig.wide)), *ig.row_lines("blk")])
    body = body + _combine(b, ig, sp, done_reds) + row_micros(b, ig, sp.lv, sp.top + 1, set())
    full_outs = [f"v_{m.name}" for m, layout in outs if layout == "full"]
    if full_outs:
        body += chunk_pass(b, ig, full_outs, stores(outs, True), [], "lo", "hi")
        body += stores(outs, False, "rmask & (sid == 0)")
    else:
        body += stores(outs, False)
    kernels.append("\n".join(lines + ["    " + line for line in body]) + "\n")
    return kernels
