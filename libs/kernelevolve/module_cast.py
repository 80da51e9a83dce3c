"""A model run in another dtype or on another device as itself, not as a copy.

``copy.deepcopy(model).double()`` is how a float64 re-run of a reference is usually made,
and it is wrong for a model whose forward reaches its submodules through a function
attribute: ``self.mlpf = lambda x: m.c_proj(m.act(m.c_fc(x)))`` (a closure over a
ModuleDict). ``deepcopy`` copies functions by reference, so the copy's lambda still calls the
original float32 submodules: the float64 run raised "mat1 and mat2 must have the same dtype"
on the host and "mat1 is on cpu" after a move. ``converted`` instead swaps the tensors of the
model's own parameters and buffers for converted ones and puts the very same tensors back
afterwards: every path to a submodule (closures, partials, bound methods, lists) sees the
conversion, and afterwards the model is bit for bit as it was (what the converted forward
wrote into its buffers, a batch norm's running statistics, is dropped with them).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def converted(model: torch.nn.Module, device: torch.device | str | None = None,
              dtype: torch.dtype | None = None) -> Iterator[torch.nn.Module]:
    """``model`` with its floating parameters and buffers cast to ``dtype`` and every one
    moved to ``device`` (None: kept), for the ``with`` block; the original tensors after it,
    whether the block raised or not. Memory: the originals stay alive beside the converted
    tensors, as with a copy."""
    params: dict[int, tuple[torch.nn.Parameter, torch.Tensor]] = {}
    buffers: list[tuple[torch.nn.Module, str, torch.Tensor]] = []
    # One converted tensor per original (a buffer registered twice stays one), keyed by the
    # ids of originals held in ``params`` / ``buffers`` until the end.
    made: dict[int, torch.Tensor] = {}

    def convert(t: torch.Tensor) -> torch.Tensor:
        if id(t) not in made:
            cast = dtype if dtype is not None and t.is_floating_point() else None
            made[id(t)] = t.detach().to(device=device, dtype=cast, copy=True)  # never the original itself
        return made[id(t)]

    try:
        for mod in model.modules():
            for p in mod._parameters.values():
                if p is not None and id(p) not in params:
                    data = p.data  # a new object at each access: held, so that its id stays its own
                    params[id(p)] = (p, data)
                    p.data = convert(data)
            for name, b in list(mod._buffers.items()):
                if b is not None:
                    buffers.append((mod, name, b))
                    mod._buffers[name] = convert(b)
        yield model
    finally:
        for p, data in params.values():
            p.data = data
        for mod, name, b in buffers:
            mod._buffers[name] = b
