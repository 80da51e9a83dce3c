"""The index arithmetic of every ``gather``-form op: given the output coordinates
``o0 .. o{r-1}`` of a block of elements (and ``mask``), the kernel lines that load each
element's value from its source (``val``), the launcher's output shape and the run-time
arguments the arithmetic needs. Sources are read through their strides (no copies of
views), sizes are run-time arguments, and values keep their dtype (integers exact).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import torch

from kernelevolve.errors import LoweringError

from ...emit.lower_pointwise import literal


@dataclass
class Body:
    """What one gather-form op adds to the shared kernel and launcher."""

    ranks: list[int]  # strides each source passes (its rank as the kernel reads it)
    lines: list[str]  # kernel lines setting ``val`` from o0.. and ``mask``
    shape: list[str]  # launcher lines setting ``shape`` (after ``prep``)
    runtime: list[tuple[str, str]] = field(default_factory=list)  # (kernel arg, launcher expression)
    prep: list[str] = field(default_factory=list)  # launcher lines run first (views of the sources)


def load(k: int, coords: list[str], mask: str = "mask") -> str:
    """A load of source ``k`` at ``coords`` through its strides."""
    addr = " + ".join(f"({c}) * x{k}_s{j}" for j, c in enumerate(coords)) or "offs * 0"
    return f"tl.load(x{k}_ptr + {addr}, mask={mask}, other=0)"


def _fill(value: float, dtype: torch.dtype | None) -> str:
    if dtype is not None and not dtype.is_floating_point:
        return str(int(value))
    lit = literal(float(value))
    if lit is None:
        raise LoweringError(f"pad value {value!r}")
    return lit


def body(e: dict[str, Any], r: int, ranks_in: list[int], out_dtype: torch.dtype | None, tl_out: str) -> Body:
    """The ``Body`` of the op described by ``e`` (``index_ops``), output rank ``r``, the
    sources' ranks ``ranks_in``."""
    kind = e["kind"]
    o = [f"o{d}" for d in range(r)]
    same = "shape = tuple(x0.shape)"
    if kind == "flip":
        coords = [f"S{d} - 1 - o{d}" if d in e["dims"] else o[d] for d in range(r)]
        return Body([r], [f"    val = {load(0, coords)}"], [same])
    if kind == "roll" and e["dims"] is None:
        return Body([1], ["    f = (offs + R0) % n_out", f"    val = {load(0, ['f'])}"], [],
                    [("R0", f"(-{e['shifts'][0]}) % max(x0.numel(), 1)")],
                    ["shape = tuple(x0.shape)", "x0 = x0.reshape(-1)"])
    if kind == "roll":
        shift = dict(zip(e["dims"], e["shifts"], strict=True))
        coords = [f"(o{d} + R{d}) % S{d}" if d in shift else o[d] for d in range(r)]
        return Body([r], [f"    val = {load(0, coords)}"], [same],
                    [(f"R{d}", f"(-{s}) % max(x0.shape[{d}], 1)") for d, s in shift.items()])
    if kind == "cat":
        return _cat(e["dim"], r, len(ranks_in), tl_out)
    if kind == "stack":
        return _stack(e["dim"], r, len(ranks_in), tl_out)
    if kind in ("tril", "triu"):
        cmp = "<=" if kind == "tril" else ">="
        return Body([r], [f"    val = {load(0, o)}",
                          f"    keep = (o{r - 1} - o{r - 2}) {cmp} {int(e['diagonal'])}",
                          "    val = tl.where(keep, val, tl.zeros_like(val))"], [same])
    if kind == "repeat":
        rx = ranks_in[0]
        lead = r - rx
        coords = [f"o{lead + j} % X{j}" for j in range(rx)]
        return Body([rx], [f"    val = {load(0, coords)}"],
                    [f"shape = tuple(s * n for s, n in zip({tuple(e['sizes'])!r}, (1,) * {lead} + tuple(x0.shape)))"],
                    [(f"X{j}", f"x0.shape[{j}]") for j in range(rx)])
    if kind == "pad":
        return _pad(e, r, out_dtype)
    if kind == "index_select":
        d = e["dim"]
        coords = [("j" if k == d else o[k]) for k in range(r)]
        return Body([r, 1], [f"    j = {load(1, [o[d]])}", f"    val = {load(0, coords)}"],
                    [f"shape = (*x0.shape[:{d}], x1.shape[0], *x0.shape[{d + 1}:])"], prep=["x1 = x1.reshape(-1)"])
    if kind == "gather":
        d = e["dim"]
        coords = [("j" if k == d else o[k]) for k in range(r)]
        return Body([r, r], [f"    j = {load(1, o)}", f"    val = {load(0, coords)}"], ["shape = tuple(x1.shape)"])
    if kind == "embedding":
        return Body([r - 1, 2], [f"    row = {load(0, o[:-1])}",
                                 f"    val = tl.load(x1_ptr + row * x1_s0 + o{r - 1} * x1_s1, mask=mask, other=0)"],
                    ["shape = (*x0.shape, x1.shape[1])"])
    if kind in ("pixel_shuffle", "pixel_unshuffle"):
        return _pixel(kind, int(e["r"]), r)
    if kind == "repeat_interleave":
        reps = int(e["repeats"])
        if e["dim"] is None:
            return Body([1], [f"    val = {load(0, [f'o0 // {reps}'])}"], [f"shape = (x0.shape[0] * {reps},)"],
                        prep=["x0 = x0.reshape(-1)"])
        d = e["dim"]
        coords = [f"o{d} // {reps}" if k == d else o[k] for k in range(r)]
        return Body([r], [f"    val = {load(0, coords)}"],
                    [f"shape = (*x0.shape[:{d}], x0.shape[{d}] * {reps}, *x0.shape[{d + 1}:])"])
    if kind == "copy":
        return Body([r], [f"    val = {load(0, o)}"], [same], prep=[f"x0 = {e['view']}"])
    if kind == "rot90":
        a, b = e["dims"]
        coords = list(o)
        if e["k"] == 1:
            coords[a], coords[b] = f"o{b}", f"S{a} - 1 - o{a}"
        elif e["k"] == 2:
            coords[a], coords[b] = f"S{a} - 1 - o{a}", f"S{b} - 1 - o{b}"
        elif e["k"] == 3:
            coords[a], coords[b] = f"S{b} - 1 - o{b}", f"o{a}"
        shape = "shape = tuple(x0.shape)" if e["k"] % 2 == 0 else \
            f"shape = tuple(x0.shape[{b}] if d == {a} else x0.shape[{a}] if d == {b} else n " \
            "for d, n in enumerate(x0.shape))"
        return Body([r], [f"    val = {load(0, coords)}"], [shape])
    if kind == "take_flat":
        lines = [f"    j = {load(1, o)}", "    j = tl.where(j < 0, j + N, j)", f"    val = {load(0, ['j'])}"]
        return Body([1, r], lines, ["shape = tuple(x1.shape)"], [("N", "x0.shape[0]")], prep=["x0 = x0.reshape(-1)"])
    if kind == "diag_embed":
        b = _diag_embed(int(e["offset"]), int(e["dim1"]), int(e["dim2"]), r)
        b.prep = ["x0 = x0.reshape(-1)"] if e.get("flat") else []
        b.ranks = [1] if e.get("flat") else b.ranks
        return b
    if kind == "interpolate":
        return _interpolate(e, r)
    if kind == "index_fill":
        d = e["dim"]
        lines = [f"    val = {load(0, o)}",
                 "    for i in range(I):  # the indices naming this coordinate (negative ones wrap)",
                 "        j = tl.load(x1_ptr + i * x1_s0)",
                 f"        j = tl.where(j < 0, j + S{d}, j)",
                 f"        val = tl.where(o{d} == j, {_fill(e['value'], out_dtype)}, val)"]
        return Body([r, 1], lines, [same], [("I", "x1.shape[0]")], prep=["x1 = x1.reshape(-1)"])
    if kind == "take":
        return _take(int(e["first"]), int(e["count"]), r, ranks_in)
    if kind == "search":
        return _search(bool(e["right"]), bool(e["rows"]), r)
    raise LoweringError(f"no gather body for {kind}")


