"""Front end: load an operator spec, build its reference Model and capture the forward
as a torch.fx graph annotated with shapes and dtypes (ShapeProp on the example inputs).

The captured spec also keeps the source text the candidate needs to rebuild the
model's parameters exactly like the reference (the class and the module lines it
needs, see model_source.py), so that seeding the RNG and constructing ``ModelNew`` yields the same weights.

A spec over ``LARGE_BYTES`` is captured on fake tensors at its real shapes and its
specialised graphs are verified on the shrunk spec (README.md, *Capture at real size*).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

from kernelevolve import spec_probe
from kernelevolve.errors import InvalidSpecError
from kernelevolve.spec_shrink import ShrinkBudget

from . import real_state
from .aten_capture import aten_trace
from .captured import CapturedSpec
from .cell_loops import chained_cells, roll_cell_loops
from .decompose import decompose, fuse_attention
from .fx_meta import propagate_shapes
from .manual_cells import fold_manual_cells, forget_manual_cells
from .model_source import model_source
from .recurrent import loop_mode
from .shape_tracer import shape_specialized_trace

log = logging.getLogger(__name__)

# Above this many bytes of inputs and parameters a spec is captured on fake tensors (real
# shapes, no data): at real size the reference forward, the checks of every traced graph
# and ShapeProp took a median 15 s, p90 54 s and up to 170 s per spec on 16 cores with
# several GB resident (163 s for a 4 GiB layer norm on 2 cores). The largest example of
# examples/ops and examples/styles holds 0.31 MiB (captured on real tensors as before);
# the smallest of examples/large 49 MiB (a DenseNet block stack whose forward is GFLOPs).
LARGE_BYTES = 16 * 2**20
# The shrunk spec a specialised graph is verified on: bytes only. With spec_shrink's FLOP
# budget every halving step runs the forward on meta tensors (27.7 s of CPU to shrink the
# 4-layer bidirectional LSTM, stepping through time at each step); by bytes alone 5.3 s, and
# 1 MiB of inputs with 16 MiB of parameters keep the check's real forward small anyway.
SHRINK_BUDGET = ShrinkBudget(input_bytes=2**20, param_bytes=16 * 2**20, flops=float("inf"))

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


def _trace(model: torch.nn.Module, run: _Run, name: str, forward_params: list[str],
           accept: _ShrunkCheck | None = None
           ) -> tuple[torch.fx.GraphModule | None, list[tuple[int, ...]], str, str]:
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
    becomes matmuls, attention and pointwise ops the families lower.

    ``accept`` (a spec captured at real size on fake tensors, see ``_capture_large``) has
    the last word on each graph by its tracer's key (``TRACERS``): the same tracer must
    also give a verified graph of the shrunk spec."""
    errors: list[str] = []
    for gm, key in _candidates(model, run, name, forward_params, errors):
        if run.fake is not None and _fake_constant(gm):
            errors.append(f"{key}: a tensor computed while tracing became a constant of the graph")
            continue
        if accept is not None and not accept(key):
            errors.append(f"{key}: not verified on the shrunk spec{': ' + accept.reason if accept.reason else ''}")
            continue
        how = "symbolic" if key.startswith("symbolic") else key
        return gm, ([] if how == "symbolic" else _shapes(run.inputs)), how, ""
    reason = "; ".join(errors)
    log.warning("no tracer captured %s (%s); the candidate calls the reference forward", name, reason)
    return None, _shapes(run.inputs), "library", reason


# tracer keys in the order _candidates tries them
TRACERS = ("symbolic", "symbolic-buffers", "shapes", "aten")


