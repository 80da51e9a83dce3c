"""Program ids of a generated kernel, written once for every family: the two limits that
interpreter-sized tests never reach and real sizes do.

**Grid axes.** CUDA allows at most 65535 programs on grid axes 1 and 2 (2**31 - 1 on axis
0); a launch past that fails with ``invalid argument``. Families whose grid has a second
or third axis put a batch there (batch x heads of a batched matmul or attention, output
channel tiles, conv groups x split-K slices, transposed-conv phases), and a Swin-style
windowed attention over 256 maps of 8 x 8 windows and 4 heads is 65,536 batched
products: one over. Every such kernel takes
``GRID0, GRID1, GRID_FOLD`` (``FOLD_PARAMS``) and binds its ids with ``program_id_lines``;
the launcher's plan passes its grid through ``_fold_grid`` (a launch helper), which keeps
a grid within the limits as it is (``GRID_FOLD`` false, a constexpr: that kernel compiles
as before) and otherwise launches one axis-0 grid of all programs that the kernel
unfolds (a division and a remainder per program).

**64-bit offsets.** Triton does a kernel's index arithmetic in int32 unless an operand is
int64, so an offset past 2**31 - 1 wraps and the kernel reads or writes outside its
tensor (an illegal address, which kills the process). Every offset a generated kernel
computes grows from its program ids, times sizes and strides passed as int32 (Triton
passes an integer argument of 2**31 or more as int64 by itself). Widening the ids to
int64 makes the whole chain 64-bit; the lowering knows the real shapes (capture at real
size), so ``wide_offsets`` decides per group and keeps int32 where no tensor the group
touches can reach 2**31 elements (int64 index math costs registers and instructions).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch.fx

from ..frontend.fx_meta import shape_of
from ..plan.plan import Group

# Kernel parameters of a folding grid: axis-0 and axis-1 extents of the unfolded grid, and
# whether the launch folded it (a constexpr, so the unfolded kernel is today's code).
FOLD_PARAMS = "GRID0, GRID1, GRID_FOLD: tl.constexpr"

# A group whose tensors hold this many elements or more gets int64 offsets. The margin
# below 2**31 covers the last program's tile overshooting the end of a tensor (masked
# lanes still compute their offsets); read at lowering time, so a test can lower it to
# run the int64 path at interpreter size.
INT64_NUMEL = 2**31 - 2**16


# ops whose result may be read in place as a view of their input: a kernel reading one
# addresses its base tensor (a chunk of a row read with the row pitch, a strided slice)
_VIEWS = frozenset({"getitem", "chunk", "split", "unbind", "narrow", "select", "view", "reshape", "permute",
                    "transpose", "t", "expand", "expand_as", "squeeze", "unsqueeze", "flatten", "unflatten",
                    "movedim", "as_strided", "view_as", "reshape_as"})


def _target_name(node: torch.fx.Node) -> str:
    return node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")


def _addressed(node: torch.fx.Node) -> list[torch.fx.Node]:
    """``node`` and, through view ops, the tensors whose memory it may be a view of."""
    out, todo = [node], [node]
    while todo:
        n = todo.pop()
        if n.op in ("call_function", "call_method") and _target_name(n) in _VIEWS:
            ins = [i for i in n.all_input_nodes if i not in out]
            out += ins
            todo += ins
    return out


def group_numel(group: Group) -> int:
    """The largest element count of a tensor the group's members read or write: their fx
    nodes, every node they take (operands, weights, epilogue inputs) and the bases those
    may be views of."""
    largest = 0
    for m in group.members:
        for node in (m, *(a for i in m.all_input_nodes for a in _addressed(i))):
            shape = shape_of(node)
            if shape is not None:
                largest = max(largest, math.prod(shape))
    return largest


def wide_offsets(group: Group) -> bool:
    """Whether the group's kernel computes its offsets in int64 (see the module doc)."""
    return group_numel(group) >= INT64_NUMEL


def program_id_lines(names: Sequence[str], wide: bool = False, fold: bool = False,
                     indent: str = "    ") -> list[str]:
    """Kernel lines binding ``names[i]`` to the program id of grid axis ``i``. ``fold``:
    the kernel takes ``FOLD_PARAMS`` and unfolds an axis-0 grid when ``GRID_FOLD`` (only
    for kernels of more than one grid axis). ``wide``: every id is int64, so the offsets
    computed from it are too."""
    plain = [f"{n} = tl.program_id({axis})" for axis, n in enumerate(names)]
    if fold and len(names) > 1:
        unfolded = [f"{names[0]} = tl.program_id(0) % GRID0"]
        if len(names) == 2:
            unfolded.append(f"{names[1]} = tl.program_id(0) // GRID0")
        else:
            unfolded += [f"{names[1]} = tl.program_id(0) // GRID0 % GRID1",
                         f"{names[2]} = tl.program_id(0) // GRID0 // GRID1"]
        lines = ["if GRID_FOLD:  # one axis-0 grid of all programs (an axis past 65535): unfold it",
                 *("    " + ln for ln in unfolded), "else:", *("    " + ln for ln in plain)]
    else:
        lines = plain
    if wide:
        lines += [f"{n} = {n}.to(tl.int64)  # 64-bit offsets: a tensor of 2**31 elements or more"
                  for n in names]
    return [indent + ln for ln in lines]


def wide_id(expr: str, wide: bool) -> str:
    """A program-id expression as the kernel uses it in a loop bound (``range(tl.program_id(0),
    ...)`` of the persistent forms), widened to int64 with ``wide``."""
    return f"{expr}.to(tl.int64)" if wide else expr
