"""Static (AST) policy for candidate sources.

A candidate is a module defining ``ModelNew`` with ``@triton.jit`` kernels; it has no
reason to create threads or processes, touch files, the network or the environment,
inspect frames, patch torch or the timers, or import the spec. Everything outside a
small import allowlist is refused with a named reason so that the search learns why.

Regexes are fooled by aliases and string tricks; the AST is not (``import os as o``
is still an import of ``os``). Dynamic escapes (``__import__``, ``getattr`` with a
computed name, ``exec``) are banned outright so the static view stays sound.

Stdlib only: the parent calls this before any worker is involved.
"""

from __future__ import annotations

import ast
import functools
import textwrap
from dataclasses import dataclass, field

from . import graph_replay, pyast

# Modules a Triton candidate may import (prefix match on dotted names).
ALLOWED_IMPORTS: tuple[str, ...] = (
    "torch",
    "triton",
    "math",
    "functools",
    "typing",
    "typing_extensions",
    "itertools",
    "operator",
    "collections",
    "dataclasses",
    "enum",
    "abc",
    "numbers",
    "__future__",
)

# Import prefixes with a named reason (checked before the allowlist so the reason is specific).
_NAMED_IMPORT_BANS: tuple[tuple[tuple[str, ...], str], ...] = (
    (
        ("threading", "_thread", "multiprocessing", "concurrent", "subprocess", "asyncio", "sched",
         "torch.multiprocessing", "torch.distributed"),
        "thread or process creation",
    ),
    (("socket", "urllib", "http", "requests", "httpx", "ssl", "ftplib", "smtplib", "aiohttp",
      "xmlrpc", "telnetlib", "websocket"), "network access"),
    (("ctypes", "cffi", "torch.utils.cpp_extension", "mmap"), "native code / raw memory access"),
    (("inspect", "gc", "sys", "traceback", "builtins", "types", "weakref", "code", "dis", "pdb"),
     "frame/global inspection"),
    (("os", "pathlib", "shutil", "io", "tempfile", "glob", "fileinput", "pickle", "shelve", "signal",
      "resource"), "file system / environment / process access"),
    (("importlib", "pkgutil", "runpy", "zipimport"), "dynamic import"),
    (("time", "timeit", "datetime"), "timing functions"),
    (("numpy", "scipy", "jax", "cupy", "numba"), "computes outside Triton (array library)"),
    (("torch._inductor", "torch._dynamo", "torch.compiler", "torch._C", "torch.utils.benchmark",
      "torch.profiler", "torch.testing"), "torch internals / compiler fallback"),
    (("torch.library", "torch.overrides", "torch.utils._python_dispatch", "torch._subclasses",
      "torch.fx"), "torch function/dispatch interception"),
)

# Bare names that are escapes from any static view.
_BANNED_NAMES: dict[str, str] = {
    "globals": "frame/global inspection (globals())",
    "locals": "frame/global inspection (locals())",
    "vars": "frame/global inspection (vars())",
    "exec": "dynamic code execution (exec)",
    "eval": "dynamic code execution (eval)",
    "compile": "dynamic code execution (compile)",
    "__import__": "dynamic import (__import__)",
    "__builtins__": "frame/global inspection (__builtins__)",
    "__loader__": "frame/global inspection (__loader__)",
    "__spec__": "frame/global inspection (__spec__)",
    "open": "file IO (open)",
    "breakpoint": "debugger (breakpoint)",
    "input": "reads stdin (input)",
    "delattr": "attribute patching (delattr)",
    "memoryview": "raw memory access (memoryview)",
}