def _candidates(model: torch.nn.Module, run: _Run, name: str, forward_params: list[str], errors: list[str],
                only: str | None = None) -> Iterator[tuple[torch.fx.GraphModule, str]]:
    """Every graph a tracer gives that runs (and, specialised, matches the reference), in
    the order of ``_trace``; ``only``: that tracer alone (its key)."""
    for proxy_buffers, key in ((False, "symbolic"), (True, "symbolic-buffers")):
        tracer = torch.fx.Tracer()
        tracer.proxy_buffer_attributes = proxy_buffers
        try:
            with tensor_attributes_kept(model):  # before the GraphModule copies the attributes it reads
                graph = tracer.trace(model)
            gm = torch.fx.GraphModule(tracer.root, graph, model.__class__.__name__)
        except Exception as exc:  # noqa: BLE001 - the next tracer may take it
            errors.append(_brief(exc))
            continue
        if _has_decomposed_module(gm) and only in (None, "aten"):
            aten_gm = _aten_or_none(model, run, name, forward_params, errors)
            if aten_gm is not None:
                yield aten_gm, "aten"
        if only in (None, key) and _propagates(gm, run, name, errors):
            yield gm, key
    if errors:
        log.info("symbolic tracing of %s failed (%s); tracing with shapes specialised", name, errors[-1])
    if only in (None, "shapes"):
        try:
            with tensor_attributes_kept(model):
                gm = shape_specialized_trace(model, run.inputs, run.context)
            if _matches(gm, run, name, errors):
                yield gm, "shapes"
        except Exception as exc:  # noqa: BLE001 - the dispatcher-level trace may take it
            errors.append(f"with shapes specialised: {_brief(exc)}")
    if only in (None, "aten"):
        aten_gm = _aten_or_none(model, run, name, forward_params, errors)
        if aten_gm is not None:
            yield aten_gm, "aten"


def _fake_constant(gm: torch.fx.GraphModule) -> bool:
    """A ``_tensor_constant`` of a graph traced on fake tensors that is itself fake: a value
    the tracer computed from the example inputs and froze into the graph (their data, at
    real size); it has no values to emit, and it would bake one input into the kernel."""
    for node in gm.graph.nodes:
        if node.op == "get_attr" and str(node.target).split(".")[-1].startswith("_tensor_constant"):
            obj: Any = gm
            for part in str(node.target).split("."):
                obj = getattr(obj, part, None)
            if isinstance(obj, FakeTensor):
                return True
    return False


def _brief(exc: BaseException) -> str:
    """One line of an exception for the reasons a candidate carries."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0][:200] if lines else ''}"


def _shapes(inputs: list[Any]) -> list[tuple[int, ...]]:
    return [tuple(x.shape) for x in inputs if isinstance(x, torch.Tensor)]


def _has_decomposed_module(gm: torch.fx.GraphModule) -> bool:
    """A library module the dispatcher-level trace should decompose; a recurrent layer the
    recurrent family loops over time (``loop_mode``, called with its input and at most the
    initial state, positionally) stays one node of the symbolic graph, and so do the calls
    of a cell over a sequence's time steps (``cell_loops``: one loop node after capture)."""
    chained = chained_cells(gm)
    for n in gm.graph.nodes:
        if n.op == "call_module":
            mod = gm.get_submodule(str(n.target))
            looped = (loop_mode(mod) is not None and 1 <= len(n.args) <= 2 and not n.kwargs) or n in chained
            if isinstance(mod, _DECOMPOSED) and not looped:
                return True
    return False


def _propagates(gm: torch.fx.GraphModule, run: _Run, name: str, errors: list[str]) -> bool:
    """A symbolic graph can still fail on real values (a recurrent module's tuple outputs
    unpacked by a proxy, ...), or on fake ones: then the next tracer is tried."""
    try:
        propagate_shapes(gm, _clones(run.inputs, run.context), run.context)
        return True
    except Exception as exc:  # noqa: BLE001 - recorded, the next tracer may take it
        errors.append(f"symbolic graph does not run: {_brief(exc)}")
        log.info("symbolic graph of %s does not run (%s)", name, exc)
        return False


