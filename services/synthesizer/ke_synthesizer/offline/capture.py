"""Front end: load an operator spec, build its reference Model and capture the forward
as a torch.fx graph annotated with shapes and dtypes (ShapeProp on the example inputs).

The captured spec also keeps the source text the candidate needs to rebuild the
model's parameters exactly like the reference (the class and the module lines it
needs, see model_source.py), so that seeding the RNG and constructing ``ModelNew`` yields the same weights.
"""

from __future__ import annotations

import logging
import types
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx
from torch.fx.passes.shape_prop import ShapeProp

from kernelevolve.errors import InvalidSpecError

from .model_source import ModelSource, model_source
from .shape_tracer import shape_specialized_trace

log = logging.getLogger(__name__)

# Modules fx should trace through rather than keep as opaque call_module nodes: none
# beyond torch's defaults. torch.nn leaf modules (Linear, LayerNorm, ...) stay leaves
# and are mapped to their functional form by the normaliser.


@dataclass
class CapturedSpec:
    """Everything the lowering passes need to know about one spec."""

    name: str
    source: str
    model: torch.nn.Module
    gm: torch.fx.GraphModule
    inputs: list[Any]
    init_inputs: list[Any]
    # the reference class and the spec lines it needs, as the candidate rebuilds them
    model_source: ModelSource
    forward_params: list[str] = field(default_factory=list)
    # input shapes the graph is fixed to (shape_tracer.py); empty when it holds for any shape
    specialized_shapes: list[tuple[int, ...]] = field(default_factory=list)
    # the spec's KE_TOLERANCE override ({"atol": .., "rtol": ..}) when it declares one
    tolerance: dict[str, float] = field(default_factory=dict)
    # KE_ERROR_BUDGET = False: the judge skips its float64 error budget (see spec_allows_tf32)
    error_budget_off: bool = False
    # graph rewrites applied or found (see decompose.py), e.g. {"attention": 1}
    rewrites: dict[str, int] = field(default_factory=dict)


def _load_namespace(source: str, name: str) -> dict[str, Any]:
    module = types.ModuleType(f"_ke_spec_{name}")
    try:
        code = compile(source, f"<spec {name}>", "exec")
        exec(code, module.__dict__)  # noqa: S102 - specs are trusted operator definitions
    except Exception as exc:  # any failure to load is a spec problem
        raise InvalidSpecError(f"spec {name!r} does not load: {exc}") from exc
    for required in ("Model", "get_inputs", "get_init_inputs"):
        if required not in module.__dict__:
            raise InvalidSpecError(f"spec {name!r} lacks {required}")
    return module.__dict__


def _trace(model: torch.nn.Module, inputs: list[Any], name: str) -> tuple[torch.fx.GraphModule,
                                                                         list[tuple[int, ...]]]:
    """The forward as an fx graph, and the input shapes it is fixed to (none when it holds
    for any shape). Three tracers, each taken when the one before refuses the forward:
    plain symbolic tracing; the same with buffers as graph values (``self.mask[:, :, :T, :T]``
    with ``T`` from ``x.size()`` slices a buffer by a traced size, which only a buffer proxy
    accepts); then shapes specialised to the example inputs (shape_tracer.py)."""
    errors = []
    for proxy_buffers in (False, True):
        tracer = torch.fx.Tracer()
        tracer.proxy_buffer_attributes = proxy_buffers
        try:
            graph = tracer.trace(model)
            return torch.fx.GraphModule(tracer.root, graph, model.__class__.__name__), []
        except Exception as exc:  # noqa: BLE001 - the next tracer may take it
            errors.append(f"{type(exc).__name__}: {exc}")
    log.info("symbolic tracing of %s failed (%s); tracing with shapes specialised", name, errors[-1])
    try:
        gm = shape_specialized_trace(model, inputs)
    except Exception as exc:
        raise InvalidSpecError(f"spec {name!r}: forward cannot be traced: {errors[0]}; "
                               f"with shapes specialised: {type(exc).__name__}: {exc}") from exc
    return gm, [tuple(x.shape) for x in inputs if isinstance(x, torch.Tensor)]


def _tolerance(ns: dict[str, Any]) -> dict[str, float]:
    tol = ns.get("KE_TOLERANCE")
    if isinstance(tol, dict) and all(isinstance(v, (int, float)) for v in tol.values()):
        return {str(k): float(v) for k, v in tol.items() if k in ("atol", "rtol")}
    return {}


def capture(source: str, name: str, seed: int = 0, decomposed: bool = True, attention: str = "flash") -> CapturedSpec:
    """Load, construct (seeded), trace and shape-propagate one spec. The global torch
    RNG of the calling process is left as it was."""
    with torch.random.fork_rng(devices=[]):
        return _capture(source, name, seed, decomposed, attention)


def _capture(source: str, name: str, seed: int, decomposed: bool, attention: str) -> CapturedSpec:
    ns = _load_namespace(source, name)
    try:
        init_inputs = list(ns["get_init_inputs"]())
        torch.manual_seed(seed)
        model = ns["Model"](*init_inputs)
        torch.manual_seed(seed)
        inputs = list(ns["get_inputs"]())
    except Exception as exc:
        raise InvalidSpecError(f"spec {name!r}: building the model or inputs failed: {exc}") from exc
    gm, specialized = _trace(model, inputs, name)
    try:
        with torch.no_grad():
            ShapeProp(gm).propagate(*inputs)
    except Exception as exc:
        raise InvalidSpecError(f"spec {name!r}: reference forward raised: {exc}") from exc
    pieces = model_source(source)
    params = [n.target for n in gm.graph.nodes if n.op == "placeholder"]
    log.debug("captured %s: %d nodes", name, len(gm.graph.nodes))
    spec = CapturedSpec(
        name=name,
        source=source,
        model=model,
        gm=gm,
        inputs=inputs,
        init_inputs=init_inputs,
        model_source=pieces,
        specialized_shapes=specialized,
        forward_params=[str(p) for p in params],
        tolerance=_tolerance(ns),
        error_budget_off=ns.get("KE_ERROR_BUDGET", None) is False,
    )
    if decomposed:
        from .decompose import decompose, fuse_attention

        try:
            spec.rewrites["decomposed"] = decompose(spec)
            spec.rewrites["attention"] = fuse_attention(spec, apply=attention == "flash")
        except Exception as exc:  # a failed rewrite must not lose the spec: re-trace plainly
            log.warning("decomposition of %s failed (%s); lowering the plain graph", name, exc)
            return _capture(source, name, seed, False, attention)
    return spec


def tensor_meta(node: torch.fx.Node) -> Any:
    """The ShapeProp TensorMetadata of a node, or None for non-tensor values."""
    meta = node.meta.get("tensor_meta")
    if meta is not None and hasattr(meta, "shape"):
        return meta
    return None


def shape_of(node: Any) -> tuple[int, ...] | None:
    if isinstance(node, torch.fx.Node):
        meta = tensor_meta(node)
        if meta is not None:
            return tuple(int(s) for s in meta.shape)
    return None


def dtype_of(node: Any) -> torch.dtype | None:
    if isinstance(node, torch.fx.Node):
        meta = tensor_meta(node)
        if meta is not None:
            return meta.dtype
    return None
