"""A Python loop over time steps that calls one recurrent cell, as one graph node.

A forward written as ``for t in range(x.size(1)): h, c = self.cell(x[:, t], (h, c))`` with
an ``nn.LSTMCell`` / ``nn.GRUCell`` / ``nn.RNNCell`` traces (shapes specialised) to ``T``
calls of the cell: ``T`` groups to plan and, once the dispatcher-level trace decomposed
the cells, ``T`` copies of their kernels' launches (and, before kernel sharing, of their
kernels). Such a chain is the recurrence ``nn.LSTM`` / ``nn.GRU`` / ``nn.RNN`` compute
with one layer and one direction, which the recurrent family already lowers to a loop
over time launching the same two kernels at every step. ``roll_cell_loops`` finds the
chains and replaces each by one ``call_module`` node of a ``CellLoop`` (the cell's
module, the time dim, the number of steps): the graph, the plan, the kernel count and the
candidate's source no longer depend on ``T``.

A chain is the calls of one cell module (exact type, floating weights of one dtype, no
parametrization) at steps ``k = 0 .. n-1`` where

- step ``k`` reads ``X[:, k]`` (batch first) or ``X[k]`` (time major) of one tensor ``X``,
  or item ``k`` of ``X.unbind(dim)``; the loop reads ``X[:, :n]`` (or ``X[:n]``), so a
  graph traced for any shape keeps its meaning at another sequence length (a graph
  specialised to the example shapes whose chain covers the whole sequence reads ``X``);
- step ``k > 0`` reads step ``k - 1``'s state (LSTM: its ``h`` and ``c``), step 0 an
  initial state or none;
- a middle step's cell state is read by nothing else (the loop gives the last one only);
  a middle step's ``h`` may be read anywhere (it is the loop output's step ``k``), and a
  ``torch.stack`` of every step's ``h`` along the time dim is the loop output itself.

Anything else leaves the calls as they were. ``CellLoop.forward`` calls the cell step by
step (the graph still runs and is checked as before); its outputs are those of the
recurrent family's launcher: ``(out, (h_n, c_n))`` / ``(out, h_n)``, states ``[1, B, H]``.
"""

from __future__ import annotations

import logging
import operator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx
import torch.nn as nn

from .fx_meta import dtype_of, shape_of
from .recurrent import CellLoop, cell_mode

log = logging.getLogger(__name__)

_PREFIX = "_ke_cell_loop_"  # the graph module's attribute of each CellLoop (never the model's)


@dataclass
class _Chain:
    cell: str  # the cell module's path
    mode: str
    steps: list[torch.fx.Node] = field(default_factory=list)  # the cell calls, in order
    source: torch.fx.Node | None = None  # X
    time_dim: int = 0
    via_unbind: torch.fx.Node | None = None
    h: list[list[torch.fx.Node]] = field(default_factory=list)  # per step: the nodes that are its h
    c: list[list[torch.fx.Node]] = field(default_factory=list)  # per step (LSTM): its c


def free_module_name(gm: torch.fx.GraphModule, prefix: str) -> str:
    """``prefix`` and the smallest number that names no module of ``gm`` yet."""
    return next(f"{prefix}{i}" for i in range(len(gm._modules) + 1) if f"{prefix}{i}" not in gm._modules)


# a node that is step k of a sequence found before the graph is rewritten: (an identity
# of the sequence, its time dim, k)
Stepped = dict[torch.fx.Node, tuple[torch.fx.Node, int, int]]


def step_input(node: Any, k: int, stepped: Stepped | None = None
                ) -> tuple[torch.fx.Node, int, torch.fx.Node | None] | None:
    """(X, time dim, the unbind node or None) when ``node`` is step ``k`` of a sequence."""
    if stepped and node in stepped:
        seq, seq_dim, at = stepped[node]
        return (seq, seq_dim, None) if at == k else None
    if not (isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target is operator.getitem):
        return None
    base, idx = node.args
    if not isinstance(base, torch.fx.Node):
        return None
    if base.op in ("call_method", "call_function") and base.target in ("unbind", torch.unbind) and idx == k:
        dim = base.args[1] if len(base.args) > 1 else base.kwargs.get("dim", 0)
        x = base.args[0]
        if isinstance(x, torch.fx.Node) and isinstance(dim, int) and dim in (0, 1):
            return x, dim, base
        return None
    if idx == k and not isinstance(idx, bool):
        return base, 0, None
    if isinstance(idx, tuple) and len(idx) == 2 and idx[0] == slice(None) and idx[1] == k \
            and not isinstance(idx[1], bool):
        return base, 1, None
    return None