def _cat(d: int, r: int, k: int, tl_out: str) -> Body:
    lines: list[str] = []
    for i in range(k):
        coords = [(f"o{d} - c{i}" if j == d and i else f"o{j}") for j in range(r)]
        lo = f"(o{d} >= c{i})" if i else ""
        hi = f"(o{d} < c{i + 1})" if i + 1 < k else ""
        inside = " & ".join(p for p in (lo, hi) if p)
        if not inside:
            lines.append(f"    val = {load(i, coords)}.to({tl_out})")
            continue
        lines.append(f"    m{i} = {inside}")
        value = f"{load(i, coords, f'mask & m{i}')}.to({tl_out})"
        lines.append(f"    val = {value}" if i == 0 else f"    val = tl.where(m{i}, {value}, val)")
    parts = " + ".join(f"x{i}.shape[{d}]" for i in range(k))
    runtime = [(f"c{i}", " + ".join(f"x{j}.shape[{d}]" for j in range(i))) for i in range(1, k)]
    return Body([r] * k, lines, ["shape = list(x0.shape)", f"shape[{d}] = {parts}", "shape = tuple(shape)"],
                runtime)


def _stack(d: int, r: int, k: int, tl_out: str) -> Body:
    coords = [f"o{j}" for j in range(r) if j != d]
    lines: list[str] = []
    for i in range(k):
        value = f"{load(i, coords, f'mask & (o{d} == {i})')}.to({tl_out})"
        lines.append(f"    val = {value}" if i == 0 else f"    val = tl.where(o{d} == {i}, {value}, val)")
    return Body([r - 1] * k, lines, [f"shape = (*x0.shape[:{d}], {k}, *x0.shape[{d}:])"])