# Attribute names that reach frames, globals, class internals or torch dispatch.
_BANNED_ATTRS: dict[str, str] = {
    **{a: "frame/global inspection" for a in (
        "__globals__", "__builtins__", "__dict__", "__class__", "__bases__", "__base__", "__mro__",
        "__subclasses__", "__code__", "__closure__", "__func__", "__self__", "__module__",
        "__loader__", "__spec__", "__getattribute__", "__reduce__", "__reduce_ex__", "__import__",
        "f_back", "f_globals", "f_locals", "f_builtins", "gi_frame", "tb_frame", "cr_frame",
        "ag_frame", "_getframe", "get_objects", "getouterframes", "currentframe",
    )},
    "__torch_function__": "lazy tensor subclass (__torch_function__)",
    "__torch_dispatch__": "lazy tensor subclass (__torch_dispatch__)",
    "_make_subclass": "lazy tensor subclass (_make_subclass)",
    "_make_wrapper_subclass": "lazy tensor subclass (_make_wrapper_subclass)",
    "as_subclass": "lazy tensor subclass (as_subclass)",
    "Stream": "new CUDA stream",
    "ExternalStream": "new CUDA stream",
    "stream": "CUDA stream context",
    "set_stream": "CUDA stream switch",
    "CUDAGraph": "CUDA graph capture",
    "graph": "CUDA graph capture",
    "compile": "torch.compile fallback",
    "_inductor": "torch internals / compiler fallback",
    "_dynamo": "torch internals / compiler fallback",
    "_C": "torch internals",
    "environ": "reads environment variables",
    "getenv": "reads environment variables",
    "system": "process creation (system)",
    "popen": "process creation (popen)",
    "fork": "process creation (fork)",
    "set_float32_matmul_precision": "changes precision flags",
    "allow_tf32": "changes precision flags",
    "allow_fp16_reduced_precision_reduction": "changes precision flags",
    "allow_bf16_reduced_precision_reduction": "changes precision flags",
    "fp32_precision": "changes precision flags",
    "set_default_dtype": "changes global torch defaults",
    "set_flush_denormal": "changes global torch defaults",
    "use_deterministic_algorithms": "changes global torch defaults",
    "set_num_threads": "changes global torch defaults",
    "manual_seed": "reseeds the global generator",
    "seed": "reseeds the global generator",
    "set_rng_state": "reseeds the global generator",
    "launch_enter_hook": "patches Triton launch hooks",
    "launch_exit_hook": "patches Triton launch hooks",
    "knobs": "changes Triton runtime knobs",
}

_BANNED_ATTRS.update({
    "attrgetter": "computed attribute access (operator.attrgetter)",
    "methodcaller": "computed attribute access (operator.methodcaller)",
    "cpp_extension": "native code / raw memory access (torch.utils.cpp_extension)",
    "load_inline": "native code / raw memory access (load_inline)",
    "load_library": "native code / raw memory access (load_library)",
    "multiprocessing": "thread or process creation (torch.multiprocessing)",
    "library": "registers torch operator implementations (torch.library)",
    "overrides": "torch function/dispatch interception",
    "_python_dispatch": "torch function/dispatch interception",
    "TorchDispatchMode": "torch function/dispatch interception",
    "TorchFunctionMode": "torch function/dispatch interception",
    "register_module_forward_hook": "global module hooks (would see the reference)",
    "register_module_forward_pre_hook": "global module hooks (would see the reference)",
    "register_module_full_backward_hook": "global module hooks (would see the reference)",
    "register_module_full_backward_pre_hook": "global module hooks (would see the reference)",
    "register_module_backward_hook": "global module hooks (would see the reference)",
    "register_module_buffer_registration_hook": "global module hooks (would see the reference)",
    "register_module_module_registration_hook": "global module hooks (would see the reference)",
    "register_module_parameter_registration_hook": "global module hooks (would see the reference)",
    "distributed": "thread or process creation (torch.distributed)",
})
# Dunder attributes a kernel wrapper may reasonably touch; any other is object internals.
_ALLOWED_DUNDERS = frozenset({"__init__", "__name__", "__qualname__", "__doc__", "__len__", "__getitem__"})

_SUBCLASS_BAN_BASES = {"Model"}
_TENSOR_BASES = {"Tensor", "Parameter"}


@dataclass
class Finding:
    reason: str
    line: int
    detail: str

    def render(self) -> str:
        return f"line {self.line}: {self.reason} ({self.detail})"


@dataclass
class StaticReport:
    ok: bool
    findings: list[Finding] = field(default_factory=list)
    syntax_error: str = ""

    @property
    def reason(self) -> str:
        if self.syntax_error:
            return self.syntax_error
        if not self.findings:
            return ""
        first = self.findings[0]
        others = sorted({f.reason for f in self.findings[1:]} - {first.reason})
        more = f" (also: {'; '.join(others)})" if others else ""
        return f"static policy: {first.render()}{more}"


def _dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _is_main_guard(node: ast.AST) -> bool:
    if not isinstance(node, ast.If):
        return False
    t = node.test
    return (
        isinstance(t, ast.Compare)
        and isinstance(t.left, ast.Name)
        and t.left.id == "__name__"
        and len(t.comparators) == 1
        and isinstance(t.comparators[0], ast.Constant)
        and t.comparators[0].value == "__main__"
    )


