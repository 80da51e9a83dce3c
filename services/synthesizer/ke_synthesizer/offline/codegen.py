"""Assembles one standalone candidate module from a plan: imports, Triton helpers,
kernels, launchers and ``class ModelNew`` whose ``__init__`` mirrors the reference (so
parameters are created in the same order, with the same RNG draws) and whose forward
replays the captured graph with kernel launches in place of the lowered nodes.
"""

from __future__ import annotations

import logging
import math
import operator
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx
import torch.nn.functional as F
from torch.fx.node import _get_qualified_name

from kernelevolve.errors import LoweringError

from .emit import cuda_graph
from .emit.channels_last import channels_last_groups
from .emit.forward_loops import roll
from .emit.kernel_sharing import Generated, share
from .emit.launch_helpers import LAUNCH_HELPERS, used_launch_helpers
from .emit.lower_pointwise import HELPERS, PointwiseEmitter
from .families.family import KernelFamily
from .families.library_impl import LIBRARY_COMMENT
from .frontend.fx_meta import tensor_meta
from .plan.plan import GroupFailure, Plan
from .plan.plan_outputs import group_outputs, is_dead, metadata_aliases

log = logging.getLogger(__name__)

_BINARY_SYMBOLS = {
    operator.add: "+", operator.sub: "-", operator.mul: "*", operator.truediv: "/", operator.floordiv: "//",
    operator.mod: "%", operator.pow: "**", operator.matmul: "@", operator.gt: ">", operator.lt: "<",
    operator.ge: ">=", operator.le: "<=", operator.eq: "==", operator.ne: "!=", operator.and_: "&",
    operator.or_: "|",
}



def _value_literal(v: Any) -> str:
    """A constant's (nested) values as source: repr writes inf / nan, names the candidate's
    module does not have (torch.masked's fill of -inf failed with NameError)."""
    if isinstance(v, list):
        return "[" + ", ".join(_value_literal(x) for x in v) + "]"
    if isinstance(v, float) and not math.isfinite(v):
        return f'float("{v}")'
    return repr(v)

def var(node: torch.fx.Node) -> str:
    """Forward-local variable of a node; placeholders keep their parameter names."""
    if node.op == "placeholder":
        return str(node.target)
    return f"t_{node.name}"


def attr_path(path: str) -> str:
    """``self`` attribute access for a dotted module path; numeric parts (children of
    nn.Sequential / nn.ModuleList) become indexing."""
    out = "self"
    for part in path.split(".") if path else ():  # an empty path: the model itself
        out += f"[{part}]" if part.isdigit() else f".{part}"
    return out


@dataclass
class Names:
    """How the forward spells nodes and attributes: ``alias`` renames nodes (a member that
    is not stored is read for its shape through a same-shape node); registered
    submodules, parameters and buffers of ``model`` are read from the module's dicts
    (``nn.Module.__getattr__`` costs ~0.5 us a lookup, on every forward)."""

    alias: dict[torch.fx.Node, torch.fx.Node] = field(default_factory=dict)
    model: Any = None

    def attr(self, path: str) -> str:
        out, obj = "self", self.model
        if not path:  # the model itself
            return out
        for part in path.split("."):
            for table in ("_modules", "_parameters", "_buffers"):
                entries = getattr(obj, table, None)
                if isinstance(obj, torch.nn.Module) and entries is not None and part in entries:
                    out += f".{table}[{part!r}]"
                    obj = entries[part]
                    break
            else:
                return attr_path(path)  # a plain attribute somewhere on the path
        return out