def _split_state(call: torch.fx.Node, lstm: bool) -> tuple[list[torch.fx.Node], list[torch.fx.Node]] | None:
    """The nodes that are a call's ``h`` (and ``c``); None when the call's tuple is read
    otherwise than item by item."""
    if not lstm:
        return [call], []
    h: list[torch.fx.Node] = []
    c: list[torch.fx.Node] = []
    for user in call.users:
        if user.op == "call_function" and user.target is operator.getitem and user.args[1] in (0, 1):
            (h if user.args[1] == 0 else c).append(user)
        else:
            return None
    return h, c


def _state_arg(call: torch.fx.Node) -> Any:
    if len(call.args) > 1:
        return call.args[1]
    return call.kwargs.get("hx")


def _reads_state(arg: Any, h: list[torch.fx.Node], c: list[torch.fx.Node], lstm: bool) -> bool:
    if lstm:
        return isinstance(arg, (tuple, list)) and len(arg) == 2 and arg[0] in h and arg[1] in c
    return arg in h


def _chains(gm: torch.fx.GraphModule, stepped: Stepped | None = None) -> list[_Chain]:
    """Every chain of calls of one cell (see the module's doc), longest first found."""
    chains: list[_Chain] = []
    taken: set[torch.fx.Node] = set()
    for node in gm.graph.nodes:
        if node.op != "call_module" or node in taken or len(node.args) + len(node.kwargs) > 2:
            continue
        mode = cell_mode(gm.get_submodule(str(node.target)))
        if mode is None or set(node.kwargs) - {"hx"} or (len(node.args) > 1 and node.kwargs):
            continue
        chain = _follow(node, mode, stepped)
        if chain is not None:
            chains.append(chain)
            taken.update(chain.steps)
    return chains


def _follow(first: torch.fx.Node, mode: str, stepped: Stepped | None = None) -> _Chain | None:
    lstm = mode == "lstm"
    got = step_input(first.args[0], 0, stepped)
    hx0 = _state_arg(first)
    if lstm:
        state_ok = hx0 is None or (isinstance(hx0, (tuple, list)) and len(hx0) == 2
                                   and all(isinstance(s, torch.fx.Node) for s in hx0))
    else:
        state_ok = hx0 is None or isinstance(hx0, torch.fx.Node)
    if got is None or not state_ok:
        return None
    chain = _Chain(str(first.target), mode, source=got[0], time_dim=got[1], via_unbind=got[2])
    call = first
    while True:
        parts = _split_state(call, lstm)
        if parts is None:
            return None
        chain.steps.append(call)
        chain.h.append(parts[0])
        chain.c.append(parts[1])
        nxt = [u for n in parts[0] + parts[1] for u in n.users
               if u.op == "call_module" and str(u.target) == chain.cell]
        if not nxt:
            break
        step = nxt[0]
        if any(u is not step for u in nxt) or not _reads_state(_state_arg(step), parts[0], parts[1], lstm):
            return None  # a state read by two later calls: not one recurrence
        got = step_input(step.args[0], len(chain.steps), stepped)
        if got is None or got != (chain.source, chain.time_dim, chain.via_unbind):
            break  # the next call reads something else: the chain ends here
        call = step
    # a middle step's cell state is read only by the next step
    if lstm and any(set(u for n in c for u in n.users) - {chain.steps[k + 1]}
                    for k, c in enumerate(chain.c[:-1])):
        return None
    # the chain's last state must not feed the same cell again (that call would read it as step 0)
    return chain


def chained_cells(gm: torch.fx.GraphModule) -> set[torch.fx.Node]:
    """The cell calls inside chains ``roll_cell_loops`` rolls (when the shapes agree),
    before any is rolled: a cell stacked on another in the same loop reads the first one's
    step ``k`` ``h`` at its step ``k`` (rolled in a second pass, once the first loop's
    output is a sequence)."""
    found: set[torch.fx.Node] = set()
    stepped: Stepped = {}
    while True:
        new = [c for c in _chains(gm, stepped) if c.steps[0] not in found]
        if not new:
            return found
        for chain in new:
            found.update(chain.steps)
            for k, hs in enumerate(chain.h):
                stepped.update({nd: (chain.steps[0], chain.time_dim, k) for nd in hs})


