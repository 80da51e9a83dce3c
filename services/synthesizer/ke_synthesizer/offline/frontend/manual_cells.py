"""A recurrent cell written by hand (``nn.Linear`` projections and gate math) over time
steps, as calls of one ``ManualCell`` that ``cell_loops.py`` then rolls into one
``CellLoop`` node, which the recurrent family lowers like a loop of ``nn.LSTMCell`` calls.

Unrecognised, such a loop is lowered step by step: two small matmuls and the gates'
pointwise kernels per step. Matched, per step ``k`` (``x_k`` read as ``cell_loops`` reads a
step: ``X[:, k]``, ``X[k]`` or item ``k`` of ``X.unbind(dim)``; at every step the same
Linear modules, exact ``nn.Linear``, unparametrized and unhooked, floating, either with
or without a bias):

- the projections: ``gates = ih(x_k) + hh(h)`` (either operand first) or, LSTM and RNN,
  ``gates = lin(torch.cat([x_k, h], -1))`` (either order);
- the split of ``gates`` into gate blocks of ``H`` along the last dim: ``chunk``,
  ``split(H)`` or slices ``gates[:, a:b]``, each block read once, in any order: which
  block is which gate is read off the math (``ManualCell.order``);
- LSTM: ``c' = sigmoid(f) * c + sigmoid(i) * tanh(g)``, ``h' = sigmoid(o) * tanh(c')``;
- tanh / relu RNN: ``h' = tanh(gates)`` / ``relu(gates)``;

(every sum and product with its operands in either order) over every step of the
sequence, step ``k + 1`` reading step ``k``'s ``h`` (and ``c``) where the cell reads its
state, the first step an initial state of the state's shape (no broadcasting), every other
value of a step read only inside it, and a middle step's ``c`` only by the next step.

Anything else stays as it was: other math (an extra term or constant, another activation,
a peephole, a normalisation), a gate read twice or in a role torch's cell does not give
it, a step's value read outside it, other step reads, shapes or dtypes. A hand-written
GRU is not matched (it stays step by step). A wrong match
would be a silent wrong answer; a missed one only a slower candidate.
"""

from __future__ import annotations

import logging
import operator
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

from .cell_loops import free_module_name, step_input
from .fx_meta import dtype_of, shape_of
from .recurrent import ManualCell

log = logging.getLogger(__name__)

PREFIX = "_ke_manual_cell_"  # the graph module's attribute of each ManualCell until its chain is rolled

_FLOATS = (torch.float32, torch.float16, torch.bfloat16)
_ACT_FUNCS: dict[str, tuple[Any, ...]] = {
    "sigmoid": (torch.sigmoid, F.sigmoid, torch.special.expit),
    "tanh": (torch.tanh, F.tanh),
    "relu": (torch.relu, F.relu),
}
_ACT_MODULES: dict[str, type[nn.Module]] = {"sigmoid": nn.Sigmoid, "tanh": nn.Tanh, "relu": nn.ReLU}
_BINARY: dict[str, tuple[Any, ...]] = {"add": (operator.add, torch.add), "mul": (operator.mul, torch.mul)}

Node = torch.fx.Node


@dataclass
class _Step:
    """One step's match: ``ins`` the projections' two inputs (two Linear layers: each
    one's; one over a cat: the cat's two parts), not yet told apart (the chain does)."""

    mode: str
    linears: tuple[str, ...]  # module paths: one per input, or one over the cat
    ins: tuple[Node, Node]
    order: tuple[int, ...]
    h: Node
    nodes: set[Node]  # every node of the step, h and c included
    c: Node | None = None
    c_prev: Node | None = None
    hidden_side: int = -1  # which of ``ins`` is the previous h (set by the chain)


def _linear(gm: torch.fx.GraphModule, node: Any) -> nn.Linear | None:
    """The module of a plain call of an exact, unparametrized, unhooked floating ``nn.Linear``."""
    if not (isinstance(node, Node) and node.op == "call_module" and len(node.args) == 1 and not node.kwargs):
        return None
    mod = gm.get_submodule(str(node.target))
    if type(mod) is not nn.Linear or hasattr(mod, "parametrizations") or mod._forward_hooks or \
            mod._forward_pre_hooks or mod.weight.dtype not in _FLOATS:
        return None
    if mod.bias is not None and mod.bias.dtype != mod.weight.dtype:
        return None
    return mod