def _pad(e: dict[str, Any], r: int, out_dtype: torch.dtype | None) -> Body:
    pairs: dict[int, tuple[int, int]] = e["pairs"]
    mode = e["mode"]
    lines: list[str] = []
    coords = []
    inside = ["mask"]
    for d in range(r):
        if d not in pairs:
            coords.append(f"o{d}")
            continue
        lo = pairs[d][0]
        t = f"t{d}"
        coords.append(t)
        lines.append(f"    {t} = o{d} - {lo}")
        if mode == "constant":
            inside.append(f"({t} >= 0) & ({t} < X{d})")
        elif mode == "reflect":
            lines += [f"    {t} = tl.abs({t})", f"    {t} = (X{d} - 1) - tl.abs((X{d} - 1) - {t})"]
        elif mode == "replicate":
            lines.append(f"    {t} = tl.minimum(tl.maximum({t}, 0), X{d} - 1)")
        else:  # circular
            lines.append(f"    {t} = ({t} % X{d} + X{d}) % X{d}")
    if mode == "constant":
        lines += [f"    inside = {' & '.join(inside)}", f"    val = {load(0, coords, 'inside')}",
                  f"    val = tl.where(inside, val, {_fill(e['value'], out_dtype)})"]
    else:
        lines.append(f"    val = {load(0, coords)}")
    dims = ", ".join(f"x0.shape[{d}] + {sum(pairs[d])}" if d in pairs else f"x0.shape[{d}]" for d in range(r))
    return Body([r], lines, [f"shape = ({dims},)"], [(f"X{d}", f"x0.shape[{d}]") for d in sorted(pairs)])


