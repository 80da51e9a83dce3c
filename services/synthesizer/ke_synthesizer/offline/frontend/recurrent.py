"""Which recurrent library modules the capture keeps whole (one graph node per module).

A dispatcher-level trace of ``nn.LSTM`` / ``nn.GRU`` / ``nn.RNN`` unrolls every time step
of every layer and direction: tens of thousands of nodes at real size, which capture,
plan and code generation then walk (616 s to lower a 3-layer bidirectional GRU of 1,024
steps, 156 s for a 4-layer bidirectional LSTM of 512, bench/capture_real_size.py on 2
cores). A module this predicate accepts stays one ``call_module`` node of the symbolic
graph, whatever the sequence length, and the recurrent family lowers it to a loop over
time that launches the same kernels at every step. ``CellLoop`` is the same recurrence
written as a Python loop calling one ``nn.LSTMCell`` / ``nn.GRUCell`` / ``nn.RNNCell``.
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


def cell_mode(mod: nn.Module) -> str | None:
    """``lstm``, ``gru``, ``rnn_tanh`` or ``rnn_relu`` for a cell the recurrent step kernel
    computes (exact type: a subclass may override forward); None otherwise."""
    if type(mod) is nn.LSTMCell:
        mode = "lstm"
    elif type(mod) is nn.GRUCell:
        mode = "gru"
    elif type(mod) is nn.RNNCell:
        mode = {"tanh": "rnn_tanh", "relu": "rnn_relu"}.get(str(mod.nonlinearity), "")
    else:
        return None
    if not mode or hasattr(mod, "parametrizations"):
        return None
    dtypes = {p.dtype for p in mod.parameters()}
    if len(dtypes) != 1 or next(iter(dtypes)) not in _FLOATS:
        return None
    return mode


class CellLoop(nn.Module):
    """The calls of ``cell`` over the time steps of a sequence, one node of a graph
    (``cell_loops.py`` finds them): step ``t`` of ``x`` along ``time_dim``, the state
    carried from step to step; the outputs are the recurrent family's launcher's, the
    states ``[1, B, H]`` as a one-layer ``nn.LSTM`` / ``nn.GRU`` / ``nn.RNN`` returns them."""

    cell: nn.Module  # set past nn.Module.__setattr__: not a submodule

    def __init__(self, cell: nn.Module, path: str, time_dim: int) -> None:
        super().__init__()
        object.__setattr__(self, "cell", cell)  # not a submodule: its parameters stay the model's alone
        self.path = path  # the cell's path in the model (what the candidate reads)
        self.time_dim = time_dim
        self.mode = cell_mode(cell) or ""
        self.hidden = int(cell.hidden_size)  # type: ignore[arg-type]

    def forward(self, x: torch.Tensor, hx: Any = None) -> Any:
        lstm = self.mode == "lstm"
        state: Any = None if hx is None else (hx[0][0], hx[1][0]) if lstm else hx[0]
        outs = []
        for xt in x.unbind(self.time_dim):
            state = self.cell(xt, state)
            outs.append(state[0] if lstm else state)
        out = torch.stack(outs, self.time_dim)
        if lstm:
            return out, (state[0].unsqueeze(0), state[1].unsqueeze(0))
        return out, state.unsqueeze(0)

    def fake_output(self, x: torch.Tensor) -> Any:
        """The outputs from sizes alone (a spec captured on fake tensors), or None."""
        if x.dim() not in (2, 3) or (x.dim() == 2 and self.time_dim != 0) or \
                x.shape[-1] != getattr(self.cell, "input_size", None):
            return None  # running it raises torch's own error
        batch = () if x.dim() == 2 else (x.shape[1 - self.time_dim],)
        out = x.new_empty(x.shape[:-1] + (self.hidden,))
        state = x.new_empty((1, *batch, self.hidden))
        return (out, (state, x.new_empty(state.shape))) if self.mode == "lstm" else (out, state)


def fake_output(mod: nn.Module, args: tuple[Any, ...]) -> Any:
    """What a loopable module returns on fake inputs, made without running it, or None.

    On fake tensors torch runs a GRU (and a relu / tanh RNN) through its Python
    decomposition, one cell per time step and layer (10,000 fake ops and 11 s for 64 steps
    of a 3-layer bidirectional GRU, 58 s at 1,024 steps on 2 cores): shape propagation of a
    graph holding the layer would still grow with the sequence. The shapes follow from the
    module's sizes; arguments the module would refuse (wrong feature or state sizes) get
    None, so running it raises torch's own error."""
    if isinstance(mod, CellLoop) and args and len(args) <= 2 and isinstance(args[0], FakeTensor):
        return mod.fake_output(args[0])
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