def render(v: Any, names: Names | None = None) -> str:
    """An fx argument as Python source in the candidate's forward."""
    if isinstance(v, torch.fx.Node):
        return var(names.alias.get(v, v) if names else v)
    if isinstance(v, str):
        if v.startswith("@"):
            return names.attr(v[1:]) if names else attr_path(v[1:])
        return repr(v)
    if isinstance(v, bool) or v is None:
        return repr(v)
    if isinstance(v, float):
        if math.isinf(v):
            return 'float("inf")' if v > 0 else 'float("-inf")'
        if math.isnan(v):
            return 'float("nan")'
        return repr(v)
    if isinstance(v, int):
        return repr(v)
    if isinstance(v, (torch.dtype, torch.memory_format, torch.layout)):
        return str(v)
    if isinstance(v, torch.device):
        return f"torch.device({str(v)!r})"
    if isinstance(v, slice):
        return f"slice({render(v.start, names)}, {render(v.stop, names)}, {render(v.step, names)})"
    if v is Ellipsis:
        return "..."
    if isinstance(v, tuple):
        inner = ", ".join(render(x, names) for x in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    if isinstance(v, list):
        return "[" + ", ".join(render(x, names) for x in v) + "]"
    if isinstance(v, torch.Size):
        return render(tuple(v))
    raise LoweringError(f"cannot render argument {v!r}")


_PUBLIC: dict[int, str] = {}


def _public_name(target: Any) -> str | None:
    """A public spelling of a torch callable (``torch.nn.functional.gelu`` rather than
    ``torch._C._nn.gelu``): candidates may not reach into ``torch._C``."""
    if not _PUBLIC:
        spaces = [("torch.nn.functional", F), ("torch.special", torch.special), ("torch.linalg", torch.linalg),
                  ("torch.fft", torch.fft), ("torch", torch)]
        for prefix, mod in reversed(spaces):  # earlier spaces win
            for attr in dir(mod):
                if attr.startswith("_"):
                    continue
                obj = getattr(mod, attr, None)
                if callable(obj):
                    _PUBLIC[id(obj)] = f"{prefix}.{attr}"
    return _PUBLIC.get(id(target))


def _call_args(node: torch.fx.Node, skip_first: bool = False,
               names: Names | None = None) -> str:
    args = list(node.args[1:] if skip_first else node.args)
    parts = [render(a, names) for a in args] + [f"{k}={render(v, names)}" for k, v in node.kwargs.items()]
    return ", ".join(parts)


def render_node(node: torch.fx.Node, plan: Plan, names: Names | None = None) -> str:
    """A library-call or glue statement for one fx node."""
    lhs = var(node)
    if node.op == "get_attr":
        path = str(node.target)
        obj: Any = plan.spec.gm
        for part in path.split("."):
            obj = getattr(obj, part, None)
        # fx stores tensors created inside forward as _tensor_constantN attributes
        if path.split(".")[-1].startswith("_tensor_constant") and isinstance(obj, torch.Tensor):
            # rebuilt on the inputs' device
            first = next((n for n in plan.nodes if n.op == "placeholder"), None)
            device = f", device={var(first)}.device" if first is not None else ""
            return f"{lhs} = torch.tensor({_value_literal(obj.tolist())}, dtype={obj.dtype}{device})"
        return f"{lhs} = {names.attr(path) if names else attr_path(path)}"
    if node.op == "call_module":
        path = str(node.target)
        mod = plan.spec.gm.get_submodule(path)
        if type(mod) is torch.nn.Flatten and len(node.args) == 1 and not node.kwargs:  # a view: skip Module.__call__
            return f"{lhs} = {render(node.args[0], names)}.flatten({mod.start_dim}, {mod.end_dim})"
        if type(mod) is torch.nn.Unflatten and len(node.args) == 1 and not node.kwargs:
            return f"{lhs} = {render(node.args[0], names)}.unflatten({mod.dim}, {tuple(mod.unflattened_size)!r})"
        return f"{lhs} = {names.attr(path) if names else attr_path(path)}({_call_args(node, names=names)})"
    if node.op == "call_method":
        obj_src = render(node.args[0], names)
        return f"{lhs} = {obj_src}.{node.target}({_call_args(node, skip_first=True, names=names)})"
    target: Any = node.target
    if target in _BINARY_SYMBOLS and len(node.args) == 2 and not node.kwargs:
        a, b = node.args
        return f"{lhs} = {render(a, names)} {_BINARY_SYMBOLS[target]} {render(b, names)}"  # type: ignore[index]
    if target is operator.getitem:
        return f"{lhs} = {render(node.args[0], names)}[{render(node.args[1], names)}]"
    if target is operator.neg:
        return f"{lhs} = -{render(node.args[0], names)}"
    if target is operator.invert:  # ~mask on boolean inputs
        return f"{lhs} = ~{render(node.args[0], names)}"
    if target is getattr:
        return f"{lhs} = {render(node.args[0], names)}.{node.args[1]}"
    name = _public_name(target) or _get_qualified_name(target)  # type: ignore[arg-type]
    if name.startswith("builtins."):
        name = name[len("builtins."):]
    if not (name.startswith("torch.") or name in ("int", "float", "len", "min", "max", "abs", "round")):
        if name.startswith("math."):
            pass
        else:
            raise LoweringError(f"cannot render call to {name}")
    return f"{lhs} = {name}({_call_args(node, names=names)})"


def _forward_signature(plan: Plan) -> str:
    params = []
    for node in plan.nodes:
        if node.op == "placeholder":
            p = str(node.target)
            if node.args:
                p += f"={render(node.args[0])}"
            params.append(p)
    return ", ".join(["self"] + params)


def assemble(plan: Plan, genome: dict[str, str], families: Mapping[str, KernelFamily], title: str) -> str:
    emitter = PointwiseEmitter()
    generated: list[Generated] = []
    gid_of: dict[str, int] = {}
    for g in plan.groups:
        if is_dead(plan, g):
            continue  # nothing outside reads its values (only shapes): no kernel
        try:
            k_src, l_src, l_name = families[g.kind].generate(plan, g, genome, emitter)
        except Exception as exc:  # any generator gap demotes the group, never the candidate
            raise GroupFailure(g.key, {m.name for m in g.members}, f"{type(exc).__name__}: {exc}") from exc
        generated.append(Generated(g.key, k_src, l_src, l_name))
        gid_of[g.key] = g.gid
    # groups with the same body (repeated layers, unrolled time steps) share one kernel
    shared = share(generated)
    kernels, launchers = shared.kernels, shared.launchers
    launcher_of = {gid_of[key]: name for key, name in shared.launcher_of.items()}

    # outputs written NHWC by a channels_last_model chain (emit/channels_last.py)
    keep = channels_last_groups(plan, genome)
    nhwc = {m for g in plan.groups if g.gid in keep for m in group_outputs(plan, g)}
    body = _forward_body(plan, families, launcher_of, nhwc)
    parts = [f'"""{title}"""', "", "import math", "", "import torch", "import torch.nn as nn",
             "import triton", "import triton.language as tl", ""]
    header = set(parts)
    # the spec's own lines first: generated names defined later win any clash
    prelude = [stmt for stmt in plan.spec.model_source.prelude if stmt not in header]
    for stmt in prelude:
        parts += [stmt, ""] if "\n" in stmt else [stmt]
    if prelude:
        parts.append("")
    for name in sorted(emitter.helpers):
        parts += ["", HELPERS[name]]
    for k in kernels:
        parts += ["", k]
    for name in used_launch_helpers("\n".join(launchers)):
        parts += ["", LAUNCH_HELPERS[name]]
    for launcher in launchers:
        parts += ["", launcher]
    graph_on = genome.get(cuda_graph.KNOB) == "on"
    if graph_on:
        parts += ["", cuda_graph.HELPERS.strip("\n")]
    parts += ["", plan.spec.model_source.class_source]
    parts.append("")
    if graph_on:  # forward replays a CUDA graph of the generated forward (cuda_graph.py)
        params = [str(n.target) for n in plan.nodes if n.op == "placeholder"]
        parts += cuda_graph.forward_wrapper(_forward_signature(plan), params)
    parts.append(f"    def {'_forward_eager' if graph_on else 'forward'}({_forward_signature(plan)}):")
    if any("._modules[" in line or "._parameters[" in line or "._buffers[" in line for line in body):
        parts.append("        # submodules and parameters are read from the module's dicts: nn.Module.__getattr__")
        parts.append("        # costs ~0.5 us a lookup on every call")
    parts += [f"        {line}" for line in body]
    src = "\n".join(parts) + "\n"
    return src


def _nodes_in(v: Any) -> list[torch.fx.Node]:
    out: list[torch.fx.Node] = []
    torch.fx.node.map_arg(v, out.append)
    return out


def _forward_body(plan: Plan, families: Mapping[str, KernelFamily], launcher_of: dict[int, str],
                  nhwc: set[torch.fx.Node]) -> list[str]:
    """The forward's statements in graph order: kernel launches at each group's last
    member, glue and library calls for the rest. Glue whose value nothing emitted reads
    (shape arithmetic that a kernel took as a constant, a member read only for its shape,
    ...) is dropped: every statement costs host time on each call."""
    names = Names(metadata_aliases(plan), plan.spec.model)
    alias = names.alias
    last_member = {g.members[-1]: g for g in plan.groups}
    fallback = set(plan.fallback)
    chosen = {n for n in fallback if n.name in plan.impl_knobs.values()}  # impl=library
    stmts: list[tuple[torch.fx.Node | None, str, list[torch.fx.Node]]] = []  # (glue node or None, code, reads)
    for node in plan.nodes:
        if node.op == "placeholder" or node in plan.skipped:
            continue
        if node.op == "output":
            stmts.append((None, f"return {_render_output(node.args[0], nhwc)}", _nodes_in(node.args[0])))
            continue
        if node in plan.group_of:
            g = last_member.get(node)
            if g is None or g.gid not in launcher_of:
                continue
            args, outs = families[g.kind].launch_args(plan, g)
            call = f"{launcher_of[g.gid]}({', '.join(render(a, names) for a in args)})"
            lib = [var(n) for n in _nodes_in(args) if n in chosen]
            note = f"  # reads the library output {', '.join(lib)}" if lib else ""
            stmts.append((None, f"{', '.join(var(o) for o in outs)} = {call}{note}", _nodes_in(args)))
            continue
        stmt = render_node(node, plan, names)
        reads = [alias.get(n, n) for n in node.all_input_nodes]
        if node in fallback:
            note = LIBRARY_COMMENT if node in chosen else "  # library call (not lowered)"
            stmts.append((None, stmt + note, reads))
        else:
            stmts.append((node, stmt, reads))
    live: set[torch.fx.Node] = set()
    keep: list[str] = []
    for glue, code, reads in reversed(stmts):
        if glue is not None and glue not in live:
            continue  # nothing reads this glue value
        live.update(reads)
        keep.append(code)
    return roll(keep[::-1])  # unrolled time steps (recurrent layers) as a loop: forward_loops.py


def _render_output(v: Any, nhwc: set[torch.fx.Node]) -> str:
    """Outputs keep the reference's layout: a lowering may produce a permuted view (a
    reduction over a middle dim computed row-wise), and callers (and the evaluator's
    stride check) expect what the reference returns. ``.contiguous()`` is free when the
    tensor already is. A tensor written NHWC (``nhwc``) is copied back explicitly:
    ``.contiguous()`` returns one with a single channel or 1x1 pixels as it is (torch
    calls it contiguous), with strides that differ from the reference's."""
    if isinstance(v, torch.fx.Node):
        meta = tensor_meta(v)
        if meta is not None and getattr(meta, "memory_format", None) == torch.contiguous_format:
            if v in nhwc:
                return f"{render(v)}.clone(memory_format=torch.contiguous_format)"
            return f"{render(v)}.contiguous()"
        return render(v)
    if isinstance(v, (tuple, list)):
        inner = ", ".join(_render_output(x, nhwc) for x in v)
        return f"({inner},)" if isinstance(v, tuple) and len(v) == 1 else (f"({inner})" if isinstance(v, tuple)
                                                                          else f"[{inner}]")
    return render(v)