def _act(gm: torch.fx.GraphModule, node: Any, kind: str) -> Node | None:
    """The operand of ``node`` when it is the activation ``kind`` and nothing more."""
    if not isinstance(node, Node) or len(node.args) != 1 or not isinstance(node.args[0], Node):
        return None
    if node.op == "call_function" and node.target in _ACT_FUNCS[kind]:
        if node.kwargs and not (node.target is F.relu and node.kwargs == {"inplace": False}):
            return None
        return node.args[0]
    if node.op == "call_method" and node.target == kind and not node.kwargs:
        return node.args[0]
    if node.op == "call_module" and not node.kwargs:
        mod = gm.get_submodule(str(node.target))
        if type(mod) is _ACT_MODULES[kind] and not getattr(mod, "inplace", False) and not mod._forward_hooks \
                and not mod._forward_pre_hooks:
            return node.args[0]
    return None


def _binary(node: Any, kind: str) -> tuple[Any, Any] | None:
    """The two operands of a plain ``a + b`` / ``a * b`` (no alpha, no out)."""
    if not isinstance(node, Node) or len(node.args) != 2 or node.kwargs:
        return None
    if (node.op == "call_function" and node.target in _BINARY[kind]) or \
            (node.op == "call_method" and node.target == kind):
        return node.args[0], node.args[1]
    return None


def _bind(node: Node, names: tuple[str, ...]) -> dict[str, Any] | None:
    """The node's arguments by name (positional first, then keywords)."""
    if len(node.args) > len(names):
        return None
    out = dict(zip(names, node.args, strict=False))
    for k, v in node.kwargs.items():
        if k in out or k not in names:
            return None
        out[k] = v
    return out


def _last_dim(dim: Any, ndim: int) -> bool:
    return isinstance(dim, int) and not isinstance(dim, bool) and -ndim <= dim < ndim and dim % ndim == ndim - 1


def _slice_block(idx: Any, ndim: int, hidden: int, blocks: int) -> int | None:
    """The block a slice ``t[..., a:b]`` of a ``[.., blocks * hidden]`` tensor reads, or None."""
    if isinstance(idx, tuple):
        lead, s = idx[:-1], idx[-1] if idx else None
        if not (lead == (Ellipsis,) or (len(lead) == ndim - 1 and all(x == slice(None) for x in lead))):
            return None
    else:
        s = idx if ndim == 1 else None
    if not isinstance(s, slice) or s.step not in (None, 1):
        return None
    size = blocks * hidden
    bounds = []
    for v, default in ((s.start, 0), (s.stop, size)):
        if v is None:
            bounds.append(default)
        elif isinstance(v, int) and not isinstance(v, bool):
            bounds.append(min(max(v + size if v < 0 else v, 0), size))
        else:
            return None
    start, stop = bounds
    if start % hidden or stop - start != hidden:
        return None
    return start // hidden


def _pieces(gates: Node, blocks: int, hidden: int) -> tuple[dict[Node, int], set[Node]] | None:
    """Each node reading one gate block of ``gates`` (along its last dim) -> the block, and
    the chunk / split nodes between; None when ``gates`` is read otherwise, or a block
    twice or never."""
    shape = shape_of(gates)
    if shape is None or not shape or shape[-1] != blocks * hidden:
        return None
    ndim = len(shape)
    out: dict[Node, int] = {}
    splitters: set[Node] = set()
    for user in gates.users:
        if user.op == "call_function" and user.target is operator.getitem and user.args[0] is gates:
            j = _slice_block(user.args[1], ndim, hidden, blocks)
            if j is None:
                return None
            out[user] = j
            continue
        split = _splits(user, gates, blocks, hidden, ndim)
        if not split:
            return None
        splitters.add(user)
        for part in user.users:
            if not (part.op == "call_function" and part.target is operator.getitem and part.args[0] is user):
                return None
            at = part.args[1]
            if not isinstance(at, int) or isinstance(at, bool) or not -blocks <= at < blocks:
                return None
            out[part] = at % blocks
    if sorted(out.values()) != list(range(blocks)):
        return None
    return out, splitters


def _splits(node: Node, gates: Node, blocks: int, hidden: int, ndim: int) -> bool:
    """``gates.chunk(blocks, dim)`` / ``gates.split(hidden, dim)`` (or the torch
    functions) along the last dim."""
    if node.op == "call_method" and node.target in ("chunk", "split"):
        names = ("input", "chunks", "dim") if node.target == "chunk" else ("input", "split_size", "dim")
    elif node.op == "call_function" and node.target is torch.chunk:
        names = ("input", "chunks", "dim")
    elif node.op == "call_function" and node.target is torch.split:
        names = ("tensor", "split_size_or_sections", "dim")
    else:
        return False
    bound = _bind(node, names)
    if bound is None or bound.get(names[0]) is not gates or not _last_dim(bound.get("dim", 0), ndim):
        return False
    size = bound.get(names[1])
    if names[1] == "chunks":
        return size == blocks and not isinstance(size, bool)
    if isinstance(size, (list, tuple)):
        return list(size) == [hidden] * blocks
    return size == hidden and not isinstance(size, bool)