def _aten_or_none(model: torch.nn.Module, run: _Run, name: str, forward_params: list[str],
                  errors: list[str]) -> torch.fx.GraphModule | None:
    try:
        with tensor_attributes_kept(model):
            gm = aten_trace(model, run.inputs, forward_params)
    except Exception as exc:  # noqa: BLE001 - recorded for the library candidate's note
        errors.append(f"dispatcher-level trace: {exc}")
        return None
    return gm if _matches(gm, run, name, errors) else None


def _matches(gm: torch.fx.GraphModule, run: _Run, name: str, errors: list[str]) -> bool:
    """A specialised graph reproduces the reference forward on the example inputs (same
    seed, so dropout draws agree): a tracer that baked a wrong branch or missed an
    aliasing write is not trusted. On fake inputs only shapes and dtypes can agree: the
    values are compared on the shrunk spec (``_capture_large``)."""
    try:
        expected = run.expected()
        with run.context(), torch.no_grad(), torch.random.fork_rng(devices=[]), run.kept(gm):
            torch.manual_seed(0)
            got = gm(*_clones(run.inputs))
        ok = _same(got, expected, values=not run.fake)
    except Exception as exc:  # noqa: BLE001 - the next tracer may take it
        errors.append(f"captured graph does not run: {_brief(exc)}")
        return False
    if not ok:
        errors.append("captured graph differs from the reference forward")
        log.info("captured graph of %s differs from the reference forward", name)
    return ok


def _same(a: Any, b: Any, values: bool = True) -> bool:
    fa, fb = torch.utils._pytree.tree_leaves(a), torch.utils._pytree.tree_leaves(b)
    if len(fa) != len(fb):
        return False
    for x, y in zip(fa, fb, strict=True):
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return False
        if isinstance(x, torch.Tensor):
            if x.shape != y.shape or x.dtype != y.dtype:
                return False
            if not values:
                continue
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
    running statistics, a hidden state the forward assigns to ``self``): the lowering reads
    buffers and tensor attributes as the reference built them."""
    saved = {k: v.clone() for k, v in model.named_buffers()}
    try:
        with tensor_attributes_kept(model):
            yield
    finally:
        with torch.no_grad():
            for k, v in model.named_buffers():
                if k in saved:
                    v.copy_(saved[k])


@contextlib.contextmanager
def tensor_attributes_kept(model: torch.nn.Module) -> Iterator[None]:
    """Plain tensor attributes of the model and its submodules (``self.hidden =
    torch.randn(...)`` in ``__init__``, neither parameter nor buffer) bound again to the
    tensors ``__init__`` made after a forward or a trace that assigned them: a forward that
    keeps state on the module (``self.hidden = tanh(...)``) would otherwise leave a traced
    proxy or a later call's value there, and the graph would read it as a constant. The
    candidate computes each call from the state as built (the evaluator's protocol calls a
    forward as a function of parameters and inputs: its repeat check refuses a candidate
    whose output depends on earlier calls)."""
    saved = [(mod, k, v) for mod in model.modules() for k, v in list(vars(mod).items())
             if isinstance(v, torch.Tensor) and not k.startswith("_")]
    try:
        yield
    finally:
        for mod, k, v in saved:
            object.__setattr__(mod, k, v)


def _clones(inputs: list[Any], context: Callable[[], Any] = contextlib.nullcontext) -> list[Any]:
    with context():
        return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def _reference_output(model: torch.nn.Module, run: _Run, name: str) -> Any:
    """The reference forward on the example inputs (seeded as the graph checks run it):
    a spec whose reference raises is the only forward refused."""
    try:
        with run.context(), torch.no_grad(), torch.random.fork_rng(devices=[]), run.kept(model):
            torch.manual_seed(0)
            return model(*_clones(run.inputs))
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


@dataclass
class _Run:
    """The example inputs a graph is checked on and the reference's output on them; with
    ``fake`` they are fake tensors (real shapes, no data) and ops run in that mode."""

    inputs: list[Any]
    fake: FakeTensorMode | None = None
    # the reference forward on ``inputs``, run on the first call of ``expected``
    reference: Callable[[], Any] | None = None
    _expected: list[Any] = field(default_factory=list)

    def context(self) -> Any:
        return self.fake if self.fake is not None else contextlib.nullcontext()

    def expected(self) -> Any:
        if not self._expected:
            assert self.reference is not None
            self._expected.append(self.reference())
        return self._expected[0]

    def kept(self, model: torch.nn.Module) -> Any:
        """Buffers restored after a check's forward; fake buffers hold nothing to restore."""
        return _buffers_kept(model) if self.fake is None else contextlib.nullcontext()


