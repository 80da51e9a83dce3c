"""Code generation for flat pointwise groups: one masked 1-D kernel per group.

Operands with the output's shape are read with the flat index ``offs``: in place when
contiguous, otherwise from a ``.contiguous()`` copy made by the launcher, except for
row-pitched views. An operand the example run saw as R rows of C elements P apart (last
dim stride 1, leading dims collapsing into one: a chunk of the last dim, ``x[:, 1:]``;
see ``captured_pitched``) gets a ``PITCHED<i>`` constexpr and a pitch argument; the
launcher's per-signature plan sets the flag when the run-time tensor is such a view
(``_flat_read`` in launch_helpers.py) and the kernel reads ``offs // C * P + offs % C``
in place, no copy kernel. Contiguous operands keep the plain ``offs`` addressing (the
flag is a constexpr: the other branch is not compiled). Broadcast operands (bias over
the last dim, per-channel scales, ...) are read through their expanded strides,
unravelling the flat index over the runtime shape.

Genome knob ``VEC`` (groups whose operands are all read flat, see ``flat_operands``):
``auto`` is the plain kernel; ``4`` adds a ``VEC`` constexpr chosen per call by the
launcher. With VEC = 4 the offsets are declared to come in aligned runs of 4 contiguous
elements and the mask bound is rounded down to a multiple of 4 (exact, since the
launcher checked ``n_elements % 4 == 0``), so Triton sees the mask constant over each
run and can emit 128-bit loads / stores for fp32 even when ``n_elements`` is not a
multiple of 16 (Triton's own integer specialisation only covers that case). The launcher
passes VEC = 1 (the plain kernel's mask) when the element count is not a multiple of 4,
an input's address is not 16-byte aligned or an operand is read pitched, so the candidate
is correct on every input.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx

from kernelevolve.errors import LoweringError

from ...emit.grid import program_id_lines, wide_id, wide_offsets
from ...emit.launch_helpers import cached_plan_lines, helper_function, tuple_source
from ...emit.lower_pointwise import PointwiseEmitter, literal
from ...emit.operands import inline_constant, is_tensor_operand, kernel_name, load_cast, operand_shape
from ...frontend.fx_meta import dtype_of, tensor_meta
from ...plan.plan import Group, Plan, node_inputs
from ...plan.plan_outputs import group_outputs
from ..family import Emitted, KernelFamily, LaunchArgs


@dataclass
class Operands:
    """External operands of a group, in kernel-argument order."""

    tensors: list[Any] = field(default_factory=list)  # fx Node or "@param.path"
    scalars: list[torch.fx.Node] = field(default_factory=list)

    def tensor_index(self, v: Any) -> int:
        if v not in self.tensors:
            self.tensors.append(v)
        return self.tensors.index(v)

    def scalar_index(self, v: torch.fx.Node) -> int:
        if v not in self.scalars:
            self.scalars.append(v)
        return self.scalars.index(v)


def collect_operands(plan: Plan, group: Group) -> Operands:
    ops = Operands()
    for m in group.members:
        for v in node_inputs(group.ops[m]):
            if isinstance(v, torch.fx.Node) and plan.group_of.get(v) is group:
                continue
            if is_tensor_operand(plan, v):
                ops.tensor_index(v)
            elif isinstance(v, torch.fx.Node) and inline_constant(plan, v) is None:
                ops.scalar_index(v)
    return ops


def operand_value_fn(plan: Plan, group: Group, ops: Operands, load_names: dict[int, str]):
    """Map an op argument to its in-kernel expression."""

    def val(v: Any) -> str:
        if isinstance(v, torch.fx.Node) and plan.group_of.get(v) is group:
            return f"v_{v.name}"
        const = inline_constant(plan, v)
        if const is not None:
            return literal(const) or "0.0"
        if is_tensor_operand(plan, v):
            return load_names[ops.tensor_index(v)]
        if isinstance(v, torch.fx.Node):
            return f"s{ops.scalar_index(v)}"
        lit = literal(v)
        if lit is None:
            raise LoweringError(f"unsupported operand {v!r}")
        return lit

    return val


VEC_CHOICES = ("auto", "4")
# How a kernel with broadcast operands unravels the flat index. runtime: output dims and
# broadcast strides are kernel arguments (one compile serves every shape). static: they are
# constexprs (one compile per input signature, as torch.compile's default static shapes):
# the divisions by dims become multiply-shifts and the terms of dims an operand broadcasts
# over (stride 0) vanish, so a per-channel scale costs one index, not rank - 1 div/mods.
INDEX_CHOICES = ("runtime", "static")


def flat_operands(plan: Plan, group: Group) -> bool:
    """Every tensor operand of a pointwise group has the output's shape, so the kernel reads
    them all with the flat index (contiguous or row-pitched): the ``VEC`` knob is
    only offered then (a broadcast operand is read through unravelled strides)."""
    ops = collect_operands(plan, group)
    return bool(ops.tensors) and all(operand_shape(plan, v) == group.shape for v in ops.tensors)


def _knob(genome: dict[str, str], key: str, name: str, choices: tuple[str, ...]) -> str:
    """Group ``key``'s value of knob ``name`` (its first choice when absent), validated."""
    value = genome.get(f"{key}.{name}", choices[0])
    if value not in choices:
        raise LoweringError(f"unknown {name} choice {value!r}")
    return value