def _projection(gm: torch.fx.GraphModule, gates: Node
                ) -> tuple[tuple[str, ...], tuple[Node, Node], set[Node]] | None:
    """``ih(a) + hh(b)`` or ``lin(cat([a, b], -1))``: the Linear paths, (a, b), the nodes."""
    pair = _binary(gates, "add")
    if pair is not None:
        if not all(_linear(gm, p) is not None and len(p.users) == 1 for p in pair):
            return None
        a, b = pair
        if not (isinstance(a.args[0], Node) and isinstance(b.args[0], Node)):
            return None
        return (str(a.target), str(b.target)), (a.args[0], b.args[0]), {gates, a, b}
    if _linear(gm, gates) is None:
        return None
    cat = gates.args[0]
    if not (isinstance(cat, Node) and cat.op == "call_function" and cat.target in (torch.cat, torch.concat)
            and len(cat.users) == 1):
        return None
    bound = _bind(cat, ("tensors", "dim"))
    shape = shape_of(cat)
    if bound is None or shape is None or not _last_dim(bound.get("dim", 0), len(shape)):
        return None
    parts = bound.get("tensors")
    if not (isinstance(parts, (list, tuple)) and len(parts) == 2 and all(isinstance(p, Node) for p in parts)
            and parts[0] is not parts[1]):
        return None
    return (str(gates.target),), (parts[0], parts[1]), {gates, cat}


def _only(node: Node) -> Node | None:
    """The single user of ``node``."""
    return next(iter(node.users)) if len(node.users) == 1 else None


def _activated(gm: torch.fx.GraphModule, pieces: dict[Node, int]) -> dict[Node, tuple[str, int]] | None:
    """Each piece's single activation node -> (its kind, the piece's block)."""
    out: dict[Node, tuple[str, int]] = {}
    for piece, block in pieces.items():
        act = _only(piece)
        kind = next((k for k in ("sigmoid", "tanh") if act is not None and _act(gm, act, k) is piece), None)
        if act is None or kind is None:
            return None
        out[act] = (kind, block)
    return out


def _lstm(gm: torch.fx.GraphModule, gates: Node, hidden: int) -> _Step | None:
    proj = _projection(gm, gates)
    split = _pieces(gates, 4, hidden)
    if proj is None or split is None:
        return None
    pieces, splitters = split
    acts = _activated(gm, pieces)
    if acts is None or sorted(k for k, _ in acts.values()) != ["sigmoid", "sigmoid", "sigmoid", "tanh"]:
        return None
    sig = {a: b for a, (k, b) in acts.items() if k == "sigmoid"}
    tg = next(a for a, (k, _) in acts.items() if k == "tanh")
    # sigmoid(i) * tanh(g)
    ig = _only(tg)
    pair = _binary(ig, "mul") if ig is not None else None
    if ig is None or pair is None or tg not in pair:
        return None
    si = pair[1] if pair[0] is tg else pair[0]
    if si not in sig or _only(si) is not ig:
        return None
    # c' = sigmoid(f) * c + (sigmoid(i) * tanh(g))
    c = _only(ig)
    pair = _binary(c, "add") if c is not None else None
    if c is None or pair is None or ig not in pair or pair[0] is pair[1]:
        return None
    fc = pair[1] if pair[0] is ig else pair[0]
    pair = _binary(fc, "mul")
    if pair is None or not isinstance(fc, Node) or _only(fc) is not c:
        return None
    sf = next((p for p in pair if p in sig and p is not si), None)
    c_prev = pair[1] if pair[0] is sf else pair[0]
    if sf is None or _only(sf) is not fc or not isinstance(c_prev, Node) or c_prev in sig:
        return None
    # h' = sigmoid(o) * tanh(c')
    for tc in c.users:
        h = _only(tc)
        if _act(gm, tc, "tanh") is not c or h is None:
            continue
        pair = _binary(h, "mul")
        if pair is None or tc not in pair:
            continue
        so = pair[1] if pair[0] is tc else pair[0]
        if so in sig and so not in (si, sf) and _only(so) is h:
            order = (sig[si], sig[sf], acts[tg][1], sig[so])
            nodes = proj[2] | set(pieces) | set(acts) | splitters | {ig, c, fc, tc, h}
            return _Step("lstm", proj[0], proj[1], order, h, nodes, c=c, c_prev=c_prev)
    return None


