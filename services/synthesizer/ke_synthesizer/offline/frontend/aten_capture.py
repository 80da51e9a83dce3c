"""The dispatcher-level capture: the fallback for forwards neither symbolic tracer takes,
and the capture of recurrent layers.

``make_fx`` runs the forward on fake tensors of the example shapes (no data, no compute)
and records every aten op the dispatcher sees: Python control flow is unrolled (loops
over layers, ``for t in range(T)``, ``if x.shape[-1] > 64``), shapes are constants, and
library modules with composite implementations decompose (``nn.LSTM`` / ``nn.GRU`` /
``nn.RNN`` with oneDNN off become one input-projection matmul per layer, then per time
step a hidden-projection ``addmm`` and the gate's pointwise ops). A branch on tensor
*values* (``if x.sum() > 0``, ``.item()``) has no fake answer and fails here, which is
what the last resort (a library-call candidate, capture.py) is for.

The aten graph is then rewritten into the torch-level form the normaliser (ops.py) and
the planner understand: ``aten.addmm`` -> ``torch.addmm``, ``aten._softmax`` ->
``torch.softmax``, ``aten.select`` -> indexing, ``aten.native_layer_norm`` ->
``F.layer_norm``, ...; parameters and buffers become ``get_attr`` nodes of their
reference names (the candidate reads its own, identically initialised ones), and
factory calls take the first input's device instead of the tracing device. An aten op
without a mapping stays a call of its public ``torch.ops.aten`` spelling: a library call.
"""

from __future__ import annotations

import copy
import operator
import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.fx
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx
from torch.utils import _pytree as pytree

aten = torch.ops.aten

# ops that only re-label their input (autograd bookkeeping): the node becomes its input
_PASS_THROUGH = {aten.detach, aten.alias, aten.lift_fresh_copy, aten.lift_fresh}

# aten packet -> torch callable with the same positional arguments
_SAME_ARGS: dict[Any, Callable[..., Any]] = {
    **{getattr(aten, n): getattr(torch, n) for n in (
        "add", "sub", "mul", "div", "pow", "rsub", "maximum", "minimum", "where", "clamp", "clamp_min",
        "clamp_max", "gt", "lt", "ge", "le", "eq", "ne", "relu", "sigmoid", "tanh", "exp", "log", "sqrt",
        "rsqrt", "neg", "abs", "reciprocal", "sin", "cos", "erf", "sign", "log1p", "expm1", "exp2", "log2",
        "floor", "ceil", "square", "mm", "bmm", "addmm", "t", "permute", "transpose", "unsqueeze", "squeeze",
        "unbind", "cat", "stack", "amax", "amin", "masked_fill", "cumsum", "cumprod", "gather", "flip",
        "zeros_like", "ones_like", "full_like", "embedding", "matmul", "baddbmm", "tril", "triu",
        # torch.masked's reductions reach the dispatcher as these
        "logsumexp", "argmax", "argmin", "logaddexp")},
    aten.gelu: F.gelu, aten.silu: F.silu, aten.elu: F.elu, aten.leaky_relu: F.leaky_relu,
    aten.hardtanh: F.hardtanh, aten.softplus: F.softplus, aten.hardsigmoid: F.hardsigmoid,
    aten.hardswish: F.hardswish, aten.mish: F.mish, aten.relu6: F.relu6,
    aten.split: torch.split, aten.unsafe_split: torch.split, aten.split_with_sizes: torch.split,
    aten.unsafe_split_with_sizes: torch.split, aten.chunk: torch.chunk, aten.unsafe_chunk: torch.chunk,
    aten.view: torch.reshape, aten._unsafe_view: torch.reshape, aten.reshape: torch.reshape,
}
_FACTORIES = {aten.zeros: torch.zeros, aten.ones: torch.ones, aten.full: torch.full, aten.empty: torch.zeros,
              aten.arange: torch.arange}
# fused attention kernels (output 0 is the attention; the rest are backward statistics)
_SDPA = {getattr(aten, n) for n in ("_scaled_dot_product_flash_attention_for_cpu",
                                    "_scaled_dot_product_flash_attention",
                                    "_scaled_dot_product_efficient_attention") if hasattr(aten, n)}
_REDUCTIONS: dict[Any, Any] = {aten.sum: torch.sum, aten.mean: torch.mean, aten.prod: torch.prod}


class AtenCaptureError(RuntimeError):
    """make_fx refused the forward (a branch on tensor values, an op without a fake kernel)."""