def _import_reason(name: str, spec_module_names: set[str]) -> str | None:
    top = name.split(".")[0]
    if name in spec_module_names or top in spec_module_names or top.startswith("_ke_spec"):
        return "imports the spec module"
    for prefixes, reason in _NAMED_IMPORT_BANS:
        for p in prefixes:
            if name == p or name.startswith(p + "."):
                return reason
    for p in ALLOWED_IMPORTS:
        if name == p or name.startswith(p + "."):
            return None
    return f"import of '{name}' is not on the allowlist ({', '.join(ALLOWED_IMPORTS[:3])}, ...)"


class _Checker(ast.NodeVisitor):
    def __init__(self, spec_module_names: set[str]) -> None:
        self.findings: list[Finding] = []
        self.module_aliases: set[str] = set()
        self.spec_module_names = spec_module_names

    def add(self, node: ast.AST, reason: str, detail: str) -> None:
        self.findings.append(Finding(reason, getattr(node, "lineno", 0), detail))

    # -- imports -------------------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            reason = _import_reason(a.name, self.spec_module_names)
            if reason:
                self.add(node, reason, f"import {a.name}")
            self.module_aliases.add((a.asname or a.name).split(".")[0])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            self.add(node, "relative import (may reach the spec)", f"from {'.' * node.level}{node.module or ''}")
            return
        mod = node.module or ""
        reason = _import_reason(mod, self.spec_module_names)
        if reason:
            self.add(node, reason, f"from {mod} import ...")
        for a in node.names:
            full = f"{mod}.{a.name}"
            if a.name == "*":
                self.add(node, "star import hides what is used", f"from {mod} import *")
                continue
            sub = _import_reason(full, self.spec_module_names) if not reason else None
            if sub and sub.startswith("import of") is False:
                self.add(node, sub, f"from {mod} import {a.name}")
            if a.name in _BANNED_ATTRS and not reason:
                self.add(node, _BANNED_ATTRS[a.name], f"from {mod} import {a.name}")
            if a.name == "Model":
                self.add(node, "imports the reference Model", f"from {mod} import Model")
            self.module_aliases.add(a.asname or a.name)

    # -- names / attributes ----------------------------------------------------------------
    def visit_Name(self, node: ast.Name) -> None:
        if node.id in _BANNED_NAMES:
            self.add(node, _BANNED_NAMES[node.id], node.id)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr.startswith("__") and node.attr.endswith("__") and node.attr not in _ALLOWED_DUNDERS \
                and node.attr not in _BANNED_ATTRS:
            self.add(node, "dunder attribute access (object internals)", _dotted(node) or node.attr)
        elif node.attr in _BANNED_ATTRS:
            # ``self.stream`` / ``self.seed`` on the candidate's own module are harmless; any
            # other root counts, since a module is easily aliased to a local (``c = torch.cuda``).
            root = _root_name(node)
            if root != "self" or node.attr.startswith("__"):
                self.add(node, _BANNED_ATTRS[node.attr], _dotted(node) or node.attr)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        fn = node.func
        if isinstance(fn, ast.Name) and fn.id in ("setattr",):
            target = node.args[0] if node.args else None
            if not (isinstance(target, ast.Name) and target.id == "self"):
                self.add(node, "attribute patching (setattr on a non-self object)", "setattr(...)")
        if isinstance(fn, ast.Name) and fn.id == "getattr":
            name_arg = node.args[1] if len(node.args) > 1 else None
            if not (isinstance(name_arg, ast.Constant) and isinstance(name_arg.value, str)):
                self.add(node, "computed attribute access (getattr with a non-literal name)", "getattr(...)")
            elif name_arg.value in _BANNED_ATTRS or name_arg.value.startswith("__"):
                self.add(node, _BANNED_ATTRS.get(name_arg.value, "frame/global inspection"),
                         f"getattr(..., {name_arg.value!r})")
        self.generic_visit(node)

    # -- assignments to module attributes (monkeypatching) ---------------------------------
    def _check_targets(self, targets: list[ast.expr], node: ast.AST) -> None:
        for t in targets:
            for sub in ast.walk(t):
                if isinstance(sub, ast.Attribute):
                    root = _root_name(sub)
                    if root is not None and root in self.module_aliases:
                        self.add(node, "patches a module attribute (torch/triton/timer monkeypatching)",
                                 _dotted(sub) or sub.attr)
                        break

    def visit_Assign(self, node: ast.Assign) -> None:
        self._check_targets(node.targets, node)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_targets([node.target], node)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_targets([node.target], node)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        self._check_targets(node.targets, node)
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        # A module-level cache mutated from forward() is how pointer/value caches live.
        self.add(node, "global statement (module-level mutable state)", ", ".join(node.names))

    # -- control flow ----------------------------------------------------------------------
    def visit_Try(self, node: ast.AST) -> None:
        self.add(node, "try/except (fallback around the kernel path)", "try")
        self.generic_visit(node)

    visit_TryStar = visit_Try

    def visit_With(self, node: ast.With) -> None:
        for item in node.items:
            d = _dotted(item.context_expr.func) if isinstance(item.context_expr, ast.Call) else None
            if d and d.split(".")[-1] in ("suppress",):
                self.add(node, "exception suppression (fallback around the kernel path)", d)
        self.generic_visit(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for b in node.bases:
            d = _dotted(b) or ""
            last = d.split(".")[-1]
            if last in _SUBCLASS_BAN_BASES:
                self.add(node, "subclasses the reference Model", f"class {node.name}({d})")
            if last in _TENSOR_BASES and d != "nn.Parameter":
                self.add(node, "lazy tensor subclass (subclasses torch.Tensor)", f"class {node.name}({d})")
        for kw in node.keywords:
            if kw.arg == "metaclass":
                self.add(node, "custom metaclass", f"class {node.name}(metaclass=...)")
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if node.name in ("__torch_function__", "__torch_dispatch__"):
            self.add(node, "torch function/dispatch interception", f"def {node.name}")
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef


_MUTATORS = frozenset({"update", "append", "setdefault", "extend", "insert", "add", "pop", "popitem", "clear",
                       "__setitem__", "remove", "discard", "appendleft"})
_CACHE_DECORATORS = frozenset({"lru_cache", "cache", "cached_property"})


def _own_nodes(fn: ast.AST) -> list[ast.AST]:
    """Nodes of one function body, not descending into nested functions/classes/lambdas."""
    out: list[ast.AST] = []
    stack = list(ast.iter_child_nodes(fn))
    while stack:
        node = stack.pop()
        out.append(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        stack.extend(ast.iter_child_nodes(node))
    return out


# Methods torch.nn.Module defines (torch 2.13; a test keeps this in step with the installed
# torch): the framework and the harness call these by themselves (``model(x)``, ``.to()``,
# ``.eval()``, hooks), so an override is never construction-only, whoever calls it.
_MODULE_METHODS = frozenset({
    "T_destination", "_apply", "_call_impl", "_compiled_call_impl", "_get_backward_hooks",
    "_get_backward_pre_hooks", "_get_name", "_load_from_state_dict", "_maybe_warn_non_full_backward_hook",
    "_named_members", "_register_load_state_dict_pre_hook", "_register_state_dict_hook",
    "_replicate_for_data_parallel", "_save_to_state_dict", "_slow_forward", "_version", "_wrapped_call_impl",
    "add_module", "apply", "bfloat16", "buffers", "call_super_init", "children", "compile", "cpu", "cuda",
    "double", "dump_patches", "eval", "extra_repr", "float", "forward", "get_buffer", "get_extra_state",
    "get_parameter", "get_submodule", "half", "ipu", "load_state_dict", "modules", "mtia", "named_buffers",
    "named_children", "named_modules", "named_parameters", "parameters", "register_backward_hook",
    "register_buffer", "register_forward_hook", "register_forward_pre_hook", "register_full_backward_hook",
    "register_full_backward_pre_hook", "register_load_state_dict_post_hook", "register_load_state_dict_pre_hook",
    "register_module", "register_parameter", "register_state_dict_post_hook", "register_state_dict_pre_hook",
    "requires_grad_", "set_extra_state", "set_submodule", "share_memory", "state_dict", "to", "to_empty",
    "train", "type", "xpu", "zero_grad",
})


def _construction_methods(tree: ast.Module) -> set[int]:
    """``__init__`` of every class, and the helper methods only construction calls.

    Model code builds itself through helpers (torchvision's ``_make_layer`` sets
    ``self.inplanes`` as it goes); writing ``self`` there is construction, not a cache.
    A method counts when its name is neither a dunder nor a ``torch.nn.Module`` method
    (those run by themselves), appears in no string (``getattr(self, "name")``), and every
    mention of it anywhere is a direct call ``self.name(...)`` inside a construction
    method of its own class: a bare mention (``register_forward_hook(self.name)``) could
    run it later, so it disqualifies, and so does a call inside a nested function or lambda.
    """
    init: set[int] = set()
    strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        methods = {item.name: item for item in cls.body if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))}
        if "__init__" not in methods:
            continue
        # node -> the method whose own body holds it (a call inside a nested function or
        # lambda of __init__ may run at any later time, so it is in no method's own body)
        owner = {id(n): m for m in methods.values() for n in _own_nodes(m)}
        called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
        mentions: dict[str, list[ast.Attribute]] = {}
        for n in ast.walk(tree):
            if isinstance(n, ast.Attribute) and n.attr in methods:
                mentions.setdefault(n.attr, []).append(n)
        ok = {"__init__"}
        changed = True
        while changed:
            changed = False
            for name in methods:
                if name in ok or name.startswith("__") or name in _MODULE_METHODS or name in strings:
                    continue
                refs = mentions.get(name, [])
                if refs and all(id(r) in called and isinstance(r.value, ast.Name) and r.value.id == "self"
                                and id(r) in owner and owner[id(r)].name in ok for r in refs):
                    ok.add(name)
                    changed = True
        init |= {id(methods[name]) for name in ok}
    return init