def _rnn(gm: torch.fx.GraphModule, gates: Node, hidden: int) -> _Step | None:
    proj = _projection(gm, gates)
    shape = shape_of(gates)
    if proj is None or shape is None or not shape or shape[-1] != hidden:
        return None
    h = _only(gates)
    if h is None:
        return None
    for kind in ("tanh", "relu"):
        if _act(gm, h, kind) is gates:
            return _Step(f"rnn_{kind}", proj[0], proj[1], (0,), h, proj[2] | {h})
    return None


def _match(gm: torch.fx.GraphModule, node: Node) -> _Step | None:
    """The step whose projections' sum (or Linear over a cat) is ``node``, if any."""
    shape = shape_of(node)
    if shape is None or not shape:
        return None
    if shape[-1] % 4 == 0:
        step = _lstm(gm, node, shape[-1] // 4)
        if step is not None:
            return step
    return _rnn(gm, node, shape[-1])


def _link(steps: list[_Step]) -> list[list[_Step]]:
    """Steps into chains: step k + 1 reads step k's ``h`` as one of its projections' inputs
    (and an LSTM's ``c`` as its cell state), written by the same code (same Linear layers,
    same operand order, same gate order); a step read by two others ends nothing."""
    by_h = {s.h: i for i, s in enumerate(steps)}
    pred: dict[int, int] = {}
    succ: dict[int, int] = {}
    bad: set[int] = set()
    for j, s in enumerate(steps):
        # a side that reads another step's h written by the same code (a second cell
        # stacked in the loop reads the first one's h as its input: not its state)
        sides = [side for side in (0, 1) if s.ins[side] in by_h and
                 (s.mode, s.linears, s.order) == (steps[by_h[s.ins[side]]].mode, steps[by_h[s.ins[side]]].linears,
                                                  steps[by_h[s.ins[side]]].order)]
        if not sides:
            continue
        i = by_h[s.ins[sides[0]]]
        if len(sides) > 1 or i in succ or s.c_prev is not steps[i].c:
            bad.update((i, j))
            continue
        s.hidden_side = sides[0]
        pred[j], succ[i] = i, j
    chains = []
    for start in range(len(steps)):
        if start in pred:
            continue
        chain = [start]
        while chain[-1] in succ:
            chain.append(succ[chain[-1]])
        if bad.isdisjoint(chain):
            chains.append([steps[k] for k in chain])
    return chains


def _first_side(chain: list[_Step]) -> bool:
    """Set the first step's hidden side: the later steps' (the same code), or for a single
    step the side that is not a step's input while the other is."""
    first = chain[0]
    if len(chain) > 1:
        side = chain[1].hidden_side
        if any(s.hidden_side != side for s in chain[1:]):
            return False
        first.hidden_side = side
        return True
    steps = [step_input(x, 0) is not None for x in first.ins]
    if steps.count(True) != 1:
        return False
    first.hidden_side = steps.index(False)
    return True


def _valid(gm: torch.fx.GraphModule, chain: list[_Step]) -> tuple[Node, int, nn.Linear, nn.Linear | None] | None:
    """(X, time dim, the input / only Linear, the hidden Linear) when ``chain`` is a
    recurrence ``cell_loops`` rolls whole; None otherwise."""
    if not _first_side(chain):
        return None
    first = chain[0]
    side = first.hidden_side
    reads = [step_input(s.ins[1 - side], k) for k, s in enumerate(chain)]
    if reads[0] is None or any(r != reads[0] for r in reads):
        return None
    source, time_dim, _ = reads[0]
    shape, dtype = shape_of(source), dtype_of(source)
    if shape is None or len(shape) not in (2, 3) or (len(shape) == 2 and time_dim != 0):
        return None
    if shape[time_dim] != len(chain):
        # the chain stops before the sequence does: the loop computes something else
        # after (its first step alone may still look like the cell)
        return None
    # the Linear layers: the cell's sizes, one floating dtype, the sequence's
    cat = len(first.linears) == 1
    ih = _linear_at(gm, first.linears[0] if cat else first.linears[1 - side])
    hh = None if cat else _linear_at(gm, first.linears[side])
    h_shape = shape_of(first.h)
    if ih is None or (not cat and hh is None) or h_shape is None:
        return None
    hidden, gates = h_shape[-1], len(first.order)
    features = shape[-1]
    dtypes = {p.dtype for m in (ih, hh) if m is not None for p in m.parameters()}
    if dtypes != {dtype} or ih.out_features != gates * hidden or \
            (hh is None and ih.in_features != features + hidden) or \
            (hh is not None and (hh.in_features != hidden or hh.out_features != gates * hidden
                                 or ih.in_features != features)):
        return None
    # the state: the cell's shape (no broadcasting) and dtype, from the first step on
    state_shape = (hidden,) if len(shape) == 2 else (shape[1 - time_dim], hidden)
    states = [(s.h, s.ins[side]) for s in chain] + [(s.c, s.c_prev) for s in chain if s.mode == "lstm"]
    for new, prev in states:
        if not isinstance(prev, Node) or not isinstance(new, Node):
            return None
        if shape_of(new) != state_shape or shape_of(prev) != state_shape or dtype_of(prev) != dtype:
            return None
    # every value of a step read inside it, but h (anywhere but another step) and c (the
    # next step; the last one anywhere)
    inside = set().union(*(s.nodes for s in chain))
    for k, s in enumerate(chain):
        nxt = chain[k + 1].nodes if k + 1 < len(chain) else None
        for n in s.nodes:
            users = set(n.users)
            if n is s.h:
                ok = not (users & inside) or (nxt is not None and users & inside <= nxt)
            elif n is s.c:
                ok = users <= s.nodes | nxt if nxt is not None else True
            else:
                ok = users <= s.nodes
            if not ok:
                return None
    return source, time_dim, ih, hh


def _linear_at(gm: torch.fx.GraphModule, path: str) -> nn.Linear | None:
    mod = gm.get_submodule(path)
    return mod if type(mod) is nn.Linear else None


def fold_manual_cells(gm: torch.fx.GraphModule) -> int:
    """Replace every hand-written cell chain's steps by calls of one ``ManualCell`` (the
    module's doc), for ``roll_cell_loops`` to roll; returns how many chains."""
    steps: list[_Step] = []
    taken: set[Node] = set()
    for node in gm.graph.nodes:
        if node in taken:
            continue
        step = _match(gm, node)
        if step is not None and taken.isdisjoint(step.nodes):
            steps.append(step)
            taken |= step.nodes
    count = 0
    for chain in _link(steps):
        found = _valid(gm, chain)
        if found is None:
            continue
        _fold(gm, chain, found[2], found[3])
        count += 1
    if count:
        gm.graph.lint()
        gm.recompile()
        log.debug("folded %d hand-written cell chain(s)", count)
    return count


def _fold(gm: torch.fx.GraphModule, chain: list[_Step], ih: nn.Linear, hh: nn.Linear | None) -> None:
    g = gm.graph
    first = chain[0]
    side = first.hidden_side
    paths = first.linears
    cell = ManualCell(first.mode, ih, paths[0] if hh is None else paths[1 - side], hh,
                      "" if hh is None else paths[side], first.order, int(shape_of(first.h)[-1]),  # type: ignore[index]
                      x_first=side == 1)
    name = free_module_name(gm, PREFIX)
    gm.add_module(name, cell)
    lstm = first.mode == "lstm"
    h_prev: Node = first.ins[side]
    c_prev = first.c_prev
    order = {n: i for i, n in enumerate(g.nodes)}
    for s in chain:
        with g.inserting_after(s.h):  # every node of a step comes before its h
            state: Any = (h_prev, c_prev) if lstm else h_prev
            call = g.call_module(name, (s.ins[1 - side], state))
        if lstm:
            with g.inserting_after(call):
                h_new = g.call_function(operator.getitem, (call, 0))
            with g.inserting_after(h_new):
                c_new = g.call_function(operator.getitem, (call, 1))
            assert s.c is not None
            s.c.replace_all_uses_with(c_new, delete_user_cb=lambda u, s=s: u not in s.nodes)  # type: ignore[misc]
            c_prev = c_new
        else:
            h_new = call
        s.h.replace_all_uses_with(h_new)
        h_prev = h_new
        for n in sorted(s.nodes, key=order.__getitem__, reverse=True):
            g.erase_node(n)


def forget_manual_cells(gm: torch.fx.GraphModule) -> None:
    """Drop the ``ManualCell`` attributes of chains rolled into loops (the loops hold them)."""
    called = {str(n.target) for n in gm.graph.nodes if n.op == "call_module"}
    for name in [m for m in gm._modules if m.startswith(PREFIX)]:
        if name in called:  # a chain cell_loops did not roll: the checks above missed a rule
            log.error("hand-written cell %s was not rolled into a loop", name)
            continue
        delattr(gm, name)
