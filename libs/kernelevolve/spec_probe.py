"""The torch half of ``kernelevolve.spec_shrink``. The CLI runs it in a child interpreter
(``python -m kernelevolve.spec_probe``); the offline synthesizer's capture imports it
in-process, where it already executes the spec's code (no new trust boundary).

A spec is measured on the meta device (nothing allocated: a 4 GiB ``torch.randn`` costs
nothing there), so its real size is known before anything runs at it.
"""

from __future__ import annotations

import inspect
import json
import os
import sys
import threading
import types
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from kernelevolve.errors import InvalidSpecError
from kernelevolve.spec import hanging_import
from kernelevolve.spec_shrink import (
    BUDGET_SETTINGS,
    CPU_SUFFIX,
    INPUTS_SUFFIX,
    InputShape,
    ShrinkBudget,
    SizeConstant,
    SpecShrinkError,
    declares_cpu_inputs,
    rewrite,
    size_constants,
)

# Halvings at most (a 2**40-element spec needs about 30).
MAX_STEPS = 200


@dataclass
class Measure:
    inputs: list[InputShape]
    input_bytes: int
    param_bytes: int
    flops: float
    # the forward's aten ops in call order and the parameter shapes after it (``graph``)
    ops: list[str] = field(default_factory=list)
    params: list[list[int]] = field(default_factory=list)

    def cost(self, budget: ShrinkBudget) -> float:
        """How many times over budget the spec is, by its worst measure (<= 1: it fits)."""
        return max(self.input_bytes / budget.input_bytes, self.param_bytes / budget.param_bytes,
                   self.flops / budget.flops)


# Set once a spec's module-level code has run to its end in this process (``main``'s watchdog).
_imported = threading.Event()


def _load(source: str) -> types.ModuleType:
    mod = types.ModuleType("spec_under_probe")
    mod.__dict__["__file__"] = "<spec>"
    exec(compile(source, "<spec>", "exec"), mod.__dict__)  # noqa: S102 - the spec's code, as capture runs it
    _imported.set()
    return mod


def _watch_import(seconds: float) -> None:
    """End the process with a spec error when the spec's first import does not return within
    ``seconds``: its module-level code hangs (a thread, since a C-level wait ignores signals)."""
    if _imported.wait(seconds):
        return
    sys.stdout.write("\n" + json.dumps({"error": hanging_import(seconds), "kind": "spec"}) + "\n")
    sys.stdout.flush()
    os._exit(0)


def _arg_names(model_cls: type, n: int) -> list[str]:
    try:
        params = list(inspect.signature(model_cls.forward).parameters)[1:]  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        params = []
    names = [p for p in params if p not in ("args", "kwargs")]
    return [names[i] if i < len(names) else f"input{i}" for i in range(n)]


def _describe(model_cls: type, xs: list[Any]) -> list[InputShape]:
    return [InputShape(name, list(x.shape), str(x.dtype).removeprefix("torch.")) if isinstance(x, torch.Tensor)
            else InputShape(name, None, type(x).__name__) for name, x in zip(_arg_names(model_cls, len(xs)), xs,
                                                                               strict=True)]