def vec_width(genome: dict[str, str], key: str, flat: bool) -> int:
    """The VEC knob of a group as a run length; 0 for ``auto`` (the plain kernel) and for
    groups with broadcast operands (the knob is not offered there)."""
    value = _knob(genome, key, "VEC", VEC_CHOICES)
    return 0 if value == "auto" or not flat else int(value)


def static_index(genome: dict[str, str], key: str) -> bool:
    return _knob(genome, key, "index", INDEX_CHOICES) == "static"


_FLAT_READ = helper_function("_flat_read")  # the launchers' rule, applied here to captured layouts


def captured_pitched(v: Any) -> bool:
    """Whether the example run saw operand ``v`` as a row-pitched view (``_flat_read``: a
    chunk of the last dim, ``x[:, 1:]``, ...). Only such operands get a ``PITCHED<i>`` flag
    and a pitch argument: kernels whose operands were all contiguous keep the plain
    signature (every kernel argument costs binder time on each launch) and copy a
    non-contiguous operand at run time, as before."""
    meta = tensor_meta(v) if isinstance(v, torch.fx.Node) else None
    if meta is None or len(meta.shape) < 2:
        return False
    t = torch.empty_strided(tuple(meta.shape), tuple(meta.stride), device="meta")
    return bool(_FLAT_READ(t, int(meta.shape[-1]))[2])


def persistent(lines: list[str], ids: list[str], extent: str, block: str, tile: str, wide: bool = False) -> list[str]:
    """Turn a one-tile-per-program kernel body (after ``ids``, its program-id lines) into a
    grid-stride loop: a fixed number of programs walk all tiles (int64 tiles with ``wide``)."""
    at = lines.index(ids[0])
    head, body = lines[:at], lines[at + len(ids):]
    loop = [f"    # persistent: programs stride over the {extent} / {block} tiles",
            f"    for {tile} in range({wide_id('tl.program_id(0)', wide)}, tl.cdiv({extent}, {block}), "
            "tl.num_programs(0)):"]
    return head + loop + ["    " + line for line in body]


