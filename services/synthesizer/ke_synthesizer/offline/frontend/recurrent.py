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

import torch
import torch.nn as nn

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
