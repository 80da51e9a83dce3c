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

from collections.abc import Iterator
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
    if type(mod) is ManualCell:
        return mod.mode
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


class ManualCell(nn.Module):
    """A cell written by hand from ``nn.Linear`` layers and gate math (``manual_cells.py``
    finds it), as the cell a ``CellLoop`` calls: ``ih`` projects the step's input and
    ``hh`` the previous ``h``, or (``hh`` None) one Linear projects ``cat([x, h])``
    (``x_first``) or ``cat([h, x])``. ``order[g]`` is the row block of the projections
    that holds gate ``g`` in torch's order (LSTM i, f, g, o). LSTM and tanh / relu RNN.

    The Linear layers are the model's own, referenced (not submodules, not copied): the
    forward and ``weight_sources`` read their parameters on every call, as they are then."""

    def __init__(self, mode: str, ih: nn.Linear, ih_path: str, hh: nn.Linear | None, hh_path: str,
                 order: tuple[int, ...], hidden: int, x_first: bool = True) -> None:
        super().__init__()
        object.__setattr__(self, "ih", ih)  # not submodules: the parameters stay the model's alone
        object.__setattr__(self, "hh", hh)
        self.mode = mode
        self.ih_path, self.hh_path = ih_path, hh_path
        self.order = order
        self.hidden_size = hidden
        self.x_first = x_first
        self.input_size = ih.in_features if hh is not None else ih.in_features - hidden
        self.bias = ih.bias is not None or (hh is not None and hh.bias is not None)
        # the module both Linear layers live in: what the candidate's launcher is handed
        paths = [ih_path] + ([hh_path] if hh is not None else [])
        parents = [p.split(".")[:-1] for p in paths]
        common: list[str] = []
        for parts in zip(*parents, strict=False):
            if len(set(parts)) != 1:
                break
            common.append(parts[0])
        self.parent = ".".join(common)

    ih: nn.Linear
    hh: nn.Linear | None

    def parameters(self, recurse: bool = True) -> Iterator[nn.Parameter]:
        """The Linear layers' parameters (their dtype is the cell's)."""
        yield from self.ih.parameters()
        if self.hh is not None:
            yield from self.hh.parameters()

    def _blocks(self, t: torch.Tensor) -> list[torch.Tensor]:
        """The gates of a projection (last dim) in torch's order."""
        parts = t.split(self.hidden_size, -1)
        return [parts[b] for b in self.order]

    def forward(self, x: torch.Tensor, hx: Any) -> Any:
        """The user's math on the user's modules (sums and products commute exactly)."""
        h = hx[0] if self.mode == "lstm" else hx
        if self.hh is None:
            gates = self.ih(torch.cat([x, h] if self.x_first else [h, x], -1))
        else:
            gates = self.ih(x) + self.hh(h)
        if self.mode == "lstm":
            i, f, g, o = self._blocks(gates)
            c = torch.sigmoid(f) * hx[1] + torch.sigmoid(i) * torch.tanh(g)
            return torch.sigmoid(o) * torch.tanh(c), c
        return torch.relu(gates) if self.mode == "rnn_relu" else torch.tanh(gates)

    def weight_sources(self, mod: str) -> tuple[str, str, str, str]:
        """Python expressions of ``W_ih``, ``W_hh``, ``b_ih``, ``b_hh`` (gates in torch's
        order, row-major) over ``mod``, the module at ``self.parent``: the recurrent family's
        launcher reads them on every call. A missing bias is zeros (while the other exists)."""
        gates = len(self.order)
        size = gates * self.hidden_size
        permuted = self.order != tuple(range(gates))

        def module(path: str) -> str:
            rel = path.split(".")[len(self.parent.split(".")) if self.parent else 0:]
            return mod + "".join(f"._modules[{p!r}]" for p in rel)

        def rows(expr: str, matrix: bool) -> str:
            if not permuted:
                return expr
            shape = f"{gates}, {self.hidden_size}" + (", -1" if matrix else "")
            return f"{expr}.view({shape})[{list(self.order)}].flatten(0, 1)" if matrix else \
                f"{expr}.view({shape})[{list(self.order)}].flatten()"

        ih = module(self.ih_path)
        w_ih, b_ih = f"{ih}._parameters['weight']", f"{ih}._parameters['bias']"
        zeros = f"{w_ih}.new_zeros({size})"
        if self.hh is None:  # one Linear over cat([x, h]): its columns split (contiguous copies)
            x_cols, h_cols = (f":{self.input_size}", f"{self.input_size}:") if self.x_first else \
                (f"{self.hidden_size}:", f":{self.hidden_size}")
            w_hh = f"{w_ih}[:, {h_cols}].contiguous()"
            w_ih = f"{w_ih}[:, {x_cols}].contiguous()"
            has_ih, has_hh, b_hh = self.ih.bias is not None, False, ""
        else:
            hh = module(self.hh_path)
            w_hh, b_hh = f"{hh}._parameters['weight']", f"{hh}._parameters['bias']"
            has_ih, has_hh = self.ih.bias is not None, self.hh.bias is not None
        w_ih, w_hh = rows(w_ih, True), rows(w_hh, True)
        if not self.bias:
            return w_ih, w_hh, "None", "None"
        b_ih = rows(b_ih, False) if has_ih else zeros
        b_hh = rows(b_hh, False) if has_hh else zeros
        return w_ih, w_hh, b_ih, b_hh


class CellLoop(nn.Module):
    """The calls of ``cell`` over the time steps of a sequence, one node of a graph
    (``cell_loops.py`` finds them): step ``t`` of ``x`` along ``time_dim``, the state
    carried from step to step; the outputs are the recurrent family's launcher's, the
    states ``[1, B, H]`` as a one-layer ``nn.LSTM`` / ``nn.GRU`` / ``nn.RNN`` returns them."""

    cell: nn.Module  # set past nn.Module.__setattr__: not a submodule

    def __init__(self, cell: nn.Module, path: str, time_dim: int) -> None:
        super().__init__()
        object.__setattr__(self, "cell", cell)  # not a submodule: its parameters stay the model's alone
        # the cell's path in the model (what the candidate reads); a hand-written cell's
        # Linear layers are read from the module they live in
        self.path = cell.parent if isinstance(cell, ManualCell) else path
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