def gen_pointwise(plan: Plan, group: Group, genome: dict[str, str], emitter: PointwiseEmitter) -> tuple[str, str, str]:
    """Returns (kernel source, launcher source, launcher name)."""
    ops = collect_operands(plan, group)
    outs = group_outputs(plan, group)
    rank = len(group.shape)
    full = [operand_shape(plan, v) == group.shape for v in ops.tensors]
    name = kernel_name(group, "pointwise")
    block = int(PointwiseFamily.value(genome, group, "BLOCK_SIZE"))
    warps = int(PointwiseFamily.value(genome, group, "num_warps"))
    vec = vec_width(genome, group.key, bool(ops.tensors) and all(full))
    # same-shape operands that may be row-pitched views read in place (PITCHED<i> constexprs);
    # rows have row_len elements: the last output dim (d<rank-1> when the kernel unravels)
    pitched = [i for i, v in enumerate(ops.tensors) if full[i] and rank >= 2 and captured_pitched(v)]
    row_len = "row_len" if all(full) else f"d{rank - 1}"

    in_ptrs = [f"in{i}_ptr" for i in range(len(ops.tensors))]
    out_ptrs = [f"out{j}_ptr" for j in range(len(outs))]
    dims = [f"d{k}" for k in range(1, rank)]  # d0 is never needed to unravel
    strides = [f"in{i}_s{k}" for i in range(len(ops.tensors)) if not full[i] for k in range(rank)]
    pitches = [f"in{i}_pitch" for i in pitched]
    scalars = [f"s{i}" for i in range(len(ops.scalars))]
    static = static_index(genome, group.key) and not all(full)
    if static:
        dims = [f"{d}: tl.constexpr" for d in dims]
        strides = [f"{st}: tl.constexpr" for st in strides]
    sig = (in_ptrs + out_ptrs + ["n_elements"] + (["row_len"] if pitched and all(full) else [])
           + (dims if not all(full) else []) + strides + pitches + scalars)
    flags = "".join(f" PITCHED{i}: tl.constexpr," for i in pitched)
    fused = " -> ".join(group.ops[m].op for m in group.members)
    knob = [f"    # VEC={vec}: offsets in aligned runs of {vec} (128-bit accesses for fp32); the launcher passes",
            f"    # VEC=1 when n_elements % {vec} != 0, an input is not 16-byte aligned or one is pitched."
            ] if vec else []
    pitch_note = [f"    # PITCHED<i>: input i is a row-pitched view (rows of {row_len} elements, in<i>_pitch apart,",
                  "    # e.g. a chunk of the last dim) read in place instead of a contiguous copy."] if pitched else []
    wide = wide_offsets(group)
    ids = program_id_lines(["pid"], wide=wide)
    lines = [
        "@triton.jit",
        f"def {name}(",
        f"    {', '.join(sig)},",
        "    BLOCK_SIZE: tl.constexpr," + (" VEC: tl.constexpr," if vec else "") + flags,
        "):",
        f"    # Fuses {fused}: each input read once, each output written once.",
        *pitch_note,
        *knob,
        *ids,
        "    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)",
    ]
    if vec:
        lines += [
            "    if VEC > 1:",
            "        # the launcher checked n_elements % VEC == 0 and 16-byte aligned inputs: the rounded",
            "        # bound is exact and keeps the mask constant over each run of VEC",
            "        offs = tl.max_contiguous(tl.multiple_of(offs, VEC), VEC)",
            "        mask = offs < n_elements // VEC * VEC",
            "    else:",
            "        mask = offs < n_elements",
        ]
    else:
        lines.append("    mask = offs < n_elements")
    if not all(full):
        lines.append("    # Unravel the flat index over the output shape for broadcast operands.")
        if static:
            lines.append("    # index=static: dims and strides are constexprs (constant divisors, no stride-0 terms).")
        lines.append("    rem = offs")
        for k in reversed(range(rank)):
            if k == 0:
                lines.append("    i0 = rem")
            else:
                lines.append(f"    i{k} = rem % d{k}")
                lines.append(f"    rem = rem // d{k}")
    load_names: dict[int, str] = {}
    for i, v in enumerate(ops.tensors):
        load_names[i] = f"a{i}"
        if i in pitched:
            lines.append(f"    o{i} = offs // {row_len} * in{i}_pitch + offs % {row_len} if PITCHED{i} else offs")
            addr = f"in{i}_ptr + o{i}"
        elif full[i]:
            addr = f"in{i}_ptr + offs"
        else:
            terms = " + ".join(f"i{k} * in{i}_s{k}" for k in range(rank)) or "0 * offs"
            addr = f"in{i}_ptr + {terms}"
        cast = load_cast(dtype_of(v) if isinstance(v, torch.fx.Node) else torch.float32)
        lines.append(f"    a{i} = tl.load({addr}, mask=mask, other=0){cast}")
    val = operand_value_fn(plan, group, ops, load_names)
    for m in group.members:
        expr = emitter.emit(group.ops[m], val)
        lines.append(f"    v_{m.name} = {expr}")
    for j, m in enumerate(outs):
        lines.append(f"    tl.store(out{j}_ptr + offs, v_{m.name}, mask=mask)")
    programs = PointwiseFamily.value(genome, group, "programs")
    if programs != "grid":
        lines = persistent(lines, ids, "n_elements", "BLOCK_SIZE", "pid", wide)
    kernel = "\n".join(lines) + "\n"

    launcher = pointwise_launcher(name, ops, full, rank, outs, block, warps, programs, vec, pitched)
    return kernel, launcher, f"launch_{name}"


