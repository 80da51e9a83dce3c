"""Code generation for matmul groups: mm / bmm / matmul (batched, broadcast, matvec),
linear and addmm as one tiled ``tl.dot`` kernel with the bias and any following
pointwise ops (activation, scaling, residual add, ...) fused as an epilogue.

Choices (genome): BLOCK_M/N/K tiles, GROUP_M grouped program ordering (neighbouring
programs share B tiles in L2), num_warps, num_stages and the fp32 dot precision
(``tf32x3`` by default for fp32 operands, ``ieee``, and ``tf32`` only when the spec
declares a loose tolerance; see ``dot_precision``).
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.fx

from kernelevolve.errors import LoweringError

from ...emit.grid import FOLD_PARAMS, program_id_lines, wide_offsets
from ...emit.launch_helpers import cached_plan_lines, tuple_source
from ...emit.lower_pointwise import PointwiseEmitter, literal
from ...emit.operands import inline_constant, kernel_name, load_cast
from ...emit.precision import CUBLAS, DOT_PRECISIONS, dot_precision, dot_precisions, dot_seed
from ...frontend.fx_meta import dtype_of, shape_of
from ...frontend.ops import NormOp
from ...plan.plan import Group, Plan, PlanContext
from ...plan.plan_outputs import group_outputs
from ..family import Emitted, KernelFamily, LaunchArgs, Recognised

MATMUL_OPS = {"linear", "matmul", "addmm"}
TRI_KEYS = ("out_tri", "a_tri", "b_tri")


def tri_lines(info: dict[str, Any], skip: bool) -> tuple[list[str], str, str]:
    """Kernel lines bounding the K loop (``k_lo``, ``k_hi``) of a triangular problem, and
    the extra load masks of a and b. ``skip``: a tile the output mask zeroes runs no K
    iteration, and a triangular operand's zero part of K is never loaded (tril(a): rows i
    need k <= i + d only); otherwise the full K range with masked loads."""
    lines = ["k_lo = 0", "k_hi = K"]
    a_mask = b_mask = ""
    m_lo, m_hi = "pid_m * BLOCK_M", "pid_m * BLOCK_M + BLOCK_M"
    n_lo, n_hi = "pid_n * BLOCK_N", "pid_n * BLOCK_N + BLOCK_N"
    if "a_tri" in info:
        kind, d = info["a_tri"]
        a_mask = f" & (kk[None, :] {'<=' if kind == 'lower' else '>='} rm[:, None] + {d})"
        if skip:  # a[i, k] is zero past (lower) / before (upper) k = i + d
            lines.append(f"k_hi = tl.minimum(k_hi, {m_hi} + {d})" if kind == "lower" else
                         f"k_lo = tl.maximum(k_lo, {m_lo} + {d})")
    if "b_tri" in info:
        kind, d = info["b_tri"]
        b_mask = f" & (rn[None, :] {'<=' if kind == 'lower' else '>='} kk[:, None] + {d})"
        if skip:  # b[k, j] is zero for k < j - d (lower) / k > j - d (upper)
            lines.append(f"k_lo = tl.maximum(k_lo, {n_lo} - {d})" if kind == "lower" else
                         f"k_hi = tl.minimum(k_hi, {n_hi} - {d})")
    if "out_tri" in info and skip:
        kind, d = info["out_tri"]
        dead = f"{n_lo} > {m_hi} - 1 + {d}" if kind == "lower" else f"{n_hi} - 1 < {m_lo} + {d}"
        lines.append(f"k_hi = tl.where({dead}, k_lo, k_hi)  # tile fully masked: no K iteration")
    return lines, a_mask, b_mask


def matmul_info(node: torch.fx.Node, op: NormOp, pshape: Any) -> dict[str, Any] | None:
    """Operands and ranks of a matmul-family node; None when not lowerable."""
    if op.op not in MATMUL_OPS or shape_of(node) is None:
        return None

    def shp(v: Any) -> tuple[int, ...] | None:
        if isinstance(v, str) and v.startswith("@"):
            return tuple(pshape(v[1:]))
        return shape_of(v)

    def ok_dtype(v: Any) -> bool:
        d = dtype_of(v) if isinstance(v, torch.fx.Node) else torch.float32
        return d in (torch.float32, torch.float16, torch.bfloat16)

    if op.op == "linear":
        a, b, bias = op.args["input"], op.args["weight"], op.args.get("bias")
        sa, sb = shp(a), shp(b)
        if sa is None or sb is None or len(sb) != 2 or len(sa) < 1:
            return None
        info = {"kind": "linear", "a": a, "b": b, "bias": bias, "alpha": 1.0, "beta": 1.0,
                "a_rank": len(sa), "b_rank": 2}
    elif op.op == "addmm":
        a, b, bias = op.args["mat1"], op.args["mat2"], op.args["input"]
        sa, sb = shp(a), shp(b)
        if sa is None or sb is None or len(sa) != 2 or len(sb) != 2:
            return None
        if not isinstance(op.args["alpha"], (int, float)) or not isinstance(op.args["beta"], (int, float)):
            return None
        info = {"kind": "matmul", "a": a, "b": b, "bias": bias, "alpha": float(op.args["alpha"]),
                "beta": float(op.args["beta"]), "a_rank": 2, "b_rank": 2}
    else:
        a, b = op.args["input"], op.args["other"]
        sa, sb = shp(a), shp(b)
        if sa is None or sb is None or not sa or not sb or (len(sa) == 1 and len(sb) == 1):
            return None
        info = {"kind": "matmul", "a": a, "b": b, "bias": None, "alpha": 1.0, "beta": 1.0,
                "a_rank": len(sa), "b_rank": len(sb)}
        # triangular masks of the output or an operand (overrides.triangular_overrides)
        info.update({k: op.args[k] for k in TRI_KEYS if op.args.get(k) is not None})
    if not all(ok_dtype(v) for v in (info["a"], info["b"])):
        return None
    if info["bias"] is not None and not (isinstance(info["bias"], str) or shape_of(info["bias"]) is not None):
        return None
    return info


# A K of at least this many elements is long: 256 blocks of the default BLOCK_K (32) or
# more. The seed then sums the blocks compensated and, where the output has few tiles,
# splits K over more programs (split_k_seed).
LONG_K = 8192
# programs a split-K seed aims for: two per SM of a 132-SM H100 / H200
SPLIT_K_PROGRAMS = 264


def problem_size(info: dict[str, Any], pshape: Any) -> tuple[int, int, int, int]:
    """(M, N, K, batch) of a matmul group at the captured shapes (batch dims folded into M
    where the kernel folds them)."""

    def shp(v: Any) -> tuple[int, ...]:
        if isinstance(v, str) and v.startswith("@"):
            return tuple(pshape(v[1:]))
        return tuple(shape_of(v) or ())

    sa, sb = shp(info["a"]), shp(info["b"])
    if len(sa) == 1:
        sa = (1, *sa)
    if info["kind"] == "linear":
        return math.prod(sa[:-1]), sb[0], sa[-1], 1
    if len(sb) == 1:
        sb = (*sb, 1)
    if not batched(info):
        return math.prod(sa[:-1]), sb[-1], sa[-1], 1
    batch = math.prod(torch.broadcast_shapes(sa[:-2], sb[:-2]))
    return sa[-2], sb[-1], sa[-1], batch


def split_k_seed(m: int, n: int, k: int, batch: int, block_m: int = 64, block_n: int = 64) -> str:
    """The seed's SPLIT_K: 1 unless K is long and the output has fewer tiles than
    SPLIT_K_PROGRAMS, then the power of two (up to 32) that brings the programs there: a
    [256, 2^20] x [2^20] product has 4 output tiles of 64 rows, so 4 programs would walk
    the whole K on a GPU of 132 SMs."""
    tiles = -(-m // block_m) * -(-n // block_n) * batch
    split = 1
    while k >= LONG_K and split < 32 and tiles * split < SPLIT_K_PROGRAMS and k // (split * 2) >= 1024:
        split *= 2
    return str(split)


def split_offered(group: Group) -> bool:
    """Split-K adds partial sums atomically: only a product alone in its group (a linear
    epilogue: bias, alpha, beta) that is not triangular. A seed the recogniser derived
    from the shapes is dropped once an epilogue joins the group."""
    return len(group.members) == 1 and not any(k in group.info["matmul"] for k in TRI_KEYS)


def batched(info: dict[str, Any]) -> bool:
    """Whether the problem keeps a batch grid dimension (broadcast batch dims of both
    operands); otherwise every leading dim of a folds into the rows of one 2-D problem."""
    return info["kind"] != "linear" and max(info["b_rank"], 2) > 2


def _views_body(info: dict[str, Any], batch_read: str = "in_place") -> list[str]:
    """Runtime code of the views function: a and b as [(batch,) rows, K] x [(batch,) K, cols]
    views, the output shape and the (batch,) m, n, k sizes. ``batch_read`` (batched only):
    ``in_place`` reads permuted or broadcast operands through their strides; ``contiguous``
    first copies an operand that is not contiguous (broadcasting stays a stride-0 view)."""
    ar, br = info["a_rank"], info["b_rank"]
    if info["kind"] == "linear":
        return [
            "    # linear: rows of a (all leading dims) times weight^T, read through strides",
            "    k = a.shape[-1]",
            "    out_shape = (*a.shape[:-1], b.shape[0])",
            "    a = a.reshape(-1, k)",
            "    b = b.t()",
            "    sizes = (a.shape[0], b.shape[1], k)",
        ]
    lines = []
    if ar == 1:
        lines.append("    a = a.unsqueeze(0)  # vector-matrix: a row vector")
    if br == 1:
        lines.append("    b = b.unsqueeze(-1)  # matrix-vector: a column vector")
    lines.append("    k = a.shape[-1]")
    if not batched(info):
        lines += ["    # batch dims of a fold into rows: one [M, K] x [K, N] problem",
                  "    out_shape = (*a.shape[:-1], b.shape[-1])",
                  "    a = a.reshape(-1, k)",
                  "    sizes = (a.shape[0], b.shape[1], k)"]
    else:
        if batch_read == "contiguous":
            lines += ["    # permuted operands copied row-major first: contiguous rows for the tile loads",
                      "    a = a.contiguous()",
                      "    b = b.contiguous()"]
        lines += ["    batch = _broadcast_shape(a.shape[:-2], b.shape[:-2])",
                  "    out_shape = (*batch, a.shape[-2], b.shape[-1])",
                  "    # N-d (broadcast) batch dims as three batch levels, read in place when strides allow",
                  "    a, b = _batch3(a.expand(*batch, a.shape[-2], k), b.expand(*batch, k, b.shape[-1]))",
                  "    sizes = (a.shape[0] * a.shape[1] * a.shape[2], a.shape[3], b.shape[4], k)"]
    if ar == 1:
        lines.append("    out_shape = out_shape[:-2] + out_shape[-1:]")
    if br == 1:
        lines.append("    out_shape = out_shape[:-1]")
    return lines


def gen_matmul(plan: Plan, group: Group, genome: dict[str, str], emitter: PointwiseEmitter) -> tuple[str, str, str]:
    mm = group.members[0]
    info = group.info["matmul"]
    bm, bn, bk, gm_, warps, stages = (int(MatmulFamily.value(genome, group, k)) for k in
                                      ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_warps", "num_stages"))
    precision, note = dot_precision(MatmulFamily.value(genome, group, "precision"))
    tri = any(k in info for k in TRI_KEYS)
    k_bounds, a_tri_mask, b_tri_mask = tri_lines(info, MatmulFamily.value(genome, group, "TRI_SKIP") == "skip")
    # split-K: SPLIT_K programs share one output tile, each summing a slice of K and
    # adding it atomically; only offered when the epilogue is linear (bias / alpha)
    split_k = int(MatmulFamily.value(genome, group, "SPLIT_K")) if split_offered(group) else 1
    compensated = MatmulFamily.value(genome, group, "K_ACC") == "compensated"

    # epilogue operands: bias/addmm input and external operands of fused pointwise ops
    ext: list[Any] = []
    scalars: list[torch.fx.Node] = []

    def val(v: Any) -> str:
        if isinstance(v, torch.fx.Node) and plan.group_of.get(v) is group:
            return f"v_{v.name}"
        const = inline_constant(plan, v)
        if const is not None:  # torch.tensor(c) made in the forward: a literal (matmul_launch_args skips it)
            return str(literal(const))
        if isinstance(v, str) or (isinstance(v, torch.fx.Node) and shape_of(v) is not None):
            if v not in ext:
                ext.append(v)
            return f"e{ext.index(v)}"
        if isinstance(v, torch.fx.Node):
            if v not in scalars:
                scalars.append(v)
            return f"s{scalars.index(v)}"
        lit = literal(v)
        if lit is None:
            raise LoweringError(f"unsupported operand {v!r}")
        return lit

    epi: list[str] = []
    if "out_tri" in info:  # the triangle mask applies to the product, before any epilogue op
        kind, d = info["out_tri"]
        epi.append(f"acc = tl.where(cols {'<=' if kind == 'lower' else '>='} rows + {d}, acc, 0.0)")
    head = "acc" if info["alpha"] == 1.0 else f"acc * {info['alpha']!r}"
    if info["bias"] is not None:
        bias = val(info["bias"])
        if split_k > 1:
            bias = f"tl.where(sid == 0, {bias}, 0.0)"  # the bias is added by one split only
        head = f"{head} + {bias}" if info["beta"] == 1.0 else f"{head} + {info['beta']!r} * {bias}"
    epi.append(f"v_{mm.name} = {head}")
    for m in group.members[1:]:
        expr = emitter.emit(group.ops[m], val)
        if expr is None:
            raise LoweringError(f"cannot emit {group.ops[m].op}")
        epi.append(f"v_{m.name} = {expr}")
    outs = group_outputs(plan, group)
    loads = []
    for i, v in enumerate(ext):
        dt = dtype_of(v) if isinstance(v, torch.fx.Node) else torch.float32
        batch = f"bid * e{i}_sb + " if batched(info) else ""
        loads.append(f"e{i} = tl.load(e{i}_ptr + {batch}rows * e{i}_sm + cols * e{i}_sn, mask=mask, other=0)"
                     f"{load_cast(dt)}")

    name = kernel_name(group, "matmul")
    bat = batched(info)
    dims = ("b", "m", "n") if bat else ("m", "n")
    sig = ["a_ptr", "b_ptr"] + [f"e{i}_ptr" for i in range(len(ext))] + [f"out{j}_ptr" for j in range(len(outs))]
    sig += ["M", "N", "K"] + (["B1", "B2", "a_sb0", "a_sb1", "a_sb2"] if bat else []) + ["a_sm", "a_sk"]
    sig += (["b_sb0", "b_sb1", "b_sb2"] if bat else []) + ["b_sk", "b_sn"]
    sig += [f"e{i}_s{x}" for i in range(len(ext)) for x in dims]
    sig += [f"s{i}" for i in range(len(scalars))]
    # grid axes: tiles, then the batch (batched) and the K slice (split-K); past one axis
    # the kernel can unfold a folded grid (emit/grid.py)
    ids = ["pid"] + (["bid"] if bat or split_k > 1 else []) + (["sid"] if split_k > 1 else [])
    if len(ids) > 1:
        sig.append(FOLD_PARAMS)
    wide = wide_offsets(group)
    fused = " -> ".join(group.ops[m].op for m in group.members)
    dot = f'tl.dot(a, b, input_precision="{precision}")'
    k_lines = [
        "@triton.jit",
        f"def {name}(",
        f"    {', '.join(sig)},",
        "    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,"
        + (" SPLIT_K: tl.constexpr," if split_k > 1 else ""),
        "):",
        f"    # Fuses {fused}: tiled dot product with the epilogue applied to the fp32 accumulator.",
        *program_id_lines(ids, wide=wide, fold=True),
        *(["    # batch: three levels (b0, b1, b2) of the operands' batch strides",
           "    b0 = bid // (B1 * B2)",
           "    b1 = (bid // B2) % B1",
           "    b2 = bid % B2",
           "    a_ptr += b0 * a_sb0 + b1 * a_sb1 + b2 * a_sb2",
           "    b_ptr += b0 * b_sb0 + b1 * b_sb1 + b2 * b_sb2"] if bat else []),
        "    # grouped ordering: GROUP_M row-tiles advance together so B tiles are reused",
        "    num_pid_m = tl.cdiv(M, BLOCK_M)",
        "    num_pid_n = tl.cdiv(N, BLOCK_N)",
        "    num_pid_in_group = GROUP_M * num_pid_n",
        "    group_id = pid // num_pid_in_group",
        "    first_pid_m = group_id * GROUP_M",
        "    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)",
        "    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)",
        "    pid_n = (pid % num_pid_in_group) // group_size_m",
        "    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)",
        "    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)",
        # wide: K offsets too (kk * a_sk of a transposed operand reaches its element count)
        "    rk = tl.arange(0, BLOCK_K)" + (".to(tl.int64)" if wide else ""),
        "    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)",
        *(["    acc_c = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)"] if compensated else []),
        *(["    k_per = tl.cdiv(tl.cdiv(K, SPLIT_K), BLOCK_K) * BLOCK_K",
           "    for k0 in range(sid * k_per, tl.minimum(K, (sid + 1) * k_per), BLOCK_K):"] if split_k > 1 else
          ["    " + ln for ln in k_bounds] + ["    for k0 in range(k_lo, k_hi, BLOCK_K):"] if tri else
          ["    for k0 in range(0, K, BLOCK_K):"]),
        "        kk = k0 + rk",
        "        a = tl.load(a_ptr + rm[:, None] * a_sm + kk[None, :] * a_sk,",
        f"                    mask=(rm[:, None] < M) & (kk[None, :] < K){a_tri_mask}, other=0.0)",
        "        b = tl.load(b_ptr + kk[:, None] * b_sk + rn[None, :] * b_sn,",
        f"                    mask=(kk[:, None] < K) & (rn[None, :] < N){b_tri_mask}, other=0.0)",
        *("        " + line for line in note),
        *([f"        acc += {dot}"] if not compensated else [
            "        # compensated (Kahan) sum over the K blocks: the rounding error of each add is",
            "        # carried in acc_c, so the error does not grow with the number of blocks",
            f"        y = {dot} - acc_c",
            "        t = acc + y",
            "        acc_c = (t - acc) - y",
            "        acc = t"]),
        "    rows = rm[:, None]",
        "    cols = rn[None, :]",
        "    mask = (rows < M) & (cols < N)",
    ]
    k_lines += ["    " + line for line in loads + epi]
    off = ("bid * M * N + " if bat else "") + "rows * N + cols"
    for j, m in enumerate(outs):
        if split_k > 1:
            k_lines.append(f"    tl.atomic_add(out{j}_ptr + {off}, v_{m.name}, mask=mask)")
        else:
            k_lines.append(f"    tl.store(out{j}_ptr + {off}, v_{m.name}, mask=mask)")
    kernel = "\n".join(k_lines) + "\n"

    launcher = matmul_launcher(name, info, len(ext), len(scalars), [dtype_of(o) or torch.float32 for o in outs],
                               (bm, bn, bk, gm_, split_k, warps, stages),
                               batch_read=MatmulFamily.value(genome, group, "BATCH_READ"))
    return kernel, launcher, f"launch_{name}"


def matmul_launcher(name: str, info: dict[str, Any], n_ext: int, n_scalars: int, out_dtypes: list[torch.dtype],
                    cfg: tuple[int, ...], batch_read: str = "in_place") -> str:
    """Launcher source: the operand views, sizes, strides and grid are computed once per
    input signature (sizes and strides of every operand) and cached; the kernel then
    reads the caller's tensors directly (a view has its base's address). When a view
    needs a copy (a broadcast epilogue operand that cannot be flattened, a batch that
    does not fold), the views are rebuilt on every call."""
    bm, bn, bk, gm_, split_k, warps, stages = cfg
    bat = batched(info)
    tensors = ["a", "b"] + [f"e{i}" for i in range(n_ext)]
    scalars = [f"s{i}" for i in range(n_scalars)]
    cache = f"_plans_{name}"
    ll = [f"{cache} = {{}}  # input signature -> launch plan", "", "",
          f"def _views_{name}({', '.join(tensors)}):"] + _views_body(info, batch_read)
    for i in range(n_ext):
        ll.append(f"    e{i} = e{i}.expand(out_shape).reshape(sizes[:-1])  # epilogue operand as the output")
    ll += [f"    return out_shape, sizes, {', '.join(tensors)}", "", "",
           f"def _plan_{name}({', '.join(tensors)}):",
           f"    out_shape, sizes, *views = _views_{name}({', '.join(tensors)})",
           f"    same = all(_same_data(v, t) for v, t in zip(views, {tuple_source(tensors)}))",
           "    strides = tuple(s for v in views for s in v.stride())"]
    if bat:
        ll += ["    bt, m, n, k = sizes",
               f"    grid = (((m + {bm - 1}) // {bm}) * ((n + {bn - 1}) // {bn}), bt"
               + (f", {split_k})" if split_k > 1 else ")")]
    else:
        ll += ["    m, n, k = sizes", "    bt = 1",
               f"    grid = (((m + {bm - 1}) // {bm}) * ((n + {bn - 1}) // {bn}),"
               + (f" 1, {split_k})" if split_k > 1 else ")")]
    # batched: the views are [B0, B1, B2, r, c] (_batch3); the kernel takes B1, B2 and every level's strides
    dims_arg = "(m, n, k, views[0].shape[1], views[0].shape[2])" if bat else "(m, n, k)"
    multi = bat or split_k > 1  # a grid of more than one axis: folded past CUDA's limits
    ll += ["    grid = grid if bt * m * n > 0 else None"]
    ll += ["    grid, fold = _fold_grid(grid)"] if multi else []
    ll += [f"    return tuple(out_shape), same, grid, {dims_arg} + strides{', fold' if multi else ''}", "", "",
           f"def launch_{name}({', '.join(tensors + scalars)}):"]
    ll += cached_plan_lines(cache, tuple_source([p for t in tensors for p in (f'{t}.shape', f'{t}.stride()')]),
                            f"_plan_{name}({', '.join(tensors)})",
                            "out_shape, same, grid, sizes_strides" + (", fold" if multi else ""))
    ll += ["    if not same:  # some operand view is a copy: rebuild the views",
           f"        _, _, {', '.join(tensors)} = _views_{name}({', '.join(tensors)})"]
    alloc = "torch.zeros" if split_k > 1 else "torch.empty"  # split-K accumulates into zeros
    for j, dt in enumerate(out_dtypes):
        ll.append(f"    out{j} = {alloc}(out_shape, device=a.device, dtype={dt})")
    call = tensors + [f"out{j}" for j in range(len(out_dtypes))] + ["*sizes_strides"] + scalars
    call += ["*fold"] if multi else []
    ll += ["    if grid is not None:",
           f"        {name}[grid]({', '.join(call)},",
           f"            BLOCK_M={bm}, BLOCK_N={bn}, BLOCK_K={bk}, GROUP_M={gm_},"
           + (f" SPLIT_K={split_k}," if split_k > 1 else "") + f" num_warps={warps}, num_stages={stages})",
           f"    return {', '.join(f'out{j}' for j in range(len(out_dtypes)))}"]
    return "\n".join(ll) + "\n"


def matmul_launch_args(plan: Plan, group: Group) -> tuple[list[Any], list[torch.fx.Node]]:
    info = group.info["matmul"]
    ext: list[Any] = []
    scalars: list[torch.fx.Node] = []

    def note(v: Any) -> None:
        if (isinstance(v, torch.fx.Node) and plan.group_of.get(v) is group) or inline_constant(plan, v) is not None:
            return
        if isinstance(v, str) or (isinstance(v, torch.fx.Node) and shape_of(v) is not None):
            if v not in ext:
                ext.append(v)
        elif isinstance(v, torch.fx.Node) and v not in scalars:
            scalars.append(v)

    if info["bias"] is not None:
        note(info["bias"])
    for m in group.members[1:]:
        op = group.ops[m]
        for v in _emit_order(op):
            note(v)
    return [info["a"], info["b"]] + ext + scalars, group_outputs(plan, group)


def _emit_order(op: NormOp) -> list[Any]:
    """Operands in the order the pointwise emitter visits them (matches val() calls)."""
    seen: list[Any] = []
    emitter = PointwiseEmitter()

    def val(v: Any) -> str:
        seen.append(v)
        return "x"

    emitter.emit(op, val)
    return seen


class MatmulFamily(KernelFamily):
    """mm / bmm / matmul / linear / addmm with a fused pointwise epilogue."""

    kind = "matmul"
    epilogue = True
    knobs = {
        "BLOCK_M": ("64", "32", "128", "16"),
        "BLOCK_N": ("64", "32", "128", "16"),
        "BLOCK_K": ("32", "16", "64"),
        "GROUP_M": ("8", "1", "4"),
        "num_warps": ("4", "2", "8"),
        "num_stages": ("3", "2", "4"),
        "precision": DOT_PRECISIONS,
        # K split across programs with atomic adds (linear epilogues only); past 4 only for
        # a long K (``split_k_seed``)
        "SPLIT_K": ("1", "2", "4", "8", "16", "32"),
        # how the K loop adds its blocks' products: plain (acc += dot) or compensated (Kahan:
        # the rounding error of every add carried to the next). The seed of a long K
        # (``LONG_K``): a sequential fp32 sum of K / BLOCK_K block products loses accuracy
        # with their number (a matrix-vector product with a very long K was judged
        # incorrect on an H200: error 2.11 against float64, 47x eager's own, whose cuBLAS
        # reduction splits K over many partial sums)
        "K_ACC": ("plain", "compensated"),
        # triangular problems only (tril / triu of the output or of an operand): skip the
        # tiles the mask zeroes and the K range a triangular operand is zero over, or
        # compute every tile with masked loads (same result; for comparison)
        "TRI_SKIP": ("skip", "mask"),
        # batched products: operands with permuted batch dims (q, k, v after transpose(1, 2))
        # read in place through their strides, or copied row-major first. A GPT block with
        # head dim 8 reached 1.12x eager on the H100 when its operands were copied and 0.58x
        # once they were read in place, its kernels otherwise unchanged (bench/RESULTS.md,
        # third session); not yet timed side by side, so the search decides per spec.
        "BATCH_READ": ("in_place", "contiguous"),
    }

    def recognise(self, node: torch.fx.Node, op: NormOp | None, ctx: PlanContext) -> Recognised | None:
        if op is None:
            return None
        minfo = matmul_info(node, op, ctx.param_shape)
        if minfo is None:
            return None
        tri = any(k in minfo for k in TRI_KEYS)
        m, n, k, batch = problem_size(minfo, ctx.param_shape)
        splits = ["1", "2", "4"] + (["8", "16", "32"] if k >= LONG_K else [])
        allowed = {"precision": dot_precisions(ctx.spec, dtype_of(node), ctx.precision, CUBLAS),
                   "SPLIT_K": splits if dtype_of(node) == torch.float32 and not tri else ["1"]}
        seed = dot_seed(dtype_of(node), ctx.precision, CUBLAS)
        seed.update({"K_ACC": "compensated"} if k >= LONG_K else {})
        if dtype_of(node) == torch.float32 and not tri:
            seed["SPLIT_K"] = split_k_seed(m, n, k, batch)
        return op, {"matmul": minfo, "allowed": allowed, "seed": seed}

    def group_knobs(self, plan: Plan, group: Group, genome: dict[str, str]) -> list[tuple[str, tuple[str, ...]]]:
        # a non-linear epilogue cannot be applied to partial sums
        tri = any(k in group.info["matmul"] for k in TRI_KEYS)
        return [(name, choices) for name, choices in super().group_knobs(plan, group, genome)
                if not (name == "SPLIT_K" and not split_offered(group)) and not (name == "TRI_SKIP" and not tri)
                and not (name == "BATCH_READ" and not batched(group.info["matmul"]))]

    def generate(self, plan: Plan, group: Group, genome: dict[str, str], emitter: PointwiseEmitter) -> Emitted:
        return gen_matmul(plan, group, genome, emitter)

    def launch_args(self, plan: Plan, group: Group) -> LaunchArgs:
        return matmul_launch_args(plan, group)
