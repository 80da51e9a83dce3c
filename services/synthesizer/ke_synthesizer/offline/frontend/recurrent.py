"""Which recurrent library modules the capture keeps whole (one graph node per module).

A dispatcher-level trace of ``nn.LSTM`` / ``nn.GRU`` / ``nn.RNN`` unrolls every time step
of every layer and direction: tens of thousands of nodes at real size, which capture,
plan and code generation then walk (616 s to lower a 3-layer bidirectional GRU of 1,024
steps, 156 s for a 4-layer bidirectional LSTM of 512, bench/capture_real_size.py on 2
cores). A module this predicate accepts stays one ``call_module`` node of the symbolic
graph, whatever the sequence length, and the recurrent family lowers it to a loop over
time that launches the same kernels at every step.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn as nn
from torch._subclasses.fake_tensor import FakeTensor

# exact types: a subclass may override forward
_MODES = {nn.LSTM: "lstm", nn.GRU: "gru"}
_RNN_MODES = {"RNN_TANH": "rnn_tanh", "RNN_RELU": "rnn_relu"}
_FLOATS = (torch.float32, torch.float16, torch.bfloat16)


def loop_mode(mod: nn.Module) -> str | None:
    """``lstm``, ``gru``, ``rnn_tanh`` or ``rnn_relu`` for a module whose forward is the
    plain recurrence (no projection, no dropout between layers in training, no
    parametrized weights, floating weights of one dtype); None otherwise."""
    if type(mod) is nn.RNN:
        mode = _RNN_MODES.get(str(getattr(mod, "mode", "")))
    else:
        mode = _MODES.get(type(mod))  # type: ignore[call-overload]
    if mode is None or not isinstance(mod, nn.RNNBase):
        return None
    if getattr(mod, "proj_size", 0) or hasattr(mod, "parametrizations"):
        return None
    if mod.training and mod.dropout > 0 and mod.num_layers > 1:
        return None  # random dropout between layers: never silently dropped
    dtypes = {p.dtype for p in mod.parameters()}
    if len(dtypes) != 1 or next(iter(dtypes)) not in _FLOATS:
        return None
    return mode


def fake_output(mod: nn.Module, args: tuple[Any, ...]) -> Any:
    """What a loopable module returns on fake inputs, made without running it, or None.

    On fake tensors torch runs a GRU (and a relu / tanh RNN) through its Python
    decomposition, one cell per time step and layer (10,000 fake ops and 11 s for 64 steps
    of a 3-layer bidirectional GRU, 58 s at 1,024 steps on 2 cores): shape propagation of a
    graph holding the layer would still grow with the sequence. The shapes follow from the
    module's sizes; arguments the module would refuse (wrong feature or state sizes) get
    None, so running it raises torch's own error."""
    if loop_mode(mod) is None or not args or len(args) > 2 or not isinstance(args[0], FakeTensor):
        return None
    assert isinstance(mod, nn.RNNBase)
    x, hx = args[0], (args[1] if len(args) > 1 else None)
    if x.dim() not in (2, 3) or x.shape[-1] != mod.input_size or x.dtype != next(mod.parameters()).dtype:
        return None
    dirs = 2 if mod.bidirectional else 1
    batched = x.dim() == 3
    steps, batch = (x.shape[1], x.shape[0]) if batched and mod.batch_first else (x.shape[0], x.shape[1])
    state = (mod.num_layers * dirs, batch, mod.hidden_size) if batched else (mod.num_layers * dirs, mod.hidden_size)
    given = [] if hx is None else list(hx) if isinstance(hx, (tuple, list)) else [hx]
    if len(given) not in ((0, 2) if isinstance(mod, nn.LSTM) else (0, 1)) or \
            any(not isinstance(h, torch.Tensor) or tuple(h.shape) != state for h in given):
        return None
    out_shape = (batch, steps, dirs * mod.hidden_size) if batched and mod.batch_first else \
        (steps, batch, dirs * mod.hidden_size) if batched else (steps, dirs * mod.hidden_size)
    out = x.new_empty(out_shape)
    if isinstance(mod, nn.LSTM):
        return out, (x.new_empty(state), x.new_empty(state))
    return out, x.new_empty(state)