class _Ops(TorchDispatchMode):
    """The aten ops a forward dispatches, in order (the graph it would trace)."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.names.append(str(func.overloadpacket))
        return func(*args, **(kwargs or {}))


def measure(source: str, forward: bool = True, trace: bool = False) -> Measure:
    """Inputs, parameters and (``forward``) forward FLOPs of the spec, all on the meta
    device. Raises (anything) when the spec does not build or its forward fails at these
    sizes. Without ``forward`` the FLOPs read 0: a recurrent model's forward on meta tensors
    still steps through time in Python (18 s for 512 steps of a 4-layer bidirectional
    LSTM), so the cheap measure comes first."""
    flops = 0.0
    with torch.device("meta"):
        mod = _load(source)
        torch.manual_seed(0)
        init = list(mod.get_init_inputs())
        model = mod.Model(*init)
        xs = list(mod.get_inputs())
        ops = _Ops()
        if forward:
            # The op trace only where a shrink compares graphs: on a recurrent model's
            # time loop every recorded op costs again.
            with torch.no_grad(), FlopCounterMode(display=False) as counter, ops if trace else nullcontext():
                model(*xs)
            flops = float(counter.get_total_flops())
    tensors = [x for x in xs if isinstance(x, torch.Tensor)]
    return Measure(inputs=_describe(mod.Model, xs),
                   input_bytes=sum(x.numel() * x.element_size() for x in tensors),
                   param_bytes=sum(p.numel() * p.element_size() for p in model.parameters())
                   + sum(b.numel() * b.element_size() for b in model.buffers()),
                   flops=flops, ops=ops.names, params=[list(p.shape) for p in model.parameters()])


def run_reference(source: str) -> None:
    """The reference forward once, for real, on the CPU (the shrunk spec must still run)."""
    mod = _load(source)
    torch.manual_seed(0)
    model = mod.Model(*mod.get_init_inputs())
    with torch.no_grad():
        model(*mod.get_inputs())


def _shrink(source: str, start: Measure, budget: ShrinkBudget) -> tuple[str, dict[str, list[int]], Measure]:
    """Halve size constants until the spec fits: first by bytes alone (cheap measures),
    then, with the forward run at every step, by FLOPs too."""
    constants = size_constants(source)
    if not constants:
        raise SpecShrinkError(
            f"the spec is too large for the CPU interpreter ({_sizes(start)}) and declares no get_cpu_inputs() "
            "nor module-level integer size constants to shrink; run it on a GPU, or add get_cpu_inputs() "
            "(and get_cpu_init_inputs()) with small shapes")
    values = {c.name: c.value for c in constants}
    frozen: set[str] = set()
    current = start
    if start.flops == 0.0:  # bytes alone first: cheap at any size
        _halve_until(source, constants, values, frozen, start, budget, forward=False)
        try:
            current = measure(rewrite(source, constants, values))
        except Exception:  # noqa: BLE001 - a halving broke the forward: redo, checking it at every step
            values, frozen = {c.name: c.value for c in constants}, set()
            current = measure(source)
    current = _halve_until(source, constants, values, frozen, current, budget, forward=True)
    changed = {c.name: [c.value, values[c.name]] for c in constants if values[c.name] != c.value}
    return rewrite(source, constants, values), changed, current


def _halve_until(source: str, constants: list[SizeConstant], values: dict[str, int], frozen: set[str],
                 current: Measure, budget: ShrinkBudget, forward: bool) -> Measure:
    for _ in range(MAX_STEPS):
        if current.cost(budget) <= 1.0:
            return current
        step = _best_halving(source, constants, values, frozen, current, budget, forward)
        if step is None:
            raise SpecShrinkError(
                f"the spec is too large for the CPU interpreter ({_sizes(current)} after shrinking "
                f"{_changes(constants, values) or 'nothing'}) and halving none of its size constants "
                f"({', '.join(c.name for c in constants)}) makes it smaller and keeps its reference running; "
                "add get_cpu_inputs() (and get_cpu_init_inputs()) with small shapes")
        name, current = step
        values[name] //= 2
    raise SpecShrinkError(f"the spec did not fit the CPU interpreter after {MAX_STEPS} halvings")


def _best_halving(source: str, constants: list[SizeConstant], values: dict[str, int], frozen: set[str],
                  current: Measure, budget: ShrinkBudget, forward: bool) -> tuple[str, Measure] | None:
    """The largest constant whose halving lowers the cost, with its measure; constants whose
    halving breaks the spec are frozen at their value. Largest first keeps the shapes
    balanced: picking the steepest drop instead shrank a transposed conv's 64x64 maps to
    1x1 (one constant is both H and W) while its batch stayed at 2,048, and it measured
    every constant at every step (8 minutes for a 1,024-step GRU on meta tensors)."""
    order = sorted((c for c in constants if c.name not in frozen and values[c.name] >= 2),
                   key=lambda c: -values[c.name])
    for c in order:
        trial = dict(values, **{c.name: values[c.name] // 2})
        try:
            m = measure(rewrite(source, constants, trial), forward=forward)
        except Exception:  # noqa: BLE001 - e.g. a size that must stay divisible: keep it
            frozen.add(c.name)
            continue
        if m.cost(budget) < current.cost(budget):
            return c.name, m
    return None


def _shrink_inputs(source: str, start: Measure, budget: ShrinkBudget) -> tuple[str, dict[str, list[int]], Measure]:
    """Halve the inputs' dimension sizes (batch, spatial, sequence: every size of 4 or more
    found in an input's shape, mapped wherever the spec's get_inputs() makes a tensor of it,
    ``INPUTS_SUFFIX``) until the spec fits. A halving is kept only when the forward, traced
    on meta tensors at the smaller shapes, dispatches the same aten ops in the same order
    and ends with the same parameter shapes as at the spec's own: the model judged is the
    spec's (a Linear after a flatten whose width follows the image size refuses a spatial
    halving). Largest size first, as ``_best_halving``."""
    sizes = sorted({d for i in start.inputs if i.shape for d in i.shape if d >= 4}, reverse=True)
    plan: dict[int, int] = {}
    frozen: set[int] = set()
    current = start

    def variant(p: dict[int, int]) -> str:
        return source + INPUTS_SUFFIX.format(sizes={k: v for k, v in p.items() if k != v})

    for _ in range(MAX_STEPS):
        if current.cost(budget) <= 1.0:
            changed = {f"size {k}": [k, v] for k, v in plan.items() if k != v}
            return variant(plan), changed, current
        step = None
        for size in sorted((s for s in sizes if s not in frozen and plan.get(s, s) >= 2),
                           key=lambda s: -(plan.get(s) or s)):
            trial = {**plan, size: plan.get(size, size) // 2}
            try:
                m = measure(variant(trial), trace=True)
            except Exception:  # noqa: BLE001 - the forward breaks at that size: keep it
                frozen.add(size)
                continue
            if (m.ops, m.params) != (start.ops, start.params):
                frozen.add(size)  # another graph: not the spec's model any more
                continue
            if m.cost(budget) < current.cost(budget):
                step = size, m
                break
        if step is None:
            kept = ", ".join(f"{k} -> {v}" for k, v in plan.items() if k != v) or "nothing"
            raise SpecShrinkError(
                f"the spec is too large for the CPU interpreter ({_sizes(current)} after shrinking input sizes "
                f"{kept}; limits {budget.flops / 1e9:.3g} GFLOP per forward, {budget.input_bytes / 2**20:.3g} MiB "
                f"of inputs: {BUDGET_SETTINGS}) and no smaller batch, spatial or sequence size keeps its graph "
                "(same ops, same parameter shapes); run it on a GPU, raise those settings, or add get_cpu_inputs()")
        plan[step[0]] = plan.get(step[0], step[0]) // 2
        current = step[1]
    raise SpecShrinkError(f"the spec did not fit the CPU interpreter after {MAX_STEPS} halvings")


def _sizes(m: Measure) -> str:
    text = (f"inputs {', '.join(f'{i.name} {i.shape}' for i in m.inputs if i.shape is not None)}: "
            f"{m.input_bytes / 2**30:.3g} GiB, {m.param_bytes / 2**20:.3g} MiB of parameters")
    return text + (f", {m.flops / 1e9:.3g} GFLOP per forward" if m.flops else "")


def _changes(constants: list[SizeConstant], values: dict[str, int]) -> str:
    return ", ".join(f"{c.name} {c.value} -> {values[c.name]}" for c in constants if values[c.name] != c.value)


def fit(source: str, budget: ShrinkBudget) -> dict[str, Any]:
    """The child's answer for ``spec_shrink.fit_for_interpreter`` (a plain dict)."""
    try:
        start = measure(source, forward=False)
        if start.cost(budget) <= 1.0:  # small enough to run the forward on meta tensors too
            start = measure(source)
    except Exception as exc:  # noqa: BLE001 - the spec's own failure, reported as such
        raise InvalidSpecError(f"the spec could not be sized on the meta device: {type(exc).__name__}: "
                               f"{str(exc)[:300]}") from exc
    changed: dict[str, list[int]] = {}
    if start.cost(budget) <= 1.0:
        method, out, now = "as_is", source, start
    elif declares_cpu_inputs(source):
        method, out = "get_cpu_inputs", source + CPU_SUFFIX
        now = measure(out)
    else:
        try:
            method = "constants"
            out, changed, now = _shrink(source, start, budget)
        except SpecShrinkError:
            # No constants, or none whose halving fits: the inputs' own sizes, the graph kept.
            method = "inputs"
            start = measure(source, trace=True)
            out, changed, now = _shrink_inputs(source, start, budget)
    if method != "as_is":
        try:
            run_reference(out)
        except Exception as exc:  # noqa: BLE001
            raise SpecShrinkError(f"the reference does not run at the shrunk shapes ({_sizes(now)}): "
                                  f"{type(exc).__name__}: {str(exc)[:300]}") from exc
    return {"method": method, "source": out, "inputs": [asdict(i) for i in now.inputs],
            "original_inputs": [asdict(i) for i in start.inputs], "changed": changed,
            "input_bytes": now.input_bytes, "original_input_bytes": start.input_bytes, "flops": now.flops}


def main() -> None:
    """Child of ``spec_shrink.FitProbe``: read {source, budget} from the JSON file named
    on the command line, print one JSON answer on the last line of stdout."""
    with open(sys.argv[1], encoding="utf-8") as f:
        request = json.load(f)
    threading.Thread(target=_watch_import, args=(float(request.get("import_timeout_s", 60.0)),), daemon=True,
                     name="ke-import-watch").start()
    try:
        answer = fit(request["source"], ShrinkBudget(**request["budget"]))
    except SpecShrinkError as exc:
        answer = {"error": str(exc), "kind": "shrink"}
    except InvalidSpecError as exc:
        answer = {"error": str(exc), "kind": "spec"}
    sys.stdout.write("\n" + json.dumps(answer) + "\n")


if __name__ == "__main__":
    main()
