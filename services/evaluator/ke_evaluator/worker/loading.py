"""Loading operator specs and candidates inside the worker; spec validation.

A spec is a KernelBench-style module: ``class Model(nn.Module)``, ``get_inputs()``,
``get_init_inputs()``; optional module-level ``KE_TOLERANCE = {"atol": .., "rtol": ..}``
and ``get_extra_inputs()`` returning a list of extra input lists (other shapes: odd sizes,
non-multiples of block sizes) that every candidate must also get right.
Worker side: torch only.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import secrets
import sys
import types
import weakref
from dataclasses import dataclass, field
from typing import Any

import torch

from . import output_checks


class SpecError(Exception):
    """The spec itself is unusable (not the candidate's fault)."""


def source_sha(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def import_source(source: str, module_name: str, directory: str) -> types.ModuleType:
    """Import ``source`` from a real file (Triton's JIT reads kernel source via inspect)."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{module_name}.py")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(source)
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = mod  # dataclasses/typing need the module registered
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return mod


@dataclass
class LoadedSpec:
    sha: str
    name: str
    module: types.ModuleType
    tolerance: dict[str, float] | None = None
    # KE_ERROR_BUDGET: False = the spec declared none (its tolerance is the only bound);
    # a number = its factor; None = the Judge's factor
    error_budget: float | bool | None = None
    extra_count: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def Model(self) -> type:  # noqa: N802 - mirrors the spec's name
        return self.module.Model

    def init_inputs(self) -> list[Any]:
        init = self.module.get_init_inputs()
        return list(init) if isinstance(init, (list, tuple)) else [init]

    def inputs(self, seed: int, device: torch.device) -> list[Any]:
        raw = _generate(self.module.get_inputs, seed, device)
        if not isinstance(raw, (list, tuple)):
            raise SpecError(f"get_inputs() must return a list, got {type(raw).__name__}")
        return [to_device(x, device) for x in raw]

    def extra_inputs(self, seed: int, device: torch.device) -> list[list[Any]]:
        fn = getattr(self.module, "get_extra_inputs", None)
        if fn is None:
            return []
        sets = _generate(fn, seed, device)
        if not isinstance(sets, (list, tuple)) or not all(isinstance(s, (list, tuple)) for s in sets):
            raise SpecError("get_extra_inputs() must return a list of input lists")
        return [[to_device(x, device) for x in s] for s in sets]


def _generate(fn: Any, seed: int, device: torch.device) -> Any:
    """Call an input generator seeded, with the evaluation device as torch's default
    device: ``torch.randn(...)`` then fills device memory directly. Host generation of a
    2**23-element fp32 input took tens of milliseconds, repeated for every trial of every
    candidate. A spec that sets ``HOST_INPUTS = True``, or whose generator fails on the
    device (numpy, explicit host tensors mixed with defaults), is generated on the host
    and copied over. Values differ between the two paths; both are seeded."""
    if device.type == "cuda" and not getattr(fn, "__globals__", {}).get("HOST_INPUTS", False):
        torch.manual_seed(seed)
        try:
            with torch.device(device):
                return fn()
        except Exception:  # noqa: BLE001 - fall back to host generation
            pass
    torch.manual_seed(seed)
    return fn()


def to_device(x: Any, device: torch.device) -> Any:
    return output_checks.map_tree(x, lambda t: t.to(device))


# Per-process token in module names: a candidate cannot guess the spec module's name to
# pull it out of sys.modules (importing it is also banned statically).
_TOKEN = secrets.token_hex(6)


def load_spec(source: str, name: str, directory: str, cache: dict[str, LoadedSpec]) -> LoadedSpec:
    sha = source_sha(source)
    if sha in cache:
        return cache[sha]
    try:
        mod = import_source(source, f"_ke_spec_{sha[:16]}_{_TOKEN}", directory)
    except SyntaxError as exc:
        raise SpecError(f"spec does not parse: line {exc.lineno}: {exc.msg}") from exc
    except Exception as exc:  # noqa: BLE001 - any import-time failure makes the spec unusable
        raise SpecError(f"spec raised on import: {type(exc).__name__}: {exc}") from exc
    missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if not hasattr(mod, n)]
    if missing:
        raise SpecError(f"spec lacks {', '.join(missing)}")
    if not (isinstance(mod.Model, type) and issubclass(mod.Model, torch.nn.Module)):
        raise SpecError("spec's Model is not a torch.nn.Module subclass")
    if not callable(mod.get_inputs) or not callable(mod.get_init_inputs):
        raise SpecError("spec's get_inputs / get_init_inputs must be functions")
    tol = getattr(mod, "KE_TOLERANCE", None)
    if tol is not None:
        if not (isinstance(tol, dict) and set(tol) <= {"atol", "rtol"}
                and all(isinstance(v, (int, float)) and v >= 0 for v in tol.values())):
            raise SpecError("KE_TOLERANCE must be a dict with non-negative 'atol' and/or 'rtol'")
        tol = {k: float(v) for k, v in tol.items()}
    budget = getattr(mod, "KE_ERROR_BUDGET", None)
    factor_ok = isinstance(budget, (int, float)) and not isinstance(budget, bool) and budget >= 1
    if budget is not None and budget is not False and not factor_ok:
        raise SpecError("KE_ERROR_BUDGET must be False (no float64 error budget) or a factor >= 1")
    if budget is False and tol is None:
        raise SpecError("KE_ERROR_BUDGET = False needs an explicit KE_TOLERANCE: the tolerance is then the only bound")
    loaded = LoadedSpec(sha=sha, name=name, module=mod, tolerance=tol,
                        error_budget=budget if budget is False else (float(budget) if budget is not None else None))
    cache[sha] = loaded
    return loaded


def build_model(cls: type, init: list[Any], seed: int, device: torch.device) -> torch.nn.Module:
    # Same seed before both constructors: parameters created in the same order get the
    # same values (the candidate-side copy of the state dict makes this robust).
    torch.manual_seed(seed)
    model = cls(*init).to(device)
    hold_plain_state(model)
    return model


# Models whose forward reassigned a plain tensor attribute (``self.hidden = ...``).
_STATE_MOVED: weakref.WeakKeyDictionary[torch.nn.Module, set[str]] = weakref.WeakKeyDictionary()


def hold_plain_state(model: torch.nn.Module) -> None:
    """Every call starts from the plain tensor attributes ``__init__`` built.

    A reference that keeps state on the module (``self.hidden = torch.tanh(...)`` in its
    forward, as people write recurrent cells) changes its own next answer with every call:
    the protocol calls it many times (cost measurement, trials, the float64 run, timing), so
    its answers drifted from call to call and, after the float64 run, its state stayed
    float64 ("mat1 and mat2 must have the same dtype"): a correct candidate was judged
    incorrect or runtime_error by the harness. A forward pre-hook puts the attributes it
    reassigned back (the same tensor objects: a reassignment costs nothing on the device,
    so timed calls are not slowed); each call is then judged from the constructed state,
    for the reference and the candidate alike. In-place writes to such a tensor are not
    undone (a candidate cannot make them: the static policy forbids writing state outside
    ``__init__``)."""
    held = [(mod, name, val) for mod in model.modules() for name, val in list(vars(mod).items())
            if isinstance(val, torch.Tensor)]
    if not held:
        return
    moved = _STATE_MOVED.setdefault(model, set())

    def restore(_module: torch.nn.Module, _args: Any) -> None:
        for mod, name, val in held:
            if mod.__dict__.get(name) is not val:
                mod.__dict__[name] = val
                moved.add(name)

    model.register_forward_pre_hook(restore)


def state_reassigned(model: torch.nn.Module) -> list[str]:
    """The plain tensor attributes ``model``'s forward reassigned (put back before each call)."""
    return sorted(_STATE_MOVED.get(model, ()))


def forward_seed(seed: int) -> int:
    """The seed every forward call of a job starts from (``seed_forward``): derived from the
    job's seed, so that a reference output cached for that seed was drawn like the one a
    later job of the seed would draw; a candidate reading ``torch.initial_seed()`` in its
    forward learns nothing of the seed its inputs were made from."""
    digest = hashlib.sha256(f"forward {seed}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def seed_forward(seed: int) -> None:
    """Seed torch's generators (the host's and every device's) right before a forward call.

    The reference, the candidate and the reference's float64 re-run each start from the
    same generator state: a training-mode dropout (or any other draw) that they make with
    the same calls in the same order draws the same numbers, and its outputs are compared
    like deterministic ones. Unseeded, each call drew another mask: eager and its float64
    run disagreed at ~all outputs after a dropout, which made the float64 error budget
    (tolerance.py, rules 2 and 3) as wide as the outputs themselves."""
    torch.manual_seed(seed)


def generator_states(device: torch.device) -> tuple[bytes, ...]:
    """The host generator's state, and the device's where it has one: a forward call that
    changed them drew random numbers."""
    states = [torch.get_rng_state().numpy().tobytes()]
    if device.type == "cuda" and torch.cuda.is_initialized():
        states.append(torch.cuda.get_rng_state(device).numpy().tobytes())
    return tuple(states)


def seeded_call(model: torch.nn.Module, inputs: list[Any], seed: int, device: torch.device) -> tuple[Any, bool]:
    """``model(*inputs)`` from the generator state ``seed_forward(seed)`` sets, and whether
    the call drew random numbers (changed a generator's state)."""
    seed_forward(seed)
    before = generator_states(device)
    out = model(*inputs)
    return out, generator_states(device) != before


def copy_parameters(ref: torch.nn.Module, cand: torch.nn.Module) -> str:
    """Load the reference's weights into the candidate when names and shapes match.

    Synthesizers are told to create parameters in the same order as the reference, and
    the same seed before both constructors then yields equal weights. Copying makes equal
    weights robust to a candidate that creates an extra tensor or draws random numbers in
    a different order; when names/shapes differ we leave the seeded values alone.
    """
    ref_sd = ref.state_dict()
    cand_sd = cand.state_dict()
    if not ref_sd:
        return "no parameters"
    if set(ref_sd) != set(cand_sd):
        return "skipped: parameter names differ from the reference"
    if any(tuple(ref_sd[k].shape) != tuple(cand_sd[k].shape) for k in ref_sd):
        return "skipped: parameter shapes differ from the reference"
    with torch.no_grad():
        cand.load_state_dict(ref_sd)
    return "copied from the reference"