def pointwise_launcher(name: str, ops: Operands, full: list[bool], rank: int, outs: list[torch.fx.Node],
                       block: int, warps: int, programs: str, vec: int = 0, pitched: list[int] | None = None) -> str:
    """Launcher source. Same-shape operands are read flat: contiguous ones in place, those
    in ``pitched`` in place as rows when they are row-pitched views (``_flat_read``,
    ``PITCHED<i>``), any other from a ``.contiguous()`` copy (free when contiguous).
    Broadcast operands are read through the strides of their expanded view. With broadcast
    or pitched operands, everything that depends only on the input signature (sizes,
    strides: output shape, grid, block, broadcast strides, how each operand is read) is
    computed once and kept in a small per-launcher cache. No torch.broadcast_shapes,
    expand or triton.cdiv per call."""
    pitched = pitched or []
    n_t = len(ops.tensors)
    scalars = [f"s{i}" for i in range(len(ops.scalars))]
    params = [f"t{i}" for i in range(n_t)] + scalars
    fulls = [i for i in range(n_t) if full[i]]
    bcast = [i for i in range(n_t) if not full[i]]
    launcher = f"launch_{name}"
    dtypes = [dtype_of(m) or torch.float32 for m in outs]
    grid_of = "(n + block - 1) // block"
    if programs != "grid":
        grid_of = f"min({grid_of}, {int(programs)})"
    aligned = " and ".join(f"t{i}.data_ptr() % 16 == 0" for i in fulls)
    call = ([f"t{i}" for i in range(n_t)] + [f"out{j}" for j in range(len(outs))] + ["n"]
            + (["c"] if pitched and not bcast else []) + (["*tail"] if bcast else [])
            + [f"p{i}" for i in pitched] + scalars)
    kw = ["BLOCK_SIZE=block"] + (["VEC=vec"] if vec else []) + [f"PITCHED{i}=pitched{i}" for i in pitched]
    launch = f"        {name}[grid]({', '.join(call)}, {', '.join(kw)}, num_warps={warps})"
    ret = f"    return {', '.join(f'out{j}' for j in range(len(outs)))}"
    ll: list[str] = []
    if not bcast and not pitched:  # all read flat from contiguous tensors: no plan needed
        ll.append(f"def {launcher}({', '.join(params)}):")
        if len(fulls) > 1:
            cond = " or ".join(f"t{i}.shape != t0.shape" for i in fulls[1:])
            ll += [f"    if {cond}:  # operands broadcast at run time: materialise them at the common shape",
                   f"        shape = _broadcast_shape({', '.join(f't{i}.shape' for i in fulls)})"]
            ll += [f"        t{i} = t{i}.expand(shape)" for i in fulls]
        ll += [f"    t{i} = t{i}.contiguous()" for i in fulls]
        ll += [f"    out{j} = torch.empty_like(t0, dtype={dt}, memory_format=torch.contiguous_format)"
               for j, dt in enumerate(dtypes)]
        ll += ["    n = t0.numel()", "    if n > 0:", f"        block = min({block}, _pow2(n))",
               f"        grid = ({grid_of},){'  # persistent programs' if programs != 'grid' else ''}"]
        if vec:
            ll += [f"        # VEC={vec} needs n % {vec} == 0 and 16-byte aligned inputs (contiguous above; the",
                   "        # outputs are fresh allocations): otherwise the same kernel runs with VEC=1",
                   f"        vec = {vec} if n % {vec} == 0 and {aligned} else 1"]
        return "\n".join(ll + [launch, ret]) + "\n"

    ts = ", ".join(f"t{i}" for i in range(n_t))
    cache = f"_plans_{name}"
    key = tuple_source([p for i in range(n_t) for p in ([f"t{i}.shape"] if full[i] and i not in pitched else
                                                        [f"t{i}.shape", f"t{i}.stride()"])])
    reads = [f"copy{i}, p{i}, pitched{i}" for i in pitched]
    items = (["shape", "materialise", "n", "grid", "block"] + (["vec_ok"] if vec else [])
             + (["c"] if pitched and not bcast else []) + reads + (["tail"] if bcast else []))
    about = ("output shape, whether same-shape operands must be materialised (they broadcast at run time), "
             "element count, grid, block" + (", whether VEC may be 4" if vec else "")
             + ("; per pitchable operand: copied?, row pitch, PITCHED flag" if pitched else "")
             + (", then output dims 1.. and broadcast strides" if bcast else ""))
    ll += [f"{cache} = {{}}  # input signature -> launch plan", "", "",
           f"def _plan_{name}({ts}):",
           *textwrap.wrap(about, 90, initial_indent="    # ", subsequent_indent="    # "),
           f"    shape = _broadcast_shape({', '.join(f't{i}.shape' for i in (range(n_t) if bcast else fulls))})"]
    if bcast:
        ll += [f"    if len(shape) > {rank}:",
               f"        raise RuntimeError(f'{name}: output rank {{len(shape)}} > {rank}')",
               f"    padded = (1,) * ({rank} - len(shape)) + shape"]
    ll += [f"    materialise = {' or '.join(f't{i}.shape != shape' for i in fulls) or 'False'}",
           "    n = math.prod(shape)",
           f"    block = min({block}, _pow2(n))"]
    if pitched:
        ll.append("    c = shape[-1] if shape else 1  # row length of pitched reads")
        ll += [f"    copy{i}, p{i}, pitched{i} = (True, c, False) if materialise else _flat_read(t{i}, c)"
               for i in pitched]
    if vec:
        ll.append(f"    vec_ok = n % {vec} == 0" + "".join(f" and not pitched{i}" for i in pitched)
                  + "  # a multiple of VEC, all read flat")
    if bcast:
        ll.append("    tail = padded[1:]")
        ll += [f"    tail += _expanded_strides(padded, t{i}.shape, t{i}.stride())" for i in bcast]
    ll += [f"    return {', '.join(f'({grid_of},)' if i == 'grid' else i for i in items)}", "", "",
           f"def {launcher}({', '.join(params)}):"]
    ll += cached_plan_lines(cache, key, f"_plan_{name}({ts})", ", ".join(items))
    if fulls:
        ll += ["    if materialise:  # same-shape operands that broadcast at run time"]
        ll += [f"        t{i} = t{i}.expand(shape)" for i in fulls]
        for i in fulls:
            if i in pitched:
                note = "  # neither contiguous nor row-pitched, or materialised" if i == pitched[0] else ""
                ll += [f"    if copy{i}:{note}", f"        t{i} = t{i}.contiguous()"]
            else:
                ll.append(f"    t{i} = t{i}.contiguous()")
        ll += [f"    out{j} = torch.empty_like(t{fulls[0]}, dtype={dt}, memory_format=torch.contiguous_format)"
               for j, dt in enumerate(dtypes)]
    else:
        ll += [f"    out{j} = torch.empty(shape, device=t0.device, dtype={dt})" for j, dt in enumerate(dtypes)]
    ll.append("    if n > 0:")
    if vec:
        ll += [f"        # VEC={vec} needs n % {vec} == 0, no pitched operand and 16-byte aligned inputs (the",
               "        # outputs are fresh allocations): otherwise the same kernel runs with VEC=1",
               f"        vec = {vec} if vec_ok and {aligned} else 1"]
    return "\n".join(ll + [launch, ret]) + "\n"


