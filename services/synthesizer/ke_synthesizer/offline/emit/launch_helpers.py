"""Plain-Python helpers for the generated launchers, emitted once per candidate module
(only those a launcher calls), and the rules that keep launchers cheap on the host.

Every forward pays its launchers' Python on every call, and on a GPU the benchmark time
of a candidate is about max(host enqueue time, device time). ``triton.cdiv`` and
``triton.next_power_of_2`` are ``ConstexprFunction`` objects (about 2 us a call),
``torch.broadcast_shapes`` goes through torch._refs (about 10 us), ``expand`` /
``reshape`` / ``t`` create a view each (about 1-3 us), ``torch.empty`` with a
``torch.Size`` about 2 us; the helpers below replace what the hot path needs of them.
See README.md ("Host overhead").
"""

from __future__ import annotations

import re
from typing import Any

LAUNCH_HELPERS: dict[str, str] = {
    "_pow2": '''def _pow2(n):
    """triton.next_power_of_2 (n >= 1) in plain Python: triton's costs ~2 us a call."""
    return 1 << (n - 1).bit_length() if n > 1 else 1
''',
    "_broadcast_shape": '''def _broadcast_shape(*shapes):
    """torch.broadcast_shapes in plain Python: torch's costs ~10 us a call."""
    rank = max(len(s) for s in shapes)
    out = [1] * rank
    for s in shapes:
        for i, d in enumerate(s, rank - len(s)):
            if d != 1:
                if out[i] != 1 and out[i] != d:
                    raise RuntimeError(f"shapes {[tuple(s) for s in shapes]} cannot be broadcast")
                out[i] = d
    return tuple(out)
''',
    "_expanded_strides": '''def _expanded_strides(shape, size, stride):
    """Strides of a tensor (size, stride) read as if expanded to shape: 0 where it broadcasts."""
    lead = len(shape) - len(size)
    return tuple(0 if i < lead or size[i - lead] == 1 else stride[i - lead] for i in range(len(shape)))
''',
    "_remember": '''def _remember(plans, key, plan):
    """Keep a launch plan for one input signature (sizes, strides): a small bounded cache."""
    if len(plans) >= 64:
        plans.clear()
    plans[key] = plan
    return plan
''',
    "_flat_read": '''def _flat_read(t, c):
    """How a flat pointwise kernel reads t, an operand of the output's shape whose rows have
    c elements: (copy, row pitch, pitched). In place when contiguous, or when t is rows
    `pitch` elements apart (last dim stride 1, leading dims collapse into one: a chunk of
    the last dim, x[:, 1:], ...; read as offs // c * pitch + offs % c, in int32); copied
    with .contiguous() otherwise (transposed, chunked on an inner dim, ...)."""
    if t.is_contiguous():
        return False, c, False
    size, stride = t.shape, t.stride()
    if len(size) < 2 or (c != 1 and stride[-1] != 1):
        return True, c, False
    lead = [(d, s) for d, s in zip(size[:-1], stride[:-1]) if d != 1]  # size-1 dims: any stride
    if not lead:  # one row (torch calls it contiguous)
        return False, c, False
    pitch, rows = lead[-1][1], 1
    for d, s in reversed(lead):
        if s != pitch * rows:
            return True, c, False
        rows *= d
    if (rows - 1) * pitch + c >= 2**31:
        return True, c, False
    return False, pitch, True
''',
    "_batch3": '''def _batch3(a, b):
    """[*batch, r, c] operands (same batch shape, broadcast dims at stride 0) as
    [B0, B1, B2, r, c] views for a kernel with three batch levels: adjacent batch dims
    merge where both operands' strides allow (size-1 dims dropped), so N-d batches,
    broadcast ones ([2, 1, 3] x [1, 4, 3]) and permuted ones read in place; more than three
    runs left: reshaped (copies)."""
    runs = []
    for size, sa, sb in zip(a.shape[:-2], a.stride()[:-2], b.stride()[:-2]):
        if size == 1:
            continue
        if runs and runs[-1][1] == sa * size and runs[-1][2] == sb * size:
            runs[-1] = (runs[-1][0] * size, sa, sb)
        else:
            runs.append((size, sa, sb))
    if len(runs) > 3:
        bt = 1
        for r in runs:
            bt *= r[0]
        a = a.reshape(bt, *a.shape[-2:])
        b = b.reshape(bt, *b.shape[-2:])
        runs = [(bt, a.stride(0), b.stride(0))]
    runs = [(1, 0, 0)] * (3 - len(runs)) + runs
    a = a.as_strided((*(r[0] for r in runs), *a.shape[-2:]), (*(r[1] for r in runs), *a.stride()[-2:]))
    b = b.as_strided((*(r[0] for r in runs), *b.shape[-2:]), (*(r[2] for r in runs), *b.stride()[-2:]))
    return a, b
''',
    "_fold_grid": '''_GRID_AXIS_LIMIT = 65535  # CUDA: programs on grid axes 1 and 2 (axis 0: 2**31 - 1)


def _fold_grid(grid):
    """(grid to launch, the kernel's GRID0, GRID1, GRID_FOLD) for a grid of two or three
    axes: as it is within CUDA's limits; past them one axis-0 grid of all programs, which
    the kernel unfolds (emit/grid.py)."""
    if grid is None or max(grid[1:]) <= _GRID_AXIS_LIMIT:
        return grid, (1, 1, False)
    total = 1
    for g in grid:
        total *= g
    if total > 2**31 - 1:
        raise RuntimeError(f"launch grid {grid} has more than 2**31 - 1 programs")
    return (total,), (grid[0], grid[1] if len(grid) > 2 else 1, True)
''',
    "_same_data": '''def _same_data(view, t):
    """Whether view reads t's memory (a view at the same address, not a copy)."""
    return view.data_ptr() == t.data_ptr() and view.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()
''',
}

_CALL = re.compile(r"\b(" + "|".join(re.escape(n) for n in LAUNCH_HELPERS) + r")\(")


def used_launch_helpers(source: str) -> list[str]:
    """Names of the helpers that launcher source calls, in a stable order."""
    return sorted(set(_CALL.findall(source)))


def tuple_source(parts: list[str]) -> str:
    """Source of a tuple literal of the given expressions (one item keeps its comma): shape
    tuples, and plan-cache keys made of cheap attribute reads (``t.shape``,
    ``t.stride()``); hashing torch.Size tuples costs well under a microsecond."""
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def cached_plan_lines(cache: str, key: str, plan_call: str, unpack: str) -> list[str]:
    """Launcher lines that take the launch plan (views, grid, sizes: the host work that
    depends only on the input signature) from the dict ``cache`` by the source expression
    ``key``, computing it with ``plan_call`` on a miss, and unpack it into ``unpack``."""
    return [f"    key = {key}",
            f"    plan = {cache}.get(key)",
            "    if plan is None:",
            f"        plan = _remember({cache}, key, {plan_call})",
            f"    {unpack} = plan"]


def helper_function(name: str) -> Any:
    """Helper ``name`` as a Python function, for generator code that applies the launchers'
    own rule at lowering time (one definition for both)."""
    namespace: dict[str, Any] = {}
    exec(LAUNCH_HELPERS[name], namespace)  # noqa: S102 - our own helper source
    return namespace[name]