def _build(ns: dict[str, Any], name: str, seed: int, fake: FakeTensorMode | None
           ) -> tuple[torch.nn.Module, list[Any], list[Any]]:
    """``Model(*get_init_inputs())`` and ``get_inputs()``, each after seeding; with ``fake``
    both are built in that mode (parameters and inputs are fake tensors: nothing allocated,
    no RNG drawn; the candidate rebuilds the real ones from the verbatim ``__init__``)."""
    try:
        init_inputs = list(ns["get_init_inputs"]())
        with fake if fake is not None else contextlib.nullcontext():
            torch.manual_seed(seed)
            model = ns["Model"](*init_inputs)
            torch.manual_seed(seed)
            inputs = list(ns["get_inputs"]())
    except Exception as exc:
        raise InvalidSpecError(f"spec {name!r}: building the model or inputs failed: {exc}") from exc
    return model, init_inputs, inputs


def _large_state(source: str, name: str) -> int | None:
    """The bytes of parameters and buffers of a spec whose inputs and parameters are over
    ``LARGE_BYTES``, measured on the meta device; None for a smaller spec. A spec the meta
    device cannot build is captured as it always was."""
    try:
        size = spec_probe.measure(source, forward=False)
    except Exception as exc:  # noqa: BLE001 - the real build below reports a real failure
        log.debug("spec %s not measured on the meta device (%s)", name, exc)
        return None
    if size.input_bytes + size.param_bytes <= LARGE_BYTES:
        return None
    log.info("capturing %s on fake tensors (%.3g GiB of inputs, %.3g MiB of parameters)", name,
             size.input_bytes / 2**30, size.param_bytes / 2**20)
    return size.param_bytes


def _real_model(ns: dict[str, Any], init_inputs: list[Any], seed: int) -> torch.nn.Module:
    """``Model(*init_inputs)`` on real tensors, seeded as ``_build`` seeds it."""
    torch.manual_seed(seed)
    model: torch.nn.Module = ns["Model"](*init_inputs)
    return model


class _ShrunkCheck:
    """Whether a tracer also gives a verified graph of the shrunk spec (``spec_shrink``:
    its ``get_cpu_inputs()`` or halved size constants), by tracer key; the shrunk spec is
    built, and its reference run, on the first question only. Symbolic graphs hold for any
    shape, so running on fake tensors at real size is their whole check (as running on the
    example inputs is for a small spec): they need no shrunk spec."""

    def __init__(self, source: str, name: str, seed: int, forward_params: list[str]) -> None:
        self._source, self._name, self._seed, self._params = source, name, seed, forward_params
        self._small: tuple[torch.nn.Module, _Run] | None = None
        self._answers: dict[str, bool] = {}
        self.reason = ""

    def __call__(self, key: str) -> bool:
        if key.startswith("symbolic"):
            return True
        if key not in self._answers:
            self._answers[key] = self._verify(key)
        return self._answers[key]

    def _verify(self, key: str) -> bool:
        small = self._shrunk()
        if small is None:
            return False
        model, run = small
        errors: list[str] = []
        ok = next(_candidates(model, run, self._name, self._params, errors, only=key), None) is not None
        log.info("tracer %s on the shrunk %s: %s", key, self._name, "verified" if ok else "; ".join(errors))
        return ok

    def _shrunk(self) -> tuple[torch.nn.Module, _Run] | None:
        if self._small is None and not self.reason:
            try:
                answer = spec_probe.fit(self._source, SHRINK_BUDGET)
                ns = _load_namespace(answer["source"], self._name)
                model, _, inputs = _build(ns, self._name, self._seed, None)
                run = _Run(inputs)
                run.reference = functools.partial(_reference_output, model, run, self._name)
                run.expected()
                self._small = model, run
            except Exception as exc:  # noqa: BLE001 - no shrunk spec: specialised graphs unverified
                self.reason = f"the shrunk spec to verify it on is not available: {_brief(exc)}"
                log.info("%s: %s", self._name, self.reason)
        return self._small


