"""Whether a reference only moves data: every ATen op its forward dispatches copies,
views, selects, fills, pads or reorders values and none computes new ones.

For such an operator (flip, roll, cat, gather, a pad, max_unpool, ...) a candidate whose
Triton kernels only move data *is* the operator, and the arithmetic audit's "its kernels
only move data; the arithmetic runs in library calls" would be a verdict of the harness's
own making: before this check, every data-movement entry of PyTorch's OpInfo database that
the offline synthesizer lowered to Triton was rejected so (``flip``: "its 231 values are
those of argument #0"). The audit still requires the copied values to come from the
forward's own inputs, parameters or buffers, or from the candidate's own earlier launches
(``arithmetic_audit.Write.moves_own_data``): a library result copied by a Triton kernel
stays rejected. Worker side: torch only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# ATen overload packets that move, view, select, fill or reorder values without computing
# any: what a reference may dispatch and still be pure data movement. Casts (``_to_copy``)
# count: the audit judges a cast as a copy within a few ulps. Reductions, comparisons,
# index_put with accumulation, scatter_add / scatter_reduce and sort do not.
MOVES = frozenset({
    "_reshape_alias", "_to_copy", "_unsafe_index", "_unsafe_view", "_upsample_nearest_exact1d",
    "_upsample_nearest_exact2d", "_upsample_nearest_exact3d", "alias", "alias_copy", "as_strided",
    "as_strided_copy", "cat", "channel_shuffle", "chunk", "clone", "col2im_unused", "constant_pad_nd", "contiguous",
    "copy", "copy_", "detach", "diag", "diag_embed", "diagonal", "diagonal_copy", "embedding", "empty", "empty_like",
    "empty_strided", "expand", "expand_copy", "fill", "fill_", "flip", "full", "full_like", "gather", "im2col",
    "index", "index_copy", "index_fill", "index_select", "lift_fresh", "lift_fresh_copy", "masked_fill",
    "masked_scatter", "masked_select", "max_unpool2d", "max_unpool3d", "movedim", "narrow", "narrow_copy",
    "new_empty", "new_empty_strided", "new_full", "new_zeros", "permute", "permute_copy", "pixel_shuffle",
    "pixel_unshuffle", "reflection_pad1d", "reflection_pad2d", "reflection_pad3d", "repeat", "replication_pad1d",
    "replication_pad2d", "replication_pad3d", "reshape", "resize_", "roll", "rot90", "select", "select_copy",
    "slice", "slice_copy", "split", "split_copy", "split_with_sizes", "split_with_sizes_copy", "squeeze",
    "squeeze_copy", "stack", "t", "t_copy", "take", "take_along_dim", "tile", "transpose", "transpose_copy",
    "tril", "triu", "unbind", "unbind_copy", "unfold", "unfold_copy", "unsqueeze", "unsqueeze_copy",
    "upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d", "view", "view_as_real", "view_copy",
    "where", "zero_", "zeros", "zeros_like",
})


class _OpNames(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        out = func(*args, **(kwargs or {}))
        outs = out if isinstance(out, (tuple, list)) else [out]
        if all(isinstance(o, torch.Tensor) and not o.is_floating_point() and not o.is_complex() for o in outs) \
                and func.overloadpacket.__name__ not in MOVES:
            # arithmetic on indices (take_along_dim wraps negative ones with a remainder), not
            # on the values moved; a copy of a library result still fails the audit's own-data
            # rule, so an integer operator's arithmetic cannot hide here
            return out
        self.names.add(func.overloadpacket.__name__)
        if func.overloadpacket.__name__ in ("scatter", "index_put", "index_put_"):
            # scatter with reduce=, index_put with accumulate=True add values up
            kw = kwargs or {}
            if kw.get("reduce") or kw.get("accumulate") or (len(args) > 3 and args[3] is True):
                self.names.add(f"{func.overloadpacket.__name__} (accumulating)")
            else:
                self.names.discard(func.overloadpacket.__name__)
                self.names.add("take")  # a plain scatter / index_put moves values
        return out


def reference_ops(run: Callable[[], Any]) -> set[str]:
    """The ATen ops one call of ``run`` dispatches (the reference's forward)."""
    with _OpNames() as mode:
        run()
    return mode.names


def only_moves(ops: set[str]) -> bool:
    return bool(ops) and ops <= MOVES