def roll_cell_loops(gm: torch.fx.GraphModule, specialised: bool) -> int:
    """Replace every chain of cell calls by one ``CellLoop`` node; returns how many. Shapes
    (ShapeProp metadata) decide what the recurrent family takes: a batched sequence of the
    cell's dtype, an unbatched one only time major. ``specialised``: the graph holds for its
    example shapes only, so a chain over every step of the sequence reads it whole (no
    slice whose bound is the sequence length in the candidate's source)."""
    count = 0
    for chain in _chains(gm):
        x = chain.source
        assert x is not None
        cell = gm.get_submodule(chain.cell)
        shape = shape_of(x)
        dtype = dtype_of(x)
        if shape is None or dtype != next(cell.parameters()).dtype or len(shape) not in (2, 3) or \
                (len(shape) == 2 and chain.time_dim != 0):
            continue
        whole = specialised and shape[chain.time_dim] == len(chain.steps)
        _replace(gm, chain, cell, free_module_name(gm, _PREFIX), whole)
        count += 1
    if count:
        gm.graph.lint()
        gm.recompile()
        log.debug("rolled %d cell loop(s)", count)
    return count


def _replace(gm: torch.fx.GraphModule, chain: _Chain, cell: nn.Module, name: str, whole: bool) -> None:
    g = gm.graph
    lstm = chain.mode == "lstm"
    n = len(chain.steps)
    first = chain.steps[0]
    gm.add_module(name, CellLoop(cell, chain.cell, chain.time_dim))
    index = (slice(None), slice(None, n)) if chain.time_dim == 1 else slice(None, n)
    with g.inserting_before(first):
        seq = chain.source if whole else g.call_function(operator.getitem, (chain.source, index))
        hx0 = _state_arg(first)
        if hx0 is None:
            hx: Any = None
        elif lstm:
            hx = tuple(g.call_method("unsqueeze", (s, 0)) for s in hx0)
        else:
            hx = g.call_method("unsqueeze", (hx0, 0))
        loop = g.call_module(name, (seq, hx))
        out = g.call_function(operator.getitem, (loop, 0))
        states = g.call_function(operator.getitem, (loop, 1))
        if lstm:
            h_last = g.call_function(operator.getitem, (g.call_function(operator.getitem, (states, 0)), 0))
            c_last = g.call_function(operator.getitem, (g.call_function(operator.getitem, (states, 1)), 0))
        else:
            h_last = g.call_function(operator.getitem, (states, 0))
    chain_nodes = set(chain.steps) | {nd for hs in chain.h for nd in hs} | {nd for cs in chain.c for nd in cs}
    # a stack of every step's h along the time dim is the loop's output
    for user in list({u for hs in chain.h for nd in hs for u in nd.users}):
        if user.op == "call_function" and user.target is torch.stack and _stacks(user, chain):
            user.replace_all_uses_with(out)
            g.erase_node(user)
    # a middle step's h read elsewhere is the output's step k; so is the last one where a
    # cell reads it (a second cell stacked in the loop then reads a sequence, step by
    # step); anything else reads the last state (contiguous, no copy)
    after = out
    for k, hs in enumerate(chain.h):
        for nd in hs:
            outside = [u for u in nd.users if u not in chain_nodes]
            if k == n - 1:
                outside = [u for u in outside if u.op == "call_module" and
                           cell_mode(gm.get_submodule(str(u.target))) is not None]
            if outside:
                with g.inserting_after(after):
                    after = g.call_function(operator.getitem,
                                            (out, (slice(None), k) if chain.time_dim == 1 else k))
                for u in outside:
                    u.replace_input_with(nd, after)
            if k == n - 1:
                nd.replace_all_uses_with(h_last)
    if lstm:
        for nd in chain.c[-1]:
            nd.replace_all_uses_with(c_last)
    # the chain's nodes, last first (each read only by later chain nodes by now)
    for k in range(n - 1, -1, -1):
        for nd in chain.h[k] + chain.c[k] if lstm else []:
            g.erase_node(nd)
        call = chain.steps[k]
        x_k = call.args[0]
        g.erase_node(call)
        if isinstance(x_k, torch.fx.Node) and not x_k.users:
            g.erase_node(x_k)
    if chain.via_unbind is not None and not chain.via_unbind.users:
        g.erase_node(chain.via_unbind)


def _stacks(node: torch.fx.Node, chain: _Chain) -> bool:
    """``torch.stack([h_0, ..., h_{n-1}], time_dim)`` (each ``h_k`` any node of step k's h)."""
    seq = node.args[0] if node.args else node.kwargs.get("tensors")
    dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
    if not isinstance(seq, (list, tuple)) or len(seq) != len(chain.h) or dim != chain.time_dim:
        return False
    return all(s in chain.h[k] for k, s in enumerate(seq))