def capture(source: str, name: str, seed: int = 0, decomposed: bool = True, attention: str = "flash") -> CapturedSpec:
    """Load, construct (seeded), trace and shape-propagate one spec. The global torch
    RNG of the calling process is left as it was."""
    with torch.random.fork_rng(devices=[]):
        return _capture(source, name, seed, decomposed, attention)


def _capture(source: str, name: str, seed: int, decomposed: bool, attention: str) -> CapturedSpec:
    ns = _load_namespace(source, name)
    state_bytes = _large_state(source, name)
    fake = FakeTensorMode(allow_non_fake_inputs=True) if state_bytes is not None else None
    model, init_inputs, inputs = _build(ns, name, seed, fake)
    run = _Run(inputs, fake)
    run.reference = functools.partial(_reference_output, model, run, name)
    if fake is None:
        run.expected()  # a reference that raises is refused before any tracer runs
    accept = _ShrunkCheck(source, name, seed, _forward_params(model)) if fake is not None else None
    traced, specialized, how, reason = _trace(model, run, name, _forward_params(model), accept)
    if traced is None:
        run.expected()  # on fake tensors the reference runs only when a check needs it
    if traced is None:
        gm = torch.fx.GraphModule(model, torch.fx.Graph(), model.__class__.__name__)
    else:
        gm = traced
    if traced is not None and how != "symbolic":  # _propagates annotated symbolic graphs already
        try:
            propagate_shapes(gm, _clones(inputs, run.context), run.context)
        except Exception as exc:  # _trace checked every graph it returns: not expected
            raise InvalidSpecError(f"spec {name!r}: captured forward raised: {exc}") from exc
    if traced is not None and state_bytes is not None:
        # buffers are fake too: proofs on their values (a causal mask) read the real ones
        real_state.attach(gm, functools.partial(_real_model, ns, init_inputs, seed), state_bytes, name)
    rolled = folded = 0
    while traced is not None:
        # calls of one cell over the time steps as one loop node (cell_loops.py): the graph
        # ran as traced; the loop node calls the same cell step by step. Again after shapes
        # are known: a second cell stacked in the same loop reads the first loop's steps.
        # A cell written by hand from Linear layers and gate math is such a cell first.
        folded += fold_manual_cells(gm)
        count = roll_cell_loops(gm, specialised=how != "symbolic")
        forget_manual_cells(gm)
        if not count:
            break
        rolled += count
        propagate_shapes(gm, _clones(inputs, run.context), run.context, new_only=fake is not None)
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
        fake_mode=fake,
    )
    if rolled:
        spec.rewrites["cell_loops"] = rolled
    if folded:
        spec.rewrites["manual_cells"] = folded
    if decomposed and traced is not None:
        try:
            spec.rewrites["decomposed"] = decompose(spec)
            spec.rewrites["attention"] = fuse_attention(spec, apply=attention == "flash")
        except Exception as exc:  # a failed rewrite must not lose the spec: re-trace plainly
            log.warning("decomposition of %s failed (%s); lowering the plain graph", name, exc)
            return _capture(source, name, seed, False, attention)
    return spec