def _state_findings(tree: ast.Module) -> list[Finding]:
    """Mutable state written from call-time code: the carrier of result caches.

    A candidate may set attributes in ``__init__``. In any other function, writing through
    a name the function does not own -- ``self.x``, ``self.x[k]``, a module-level or
    closure container -- or calling a mutator on it means results can survive between
    calls (keyed on pointers or values), which the timing loop would reward.
    """
    found: list[Finding] = []
    methods_init = _construction_methods(tree)
    skip: set[int] = set()
    for node in tree.body:
        if _is_main_guard(node):
            skip.update(id(n) for n in ast.walk(node))

    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) or id(fn) in skip:
            continue
        if not isinstance(fn, ast.Lambda):
            for dec in fn.decorator_list:
                d = _dotted(dec.func if isinstance(dec, ast.Call) else dec) or ""
                if d.split(".")[-1] in _CACHE_DECORATORS:
                    found.append(Finding("result caching (memoising decorator)", dec.lineno, d))
        if id(fn) in methods_init:
            continue
        own = _own_nodes(fn)
        args = fn.args
        local = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
        local |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
        local |= {n.id for n in own if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        local.discard("self")  # self's attributes outlive the call

        def foreign(expr: ast.AST, local: set[str] = local) -> bool:
            root = _root_name(expr)
            return isinstance(expr, (ast.Attribute, ast.Subscript)) and (root is None or root not in local)

        for sub in own:
            targets: list[ast.expr] = []
            if isinstance(sub, ast.Assign):
                targets = sub.targets
            elif isinstance(sub, (ast.AugAssign, ast.AnnAssign)):
                targets = [sub.target]
            elif isinstance(sub, ast.Delete):
                targets = sub.targets
            for t in targets:
                for elt in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]):
                    if foreign(elt):
                        found.append(Finding("mutable state written outside __init__ (result caching)",
                                             getattr(sub, "lineno", 0), ast.unparse(elt)[:80]))
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr in _MUTATORS:
                holder = sub.func.value
                root = _root_name(holder)
                if root is None or root not in local:
                    found.append(Finding("mutable state written outside __init__ (result caching)",
                                         sub.lineno, f"{ast.unparse(holder)[:60]}.{sub.func.attr}(...)"))
    return found