def launcher_args(plan: Plan, group: Group) -> tuple[list[Any], list[torch.fx.Node]]:
    ops = collect_operands(plan, group)
    return list(ops.tensors) + list(ops.scalars), group_outputs(plan, group)


class PointwiseFamily(KernelFamily):
    """Elementwise chains over one shape (the partitioner's fusion rules grow them)."""

    kind = "pointwise"
    knobs = {
        "BLOCK_SIZE": ("1024", "256", "512", "2048", "4096"),
        "num_warps": ("4", "1", "2", "8"),
        # grid: one program per tile; N: N persistent programs stride over the tiles
        "programs": ("grid", "128", "512"),
        # auto: the plain kernel; 4: offsets in aligned runs of 4 with the mask bound rounded
        # to a multiple of 4, so Triton can emit 128-bit accesses; the launcher falls back to
        # VEC=1 when numel % 4 != 0 or an input is not 16-byte aligned (flat groups only)
        "VEC": VEC_CHOICES,
        # broadcast operands: output dims and strides as arguments or as constexprs
        # (INDEX_CHOICES; groups with a broadcast operand only)
        "index": INDEX_CHOICES,
    }

    def group_knobs(self, plan: Plan, group: Group, genome: dict[str, str]) -> list[tuple[str, tuple[str, ...]]]:
        if "flat" not in group.info:  # computed once per plan
            group.info["flat"] = flat_operands(plan, group)
        flat = bool(group.info["flat"])
        # VEC: a broadcast operand is read through unravelled strides, not in runs;
        # index: nothing is unravelled when every operand is read flat
        return [(name, choices) for name, choices in super().group_knobs(plan, group, genome)
                if not (name == "VEC" and not flat) and not (name == "index" and flat)]

    def generate(self, plan: Plan, group: Group, genome: dict[str, str], emitter: PointwiseEmitter) -> Emitted:
        return gen_pointwise(plan, group, genome, emitter)

    def launch_args(self, plan: Plan, group: Group) -> LaunchArgs:
        return launcher_args(plan, group)
