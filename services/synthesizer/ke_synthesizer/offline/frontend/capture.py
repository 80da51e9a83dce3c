"""Front end: load an operator spec, build its reference Model and capture the forward
as a torch.fx graph annotated with shapes and dtypes (ShapeProp on the example inputs).

The captured spec also keeps the source text the candidate needs to rebuild the
model's parameters exactly like the reference (the class and the module lines it
needs, see model_source.py), so that seeding the RNG and constructing ``ModelNew`` yields the same weights.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import types
from collections.abc import Iterator
from typing import Any

import torch
import torch.fx
from torch.fx.passes.shape_prop import ShapeProp

from kernelevolve.errors import InvalidSpecError

from .aten_capture import aten_trace
from .captured import CapturedSpec
from .decompose import decompose, fuse_attention
from .model_source import model_source
from .shape_tracer import shape_specialized_trace

log = logging.getLogger(__name__)

# library modules whose symbolic-trace leaf is better captured at the dispatcher level,
# where they decompose into matmuls, attention and pointwise ops the families lower
# (aten_capture.py): recurrent layers and cells, transformer layers, multi-head attention
_DECOMPOSED = (torch.nn.RNNBase, torch.nn.RNNCellBase, torch.nn.MultiheadAttention, torch.nn.TransformerEncoder,
               torch.nn.TransformerDecoder, torch.nn.TransformerEncoderLayer, torch.nn.TransformerDecoderLayer,
               torch.nn.Transformer)

# Modules fx should trace through rather than keep as opaque call_module nodes: none
# beyond torch's defaults. torch.nn leaf modules (Linear, LayerNorm, ...) stay leaves
# and are mapped to their functional form by the normaliser.


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


def _trace(model: torch.nn.Module, inputs: list[Any], name: str, expected: Any,
           forward_params: list[str]) -> tuple[torch.fx.GraphModule | None, list[tuple[int, ...]], str, str]:
    """The forward as an fx graph, the input shapes it is fixed to (none when it holds for
    any shape), the tracer that took it and, when none did, why. Tracers in order, each
    taken when the ones before refuse the forward (or give a graph whose result differs
    from the reference's on the example inputs): plain symbolic tracing; the same with
    buffers as graph values (``self.mask[:, :, :T, :T]`` with ``T`` from ``x.size()``
    slices a buffer by a traced size, which only a buffer proxy accepts); shapes
    specialised to the example inputs (shape_tracer.py); the dispatcher-level trace
    (aten_capture.py: loops unrolled, ``if`` on shapes decided, library modules
    decomposed). A symbolic graph holding a recurrent layer (or a transformer layer,
    multi-head attention) goes to the dispatcher-level trace first: there the module
    becomes matmuls, attention and pointwise ops the families lower."""
    errors: list[str] = []
    for proxy_buffers in (False, True):
        tracer = torch.fx.Tracer()
        tracer.proxy_buffer_attributes = proxy_buffers
        try:
            graph = tracer.trace(model)
            gm = torch.fx.GraphModule(tracer.root, graph, model.__class__.__name__)
        except Exception as exc:  # noqa: BLE001 - the next tracer may take it
            errors.append(_brief(exc))
            continue
        if _has_decomposed_module(gm):
            aten_gm = _aten_or_none(model, inputs, name, expected, forward_params, errors)
            if aten_gm is not None:
                return aten_gm, _shapes(inputs), "aten", ""
        if _propagates(gm, inputs, name, errors):
            return gm, [], "symbolic", ""
    log.info("symbolic tracing of %s failed (%s); tracing with shapes specialised", name, errors[-1])
    try:
        gm = shape_specialized_trace(model, inputs)
        if _matches(gm, inputs, expected, name, errors):
            return gm, _shapes(inputs), "shapes", ""
    except Exception as exc:  # noqa: BLE001 - the dispatcher-level trace may take it
        errors.append(f"with shapes specialised: {_brief(exc)}")
    aten_gm = _aten_or_none(model, inputs, name, expected, forward_params, errors)
    if aten_gm is not None:
        return aten_gm, _shapes(inputs), "aten", ""
    reason = "; ".join(errors)
    log.warning("no tracer captured %s (%s); the candidate calls the reference forward", name, reason)
    return None, _shapes(inputs), "library", reason


def _brief(exc: BaseException) -> str:
    """One line of an exception for the reasons a candidate carries."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0][:200] if lines else ''}"


def _shapes(inputs: list[Any]) -> list[tuple[int, ...]]:
    return [tuple(x.shape) for x in inputs if isinstance(x, torch.Tensor)]


def _has_decomposed_module(gm: torch.fx.GraphModule) -> bool:
    return any(n.op == "call_module" and isinstance(gm.get_submodule(str(n.target)), _DECOMPOSED)
               for n in gm.graph.nodes)


def _propagates(gm: torch.fx.GraphModule, inputs: list[Any], name: str, errors: list[str]) -> bool:
    """A symbolic graph can still fail on real values (a recurrent module's tuple outputs
    unpacked by a proxy, ...): then the next tracer is tried."""
    try:
        with torch.no_grad():
            ShapeProp(gm).propagate(*_clones(inputs))
        return True
    except Exception as exc:  # noqa: BLE001 - recorded, the next tracer may take it
        errors.append(f"symbolic graph does not run: {_brief(exc)}")
        log.info("symbolic graph of %s does not run (%s)", name, exc)
        return False


def _aten_or_none(model: torch.nn.Module, inputs: list[Any], name: str, expected: Any, forward_params: list[str],
                  errors: list[str]) -> torch.fx.GraphModule | None:
    try:
        gm = aten_trace(model, inputs, forward_params)
    except Exception as exc:  # noqa: BLE001 - recorded for the library candidate's note
        errors.append(f"dispatcher-level trace: {exc}")
        return None
    return gm if _matches(gm, inputs, expected, name, errors) else None


def _matches(gm: torch.fx.GraphModule, inputs: list[Any], expected: Any, name: str, errors: list[str]) -> bool:
    """A specialised graph reproduces the reference forward on the example inputs (same
    seed, so dropout draws agree): a tracer that baked a wrong branch or missed an
    aliasing write is not trusted."""
    try:
        with torch.no_grad(), torch.random.fork_rng(devices=[]), _buffers_kept(gm):
            torch.manual_seed(0)
            got = gm(*_clones(inputs))
        ok = _same(got, expected)
    except Exception as exc:  # noqa: BLE001 - the next tracer may take it
        errors.append(f"captured graph does not run: {_brief(exc)}")
        return False
    if not ok:
        errors.append("captured graph differs from the reference forward")
        log.info("captured graph of %s differs from the reference forward", name)
    return ok


def _same(a: Any, b: Any) -> bool:
    fa, fb = torch.utils._pytree.tree_leaves(a), torch.utils._pytree.tree_leaves(b)
    if len(fa) != len(fb):
        return False
    for x, y in zip(fa, fb, strict=True):
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return False
        if isinstance(x, torch.Tensor):
            if x.shape != y.shape or x.dtype != y.dtype:
                return False
            if x.is_floating_point() and not torch.allclose(x.double(), y.double(), rtol=1e-4, atol=1e-5,
                                                             equal_nan=True):
                return False
            if not x.is_floating_point() and not torch.equal(x, y):
                return False
        elif x != y:
            return False
    return True


@contextlib.contextmanager
def _buffers_kept(model: torch.nn.Module) -> Iterator[None]:
    """Running the forward to check a graph must not move the model's state (batch norm's
    running statistics): the lowering reads buffers as the reference built them."""
    saved = {k: v.clone() for k, v in model.named_buffers()}
    try:
        yield
    finally:
        with torch.no_grad():
            for k, v in model.named_buffers():
                if k in saved:
                    v.copy_(saved[k])


def _clones(inputs: list[Any]) -> list[Any]:
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def _reference_output(model: torch.nn.Module, inputs: list[Any], name: str) -> Any:
    """The reference forward on the example inputs (seeded as the graph checks run it):
    a spec whose reference raises is the only forward refused."""
    try:
        with torch.no_grad(), torch.random.fork_rng(devices=[]), _buffers_kept(model):
            torch.manual_seed(0)
            return model(*_clones(inputs))
    except Exception as exc:
        raise InvalidSpecError(f"spec {name!r}: reference forward raised: {type(exc).__name__}: {exc}") from exc


def _forward_params(model: torch.nn.Module) -> list[str]:
    try:
        return [p.name for p in inspect.signature(model.forward).parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return []


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
    expected = _reference_output(model, inputs, name)
    traced, specialized, how, reason = _trace(model, inputs, name, expected, _forward_params(model))
    if traced is None:
        gm = torch.fx.GraphModule(model, torch.fx.Graph(), model.__class__.__name__)
    else:
        gm = traced
    if traced is not None and how != "symbolic":  # _propagates annotated symbolic graphs already
        try:
            with torch.no_grad():
                ShapeProp(gm).propagate(*_clones(inputs))
        except Exception as exc:  # _trace checked every graph it returns: not expected
            raise InvalidSpecError(f"spec {name!r}: captured forward raised: {exc}") from exc
    pieces = model_source(source, keep_forward=traced is None)
    params = [n.target for n in gm.graph.nodes if n.op == "placeholder"] if traced is not None else \
        _forward_params(model)
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
        tracer=how,
        library_reason=reason,
    )
    if decomposed and traced is not None:
        try:
            spec.rewrites["decomposed"] = decompose(spec)
            spec.rewrites["attention"] = fuse_attention(spec, apply=attention == "flash")
        except Exception as exc:  # a failed rewrite must not lose the spec: re-trace plainly
            log.warning("decomposition of %s failed (%s); lowering the plain graph", name, exc)
            return _capture(source, name, seed, False, attention)
    return spec