def aten_trace(model: torch.nn.Module, inputs: list[Any], forward_params: list[str]) -> torch.fx.GraphModule:
    """The forward at the example inputs' shapes as a torch-level fx graph (see module doc)."""
    params = dict(model.named_parameters(remove_duplicate=False))
    buffers = dict(model.named_buffers(remove_duplicate=False))
    names = list(params) + list(buffers)
    tensors = [params[n] for n in params] + [buffers[n] for n in buffers]
    out_spec: list[Any] = []

    def flat_forward(state: list[torch.Tensor], *args: Any) -> list[Any]:
        out = torch.func.functional_call(model, dict(zip(names, state, strict=True)), args)
        flat, spec = pytree.tree_flatten(out)
        out_spec[:] = [spec]
        return flat

    try:
        # oneDNN off: its fused RNN kernel would stay one opaque op; the flags context
        # warns about an unrelated TF32 setting on every entry
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore", UserWarning)
            with torch.backends.mkldnn.flags(enabled=False):
                traced = make_fx(flat_forward, tracing_mode="fake")(tensors, *inputs)
    except Exception as exc:  # noqa: BLE001 - any refusal sends the spec to the next fallback
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        raise AtenCaptureError(f"{type(exc).__name__}: {first}") from exc
    return _to_torch_graph(model, traced, names, len(inputs), forward_params, out_spec[0])


def _to_torch_graph(model: torch.nn.Module, traced: torch.fx.GraphModule, state_names: list[str], n_inputs: int,
                    forward_params: list[str], out_spec: Any) -> torch.fx.GraphModule:
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, Any] = {}
    placeholders = [n for n in traced.graph.nodes if n.op == "placeholder"]
    n_state = len(state_names)
    inputs: list[torch.fx.Node] = []
    for i, ph in enumerate(placeholders):
        if i >= n_state:
            name = forward_params[i - n_state] if i - n_state < len(forward_params) else f"input_{i - n_state}"
            inputs.append(graph.placeholder(name))
            env[ph] = inputs[-1]
    for i, ph in enumerate(placeholders[:n_state]):
        env[ph] = graph.get_attr(state_names[i])
    constants: dict[str, torch.Tensor] = {}
    device = graph.call_function(getattr, (inputs[0], "device")) if inputs else None

    def arg(v: Any) -> Any:
        return torch.fx.node.map_arg(v, lambda n: env[n])

    for node in traced.graph.nodes:
        if node.op == "placeholder":
            continue
        if node.op == "output":
            flat = [arg(v) for v in node.args[0]]
            graph.output(pytree.tree_unflatten(flat, out_spec))
            continue
        if node.op == "get_attr":  # tensors created inside forward (torch.tensor([...]))
            constants[str(node.target)] = getattr(traced, str(node.target))
            env[node] = graph.get_attr(str(node.target))
            continue
        pure = _out_of_place(node)
        if pure is not None:
            # an in-place op (the LSTM gates' sigmoid_, add_) becomes its pure form, and
            # later readers of the mutated value read the result; an in-place write into
            # a view of another value would be missed here, which capture.py's check of
            # the graph against the reference forward catches
            mutated = node.args[0]
            node.target = pure
            env[node] = _emit(graph, node, arg, device)
            if isinstance(mutated, torch.fx.Node) and mutated.op != "placeholder":
                env[mutated] = env[node]
            continue
        env[node] = _emit(graph, node, arg, device)
    # the module's tensors and the ones forward made (torch.masked's scalar constants): the
    # GraphModule copies every get_attr target from its root when it is built, so a constant
    # set on it afterwards was looked for on the model first and the capture failed
    root = copy.copy(model)  # shallow: the model itself gets no attributes
    for name, value in constants.items():
        object.__setattr__(root, name, value)
    gm = torch.fx.GraphModule(root, graph, model.__class__.__name__)
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm


def _emit(graph: torch.fx.Graph, node: torch.fx.Node, arg: Callable[[Any], Any], device: Any) -> Any:
    target = node.target
    args, kwargs = arg(tuple(node.args)), arg(dict(node.kwargs))
    if target is operator.getitem:
        if isinstance(args[0], (tuple, list)):  # a multi-output op rewritten to one output
            return args[0][args[1]] if args[1] < len(args[0]) else None  # None: an unread statistic
        return graph.call_function(operator.getitem, args)
    packet = getattr(target, "overloadpacket", None)
    if packet in _PASS_THROUGH:
        return args[0]
    if packet is aten.clone:
        return graph.call_method("clone", (args[0],))
    if packet in (aten._to_copy, aten.to):
        return graph.call_method("to", (args[0],), {"dtype": kwargs["dtype"]}) if "dtype" in kwargs else args[0]
    if packet in (aten.expand, aten.repeat):
        return graph.call_method(packet.__name__, (args[0], *args[1:2]))
    if packet is aten.select:
        x, dim, index = args
        return graph.call_function(operator.getitem, (x, (slice(None),) * _dim(node, dim) + (index,)))
    if packet is aten.slice:
        x, dim, start, end, step = (list(args) + [0, 0, None, None, 1][len(args):])
        end = None if end is not None and end >= 2**62 else end
        return graph.call_function(operator.getitem, (x, (slice(None),) * _dim(node, dim) + (slice(start, end, step),)))
    if packet is aten.native_layer_norm and _only_first_output_read(node):
        x, shape, weight, bias, eps = args
        return (graph.call_function(F.layer_norm, (x, shape, weight, bias, eps)),)
    if packet in _SDPA and _only_first_output_read(node):
        q, k, v = args[:3]
        dropout_p = args[3] if len(args) > 3 else 0.0
        is_causal = args[4] if len(args) > 4 else False
        kw = {"attn_mask": kwargs.get("attn_mask"), "dropout_p": dropout_p, "is_causal": is_causal}
        if kwargs.get("scale") is not None:
            kw["scale"] = kwargs["scale"]
        return (graph.call_function(F.scaled_dot_product_attention, (q, k, v), kw),)
    if packet in (aten._softmax, aten._log_softmax):
        soft: Any = torch.softmax if packet is aten._softmax else torch.log_softmax
        return graph.call_function(soft, (args[0], args[1]))
    if packet in _REDUCTIONS and kwargs.get("dtype") in (None, _dtype(node.args[0])):
        # dtype= the input's own (torch.masked.sum passes it) changes nothing
        kw = {"keepdim": args[2]} if len(args) > 2 else {k: v for k, v in kwargs.items() if k == "keepdim"}
        return graph.call_function(_REDUCTIONS[packet], tuple(args[:2]), kw)
    if packet in (aten.var, aten.std) and len(args) <= 2:
        stat: Any = torch.var if packet is aten.var else torch.std
        kw = {k: v for k, v in kwargs.items() if k in ("correction", "keepdim")}
        return graph.call_function(stat, tuple(args[:2]), kw)
    if packet is aten.convolution and not args[6] and _rank(node.args[1]) - 2 in (1, 2, 3):
        x, w, b, stride, padding, dilation, _transposed, _out_pad, groups = args
        nd = _rank(node.args[1]) - 2
        conv: Any = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[nd]
        return graph.call_function(conv, (x, w, b, tuple(stride), tuple(padding), tuple(dilation), groups))
    if packet in _FACTORIES:
        kw = {k: v for k, v in kwargs.items() if k in ("dtype",)}
        if device is not None:
            kw["device"] = device
        factory: Any = _FACTORIES[packet]
        return graph.call_function(factory, args, kw)
    if packet in _SAME_ARGS:
        kw = {k: v for k, v in _portable(kwargs, device).items() if k != "memory_format"}
        if packet in (aten.cumsum, aten.cumprod) and kw.get("dtype") == _dtype(node.args[0]):
            del kw["dtype"]  # the input's own dtype (torch.masked.cumsum passes it): no cast
        return graph.call_function(_SAME_ARGS[packet], args, kw)
    # no mapping: a library call of the op itself, on the inputs' device
    op: Any = target
    return graph.call_function(op, args, _portable(kwargs, device))


def _portable(kwargs: dict[str, Any], device: Any) -> dict[str, Any]:
    """Keyword arguments without the tracing device: a device becomes the first input's,
    pinning and the (always strided) layout are dropped."""
    out = {k: v for k, v in kwargs.items() if k not in ("pin_memory", "layout")}
    if device is not None:
        out = {k: (device if isinstance(v, torch.device) else v) for k, v in out.items()}
    return out


def _dim(node: torch.fx.Node, dim: int) -> int:
    val = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else None
    return dim % val.dim() if dim < 0 and isinstance(val, torch.Tensor) else dim


def _only_first_output_read(node: torch.fx.Node) -> bool:
    """Every read of a multi-output op is of its output 0 (unread getitems do not count)."""
    return all(u.target is operator.getitem and (u.args[1] == 0 or not u.users) for u in node.users)


def _dtype(v: Any) -> torch.dtype | None:
    val = v.meta.get("val") if isinstance(v, torch.fx.Node) else None
    return val.dtype if isinstance(val, torch.Tensor) else None


def _rank(v: Any) -> int:
    val = v.meta.get("val") if isinstance(v, torch.fx.Node) else None
    return val.dim() if isinstance(val, torch.Tensor) else -1


def _out_of_place(node: torch.fx.Node) -> Any:
    """The pure overload of an in-place aten op (``aten.add_.Tensor`` -> ``aten.add.Tensor``)."""
    packet = getattr(node.target, "overloadpacket", None)
    name = getattr(packet, "__name__", "")
    if not name.endswith("_") or name.startswith("_") or name == "copy_":
        return None
    pure = getattr(aten, name[:-1], None)
    if pure is None:
        return None
    overload = getattr(node.target, "_overloadname", "default")
    if overload in pure.overloads():
        return getattr(pure, overload)
    # transpose_.default -> transpose.int: the pure overload with the same arguments
    n_args = len(node.target._schema.arguments)  # type: ignore[union-attr]
    same = [o for o in pure.overloads() if len(getattr(pure, o)._schema.arguments) == n_args]
    return getattr(pure, same[0]) if len(same) == 1 else None