def _take(first: int, count: int, r: int, ranks_in: list[int]) -> Body:
    """``x[:, i, j]``: the index tensors' coordinates replace the indexed dims."""
    m = ranks_in[1]
    at = [f"o{first + k}" for k in range(m)]
    coords = [f"o{d}" for d in range(first)] + [f"j{t}" for t in range(count)]
    coords += [f"o{d}" for d in range(first + m, r)]
    lines = []
    for t in range(count):
        lines += [f"    j{t} = {load(1 + t, at)}", f"    j{t} = tl.where(j{t} < 0, j{t} + X{t}, j{t})"]
    lines.append(f"    val = {load(0, coords)}")
    return Body([ranks_in[0]] + [m] * count, lines,
                [f"shape = (*x0.shape[:{first}], *x1.shape, *x0.shape[{first + count}:])"],
                [(f"X{t}", f"x0.shape[{first + t}]") for t in range(count)])


def _diag_embed(k: int, d1: int, d2: int, r: int) -> Body:
    """The input's last dim on diagonal ``k`` of dims (d1, d2) of the result, zeros elsewhere;
    the other dims of the result are the input's leading dims in order."""
    rest = [f"o{d}" for d in range(r) if d not in (d1, d2)]
    i = f"o{d1}" if k >= 0 else f"o{d2}"
    lines = [f"    on = (o{d2} - o{d1}) == {k}", f"    val = {load(0, rest + [i], 'mask & on')}",
             "    val = tl.where(on, val, tl.zeros_like(val))"]
    n = f"x0.shape[-1] + {abs(k)}"
    lead = "list(x0.shape[:-1])"
    shape = [f"dims = {lead}", f"for d in sorted(({d1}, {d2})):", f"    dims.insert(d, {n})", "shape = tuple(dims)"]
    return Body([r - 1], lines, shape)


# bicubic's convolution coefficient (torch's upsample_bicubic2d: A = -0.75)
_CUBIC_A = -0.75


def _interpolate(e: dict[str, Any], r: int) -> Body:
    """Resampling of the last ``r - 2`` dims. Each spatial dim's source coordinate follows
    torch's ``area_pixel_compute_source_index``: ``SC`` (a run-time float the launcher
    computes as torch does: (in - 1) / (out - 1) aligned, 1 / scale_factor when given,
    else in / out); nearest floors ``o * SC`` ((o + 0.5) * SC for nearest-exact), linear
    modes blend the two neighbours of ((o + 0.5) * SC - 0.5, clamped at 0) or o * SC
    aligned, bicubic the four around it (indices clamped at the borders)."""
    mode, nd = e["mode"], r - 2
    lead = ["o0", "o1"]
    lines: list[str] = []
    taps: list[list[tuple[str, str]]] = []  # per spatial dim: (index, weight) pairs
    for k in range(nd):
        d = k + 2
        o, sc, x = f"o{d}.to(tl.float32)", f"SC{k}", f"X{k}"
        if mode in ("nearest", "nearest-exact"):
            src = f"({o} + 0.5) * {sc}" if mode == "nearest-exact" else f"{o} * {sc}"
            lines.append(f"    i{k} = tl.minimum(tl.floor({src}).to(tl.int32), {x} - 1)")
            taps.append([(f"i{k}", "")])
            continue
        if e["align"]:
            lines.append(f"    s{k} = {o} * {sc}")
        elif mode == "bicubic":
            lines.append(f"    s{k} = ({o} + 0.5) * {sc} - 0.5")
        else:
            lines.append(f"    s{k} = tl.maximum(({o} + 0.5) * {sc} - 0.5, 0.0)")
        lines += [f"    f{k} = tl.floor(s{k})", f"    t{k} = s{k} - f{k}", f"    i{k} = f{k}.to(tl.int32)"]
        if mode != "bicubic":
            lines += [f"    i{k} = tl.minimum(i{k}, {x} - 1)", f"    j{k} = tl.minimum(i{k} + 1, {x} - 1)"]
            taps.append([(f"i{k}", f"(1.0 - t{k})"), (f"j{k}", f"t{k}")])
            continue
        a = _CUBIC_A
        near = f"(({a + 2!r} * {{u}} - {a + 3!r}) * {{u}} * {{u}} + 1.0)"
        far = f"((({a!r} * {{u}} - {5 * a!r}) * {{u}} + {8 * a!r}) * {{u}} - {4 * a!r})"
        weights = [far.format(u=f"(t{k} + 1.0)"), near.format(u=f"t{k}"), near.format(u=f"(1.0 - t{k})"),
                   far.format(u=f"(2.0 - t{k})")]
        pairs = []
        for m, w in enumerate(weights):
            lines += [f"    c{k}_{m} = tl.minimum(tl.maximum(i{k} + {m - 1}, 0), {x} - 1)", f"    w{k}_{m} = {w}"]
            pairs.append((f"c{k}_{m}", f"w{k}_{m}"))
        taps.append(pairs)
    terms = []
    for combo in itertools.product(*taps):
        value = f"{load(0, lead + [i for i, _ in combo])}.to(tl.float32)"
        weight = " * ".join(w for _, w in combo if w)
        terms.append(f"{weight} * {value}" if weight else value)
    lines.append("    val = " + " + ".join(terms))
    sizes = e["size"]
    shape = [f"out = {tuple(sizes)!r}" if sizes is not None else
             f"out = tuple(int(math.floor(n * f)) for n, f in zip(x0.shape[2:], {tuple(e['scale'])!r}))",
             "shape = (*x0.shape[:2], *out)"]
    runtime = [(f"X{k}", f"x0.shape[{k + 2}]") for k in range(nd)]
    for k in range(nd):
        if e["align"]:
            sc = f"(x0.shape[{k + 2}] - 1) / (out[{k}] - 1) if out[{k}] > 1 else 0.0"
        elif e["scale"] is not None:
            sc = repr(1.0 / e["scale"][k])
        else:
            sc = f"x0.shape[{k + 2}] / out[{k}]"
        runtime.append((f"SC{k}", sc))
    return Body([r], lines, shape, runtime)


