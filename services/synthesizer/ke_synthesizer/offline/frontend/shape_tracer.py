"""A torch.fx tracer that specialises shapes: the fallback when plain symbolic tracing
refuses a forward that uses its inputs' sizes as Python values.

Model code reads shapes constantly: ``B, T, C = x.size()`` then ``self.mask[:, :, :T, :T]``
(every GPT-style attention), ``torch.zeros(x.size(0), ...)``, ``range(x.shape[1])``,
``if x.dim() == 4:``. Symbolic tracing keeps those sizes as graph values, and Python
refuses them as slice indices, integers or branch conditions. This tracer runs the
model on the example inputs while it traces: every proxy carries the real value it
stands for, and questions about a shape (``shape``, ``size()``, ``dim()``, ``ndim``,
``numel()``, ``len()``) are answered with the real, static numbers. The graph is then
correct for the example shapes only; the candidate says so, and the evaluator's extra
shape sets, when a spec declares them, judge it on others.

Nothing else is specialised: a branch on tensor *values* still fails to trace (it would
bake one input's data into the kernel), and ``device``/``dtype`` stay graph values so the
candidate runs on whatever device the judge uses.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.fx
from torch.fx import _symbolic_trace as _st
from torch.fx.node import map_aggregate

_MISSING = object()
_SHAPE_METHODS = frozenset({"size", "dim", "numel"})


class _ShapeProxy(torch.fx.Proxy):
    """A proxy that knows its real value (``_real``) and answers shape questions with it."""

    _real: Any = _MISSING

    def _value(self) -> Any:
        return self.__dict__.get("_real", _MISSING)

    def __getattr__(self, name: str) -> Any:
        real = self._value()
        if isinstance(real, torch.Tensor):
            if name == "shape":
                return real.shape
            if name == "ndim":
                return real.ndim
            if name in _SHAPE_METHODS:
                return getattr(real, name)
        return super().__getattr__(name)

    def __len__(self) -> int:
        real = self._value()
        if isinstance(real, (torch.Tensor, tuple, list)):
            return len(real)
        return super().__len__()  # type: ignore[misc]

    def __iter__(self) -> Any:
        real = self._value()
        if isinstance(real, (tuple, list)):  # chunk / split / unbind results
            return iter([self[i] for i in range(len(real))])  # type: ignore[index]
        return super().__iter__()


class ShapeSpecializingTracer(torch.fx.Tracer):
    def __init__(self, root: torch.nn.Module, example_inputs: list[Any],
                 context: Callable[[], Any] = contextlib.nullcontext) -> None:
        super().__init__()
        self._context = context
        self._root_module = root
        self._examples = list(example_inputs)
        self._placeholders = 0

    def proxy(self, node: torch.fx.Node) -> torch.fx.Proxy:
        return _ShapeProxy(node, self)

    def create_proxy(self, kind: str, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                     name: str | None = None, type_expr: Any | None = None, proxy_factory_fn: Any = None
                     ) -> torch.fx.Proxy:
        proxy = super().create_proxy(kind, target, args, kwargs, name, type_expr, proxy_factory_fn)
        try:
            proxy.__dict__["_real"] = self._evaluate(kind, target, args, kwargs)
        except Exception:  # noqa: BLE001 - an op the example cannot run: the proxy stays symbolic
            proxy.__dict__["_real"] = _MISSING
        return proxy

    def _evaluate(self, kind: str, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if kind == "placeholder":
            i = self._placeholders
            self._placeholders += 1
            if i < len(self._examples):
                return self._examples[i]
            return args[0] if args else _MISSING  # a parameter with a default the inputs leave out
        if kind == "get_attr":
            # unpatched: while tracing, fx's Module.__getattr__ answers a parameter with a
            # proxy, and a proxy as the "real" value re-entered tracing on every op that read
            # it (29,596 nodes instead of 437 for selective_scan_chunked, each op also
            # evaluated on fake tensors: 9.5 s, then the graph was refused for its constants)
            obj: Any = self._root_module
            with _unpatched_modules():
                for part in str(target).split("."):
                    obj = getattr(obj, part)
            return obj
        real_args, real_kwargs = _real(args), _real(kwargs)
        if _contains_missing((real_args, real_kwargs)):
            return _MISSING
        with self._context(), torch.no_grad():
            if kind == "call_function":
                return target(*real_args, **real_kwargs)
            if kind == "call_method":
                return getattr(real_args[0], target)(*real_args[1:], **real_kwargs)
            if kind == "call_module":
                with _unpatched_modules():
                    return self._root_module.get_submodule(str(target))(*real_args, **real_kwargs)
        return _MISSING


@contextlib.contextmanager
def _unpatched_modules() -> Iterator[None]:
    """While it traces, fx replaces ``nn.Module.__call__`` (and ``__getattr__``) for every
    module; running a leaf module on real tensors must not be traced again (a leaf such
    as nn.TransformerEncoderLayer calls its own submodules). torch keeps the originals in
    these two names (torch 2.13; a test traces such a leaf)."""
    patched = torch.nn.Module.__call__, torch.nn.Module.__getattr__
    torch.nn.Module.__call__ = _st._orig_module_call  # type: ignore[method-assign]
    torch.nn.Module.__getattr__ = _st._orig_module_getattr  # type: ignore[method-assign]
    try:
        yield
    finally:
        torch.nn.Module.__call__, torch.nn.Module.__getattr__ = patched  # type: ignore[method-assign]


def _real(value: Any) -> Any:
    return map_aggregate(value, lambda v: v.__dict__.get("_real", _MISSING) if isinstance(v, torch.fx.Proxy) else v)


def _contains_missing(value: Any) -> bool:
    found = False

    def look(v: Any) -> Any:
        nonlocal found
        found = found or v is _MISSING
        return v

    map_aggregate(value, look)
    return found


def shape_specialized_trace(model: torch.nn.Module, inputs: list[Any],
                            context: Callable[[], Any] = contextlib.nullcontext) -> torch.fx.GraphModule:
    """Trace ``model`` with its shapes fixed to those of ``inputs`` (which are not modified:
    the tracer runs on clones, so an in-place op in the forward cannot change them).
    ``context``: the fake-tensor mode of fake ``inputs`` (a spec captured at real size):
    the example values are then computed in it, only the tracing itself runs outside it so
    that tensors the forward creates from constants stay real ``_tensor_constant`` values."""
    with context():
        examples = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
    tracer = ShapeSpecializingTracer(model, examples, context)
    graph = tracer.trace(model)
    return torch.fx.GraphModule(tracer.root, graph, model.__class__.__name__)
