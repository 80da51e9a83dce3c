"""Outputs of library modules on fake tensors, made from their sizes instead of running them.

Shape propagation of a spec captured at real size runs on fake tensors, and torch runs some
modules there through their Python decompositions, op by op, each op through the fake
dispatcher: a training-mode batch norm costs ~70 ms a call (121 of them took 8.7 s of the
densenet_blocks capture, cProfile on a loaded 2-core host), a GRU one cell per time step and
layer (recurrent.fake_output). The rules below give the same shapes and dtypes; an argument
a module would refuse gets no rule, so running it raises torch's own error.
"""

from __future__ import annotations

import math
from typing import Any

import torch.nn as nn
from torch._subclasses.fake_tensor import FakeTensor

from .recurrent import fake_output

# batch norm modules and the input ranks each accepts
_BATCH_NORMS: dict[type, tuple[int, ...]] = {nn.BatchNorm1d: (2, 3), nn.BatchNorm2d: (4,), nn.BatchNorm3d: (5,)}


def fake_module_output(mod: nn.Module, args: tuple[Any, ...]) -> Any:
    """``mod(*args)`` on fake ``args`` from sizes alone, or None (run it)."""
    if not args or not isinstance(args[0], FakeTensor):
        return None
    ranks = _BATCH_NORMS.get(type(mod))
    if ranks is not None:
        return _batch_norm(mod, args, ranks)
    return fake_output(mod, args)


def _batch_norm(mod: nn.Module, args: tuple[Any, ...], ranks: tuple[int, ...]) -> Any:
    x = args[0]
    assert isinstance(mod, nn.modules.batchnorm._BatchNorm)
    if len(args) != 1 or x.dim() not in ranks or x.shape[1] != mod.num_features or not x.is_floating_point():
        return None
    if mod.training and math.prod(s for i, s in enumerate(x.shape) if i != 1) <= 1:
        return None  # torch refuses batch statistics of one value per channel
    return x.new_empty(x.shape)