_GRAPH_ATTR = "_ke_graph_replay"
_GRAPH_REASON = "CUDA graph capture"
_STATE_REASON = "mutable state written outside __init__ (result caching)"


def _span(node: ast.AST) -> range:
    first = int(getattr(node, "lineno", 0))
    return range(first, int(getattr(node, "end_lineno", None) or first) + 1)


@functools.cache
def _canonical_helpers() -> dict[str, str]:
    """The emitted CUDA-graph helpers by name, as syntax-tree dumps: a constant, parsed once
    rather than for every candidate checked."""
    return {n.name: ast.dump(n) for n in pyast.parse(graph_replay.HELPERS).body
            if isinstance(n, (ast.FunctionDef, ast.ClassDef))}


def _graph_exemptions(tree: ast.Module) -> tuple[set[int], set[int]]:
    """Lines where a CUDA-graph replay may capture, and where it may write state: those of
    the emitted helpers and forward (``graph_replay``), compared as syntax trees, nothing
    else. Empty when the module holds anything but exactly that code around them."""
    canonical = _canonical_helpers()
    defs: dict[str, list[ast.AST]] = {}
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name in canonical:
            defs.setdefault(n.name, []).append(n)
    if not defs:
        return set(), set()
    helpers: dict[str, ast.AST] = {}
    for name, dump in canonical.items():
        found = defs.get(name, [])
        if len(found) != 1 or found[0] not in tree.body or ast.dump(found[0]) != dump:
            return set(), set()
        helpers[name] = found[0]
    # the helpers' names and ``torch`` are bound by nothing else (``torch`` by plain imports)
    for n in ast.walk(tree):
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            for a in n.names:
                bound = a.asname or a.name.split(".")[0]
                plain = isinstance(n, ast.Import) and a.asname is None and bound == "torch"
                if bound in canonical or (bound == "torch" and not plain):
                    return set(), set()
        elif isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load) and (n.id in canonical or n.id == "torch"):
            return set(), set()
    forwards = [f for f in ast.walk(tree)
                if isinstance(f, ast.FunctionDef) and f.name == "forward" and _is_graph_forward(f)]
    inside = {id(n) for h in list(helpers.values()) + forwards for n in ast.walk(h)}
    for n in ast.walk(tree):
        mentions = (isinstance(n, ast.Name) and n.id in canonical) or (
            isinstance(n, ast.Attribute) and n.attr == _GRAPH_ATTR) or (
            isinstance(n, ast.Constant) and n.value == _GRAPH_ATTR)
        if mentions and id(n) not in inside:
            return set(), set()
    runner, replay_cls = helpers["_graph_runner"], helpers["_GraphReplay"]
    assert isinstance(replay_cls, ast.ClassDef)
    call = next(m for m in replay_cls.body if isinstance(m, ast.FunctionDef) and m.name == "__call__")
    state = set(_span(call))
    for f in forwards:
        state |= {a.lineno for a in ast.walk(f) if isinstance(a, ast.Assign)
                  and any(isinstance(t, ast.Attribute) and t.attr == _GRAPH_ATTR for t in a.targets)}
    return set(_span(runner)), state