def _pixel(kind: str, f: int, r: int) -> Body:
    lead = [f"o{d}" for d in range(r - 3)]
    c, h, w = f"o{r - 3}", f"o{r - 2}", f"o{r - 1}"
    if kind == "pixel_shuffle":
        coords = lead + [f"{c} * {f * f} + ({h} % {f}) * {f} + {w} % {f}", f"{h} // {f}", f"{w} // {f}"]
        shape = f"shape = (*x0.shape[:-3], x0.shape[-3] // {f * f}, x0.shape[-2] * {f}, x0.shape[-1] * {f})"
    else:
        coords = lead + [f"{c} // {f * f}", f"{h} * {f} + ({c} % {f * f}) // {f}", f"{w} * {f} + {c} % {f}"]
        shape = f"shape = (*x0.shape[:-3], x0.shape[-3] * {f * f}, x0.shape[-2] // {f}, x0.shape[-1] // {f})"
    return Body([r], [f"    val = {load(0, coords)}"], [shape])


def _search(right: bool, rows: bool, r: int) -> Body:
    """Binary search of each value in a sorted sequence (the last dim of x1, per row of
    the leading dims when ``rows``): torch's lower / upper bound, NaN past every entry."""
    stay = "b > v" if right else "b >= v"
    base = " + ".join(f"o{d} * x1_s{d}" for d in range(r - 1)) if rows else "0"
    last = f"x1_s{r - 1}" if rows else "x1_s0"
    lines = [f"    v = {load(0, [f'o{d}' for d in range(r)])}",
             f"    base = {base}",
             "    lo = tl.zeros([BLOCK_SIZE], dtype=tl.int64)",
             "    hi = lo + NB",
             "    for _ in range(STEPS):",
             "        mid = (lo + hi) // 2",
             "        act = lo < hi",
             f"        b = tl.load(x1_ptr + base + mid * {last}, mask=mask & act, other=0)",
             f"        stay = {stay}",
             "        lo = tl.where(act & (stay == 0), mid + 1, lo)",
             "        hi = tl.where(act & stay, mid, hi)",
             "    val = lo"]
    return Body([r, r if rows else 1], lines, ["shape = tuple(x0.shape)"],
                [("NB", "x1.shape[-1]"), ("STEPS", "x1.shape[-1].bit_length()")])