def _is_graph_forward(fn: ast.FunctionDef) -> bool:
    a = fn.args
    if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs or not a.args or a.args[0].arg != "self":
        return False
    params = [p.arg for p in a.args[1:]]
    expected = pyast.parse(textwrap.dedent("\n".join(graph_replay.forward_lines("self", params)))).body[0]
    assert isinstance(expected, ast.FunctionDef)
    return [ast.dump(x) for x in fn.body] == [ast.dump(x) for x in expected.body]


def check_candidate(source: str, spec_module_names: set[str] | None = None) -> StaticReport:
    """Parse and police a candidate; never raises."""
    try:
        tree = pyast.parse(source, filename="candidate.py")
    except SyntaxError as exc:
        return StaticReport(ok=False, syntax_error=f"syntax error at line {exc.lineno}: {exc.msg}")
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, absurd nesting
        return StaticReport(ok=False, syntax_error=f"source does not parse: {type(exc).__name__}: {exc}")
    checker = _Checker(set(spec_module_names or ()) | {"spec", "reference", "problem"})
    # Module-level imports first so aliases are known before attribute checks.
    body = [n for n in tree.body if not _is_main_guard(n)]
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            checker.visit(node)
    for node in body:
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            checker.visit(node)
    checker.findings.extend(_state_findings(tree))
    capture_lines, state_lines = _graph_exemptions(tree)
    if capture_lines:
        checker.findings = [f for f in checker.findings
                            if not (f.reason == _GRAPH_REASON and f.line in capture_lines)
                            and not (f.reason == _STATE_REASON and f.line in state_lines)]
    # By line; at one line the named reason comes before the generic "patches an attribute".
    checker.findings.sort(key=lambda f: (f.line, f.reason.startswith(("patches a module", "import of"))))
    has_model_new = any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body) or any(
        isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "ModelNew" for t in n.targets)
        for n in tree.body
    )
    report = StaticReport(ok=not checker.findings, findings=checker.findings)
    if not has_model_new and report.ok:
        # Not a policy violation; the worker reports it as compile_error. Kept here for speed.
        report.syntax_error = "candidate does not define class ModelNew"
        report.ok = False
    return report
