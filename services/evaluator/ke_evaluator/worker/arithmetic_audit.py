"""Do the candidate's own Triton kernels do part of the operator's arithmetic?

A candidate that computes the operator in library calls (``torch.matmul``, ``F.conv2d``)
and pushes the result through a Triton kernel that only copies it launches its own
kernel, and its output depends on that kernel (suppressing a copy also breaks the
output), so neither the launch count nor the kernel-dependency probe catches it. This
audit looks at what each launch *writes*, against what it was given:

1. Every own launch of one forward runs for real, between a snapshot of its tensor
   arguments and a comparison after it. An argument that changed is written; so is one
   that loses NaN when the launch runs on copies with that argument alone NaN-filled (a
   write of the values it already held: 0 into zero pages, or stale memory holding this
   very result). The launch then runs once more on copies in which the written
   arguments are NaN-filled: the positions that lose the NaN are the positions it
   writes, and if the results agree the kernel never read those buffers (store-only:
   their old contents are not sources).
2. A write is a *move*, not arithmetic, when
   a. its values, sorted, equal the sorted values of one argument of the same size within
      ``NEAR_ULPS`` ulps of that argument's scale (a copy, a transpose/permutation/
      reshape, a dtype cast, and identity arithmetic such as ``x + 0.0``, ``x * 1.0``,
      ``tl.maximum(x, x)``), or it changed an argument in place by at most that much;
   b. or every value it writes occurs in its arguments (exact equality: slices, gathers,
      concatenations), unless the kernel's body selects by comparison (``tl.maximum``,
      ``tl.where``, ``tl.max``, ...: a max-pool writes only input values yet compares
      them), read from the kernel's source with its ``@triton.jit`` helpers.
   Otherwise it *computes*: it wrote values found in none of its arguments.
3. The forward runs again with every computing write replaced by random values at the
   positions it wrote (the launch itself still runs, so moves still happen). If the
   output is still correct, no computed value reaches it: a decoy computes while a copy
   of a library result is returned.

A candidate whose launches compute nothing, or whose computed values do not reach the
output, is rejected. Residual (README "Library calls"): arithmetic that moves a library
result by more than ``NEAR_ULPS`` ulps but stays within the tolerance and the float64
error budget (a deliberate ``x * 1.00001``) passes; the error budget bounds what it can
change. Worker side: torch only.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import inspect
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

# a write within this many ulps (of the dtype, times the source's largest magnitude) of
# a source is a move: covers +0.0, *1.0, casts and FMA contraction; an honest epilogue
# with default-initialised BatchNorm (x * 0.999995, ~42 fp32 ulps) still computes
NEAR_ULPS = 8
# Triton calls that select by comparing loaded values (their outputs are input values)
SELECTION_CALLS = frozenset({"maximum", "minimum", "max", "min", "argmax", "argmin", "where", "clamp", "sort",
                             "topk", "cummax", "cummin"})


@dataclass
class Write:
    arg: int  # position among the launch's tensor arguments
    mask: torch.Tensor  # bool, the argument's shape: the positions written
    computes: bool
    why: str
    fill: torch.Tensor | None = None  # random replacement used by the counterfactual pass


@dataclass
class LaunchAudit:
    kernel: str
    writes: list[Write] = field(default_factory=list)
    captured: bool = False  # launched inside a CUDA graph capture: not analysed
    # memory reached through an argument that is neither a tensor nor a descriptor dataclass
    # over one: reruns on copies would write the real memory, so it is not analysed, and
    # it is no evidence of arithmetic (else any such launch would excuse a copy kernel)
    opaque: bool = False

    @property
    def computes(self) -> bool:
        return any(w.computes for w in self.writes)

    def describe(self) -> str:
        if self.opaque:
            return f"{self.kernel}: not analysed (memory passed other than as a tensor or a tensor descriptor)"
        if self.captured:
            return f"{self.kernel}: inside a graph capture"
        if not self.writes:
            return f"{self.kernel}: writes nothing new"
        return f"{self.kernel}: " + "; ".join(w.why for w in self.writes)


@dataclass
class ArithmeticAudit:
    """State of one audit pass (``plan is None``) or one counterfactual pass."""

    launches: list[LaunchAudit] = field(default_factory=list)
    plan: list[LaunchAudit] | None = None
    position: int = 0
    # storage spans of the forward's inputs and the module's parameters and buffers: a
    # kernel rewriting them with the values they hold changes nothing, so no rerun asks
    # (the reruns cost a launch each; in the CPU interpreter they dominated the audit)
    protected: list[tuple[int, int]] = field(default_factory=list)

    def _is_protected(self, t: torch.Tensor) -> bool:
        st = t.untyped_storage()
        lo, hi = st.data_ptr(), st.data_ptr() + st.nbytes()
        return any(lo < p_hi and p_lo < hi for p_lo, p_hi in self.protected)

    @classmethod
    def counterfactual(cls, launches: list[LaunchAudit]) -> ArithmeticAudit:
        """A pass that replaces what the audited launches computed. A launch recorded into a
        CUDA graph was not analysed: it takes the writes of its counterpart in the eager run
        just before the capture (the emitted replay runs the forward once, then captures it)."""
        plan = list(launches)
        i = 0
        while i < len(plan):
            if not plan[i].captured:
                i += 1
                continue
            j = i
            while j < len(plan) and plan[j].captured:
                j += 1
            m = j - i
            before = plan[i - m:i] if i >= m else []
            if before and all(not b.captured and b.kernel == c.kernel for b, c in zip(before, plan[i:j], strict=True)):
                for k, b in enumerate(before):
                    plan[i + k] = LaunchAudit(b.kernel, b.writes, captured=True)
            i = j
        return cls(plan=plan)

    def computing(self) -> list[LaunchAudit]:
        return [la for la in self.launches if la.computes]

    def on_launch(self, fn_obj: Any, orig: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                  name: str, capturing: bool) -> Any:
        if self.plan is not None:
            result = orig(fn_obj, *args, **kwargs)
            if self.position < len(self.plan):
                _replace_computed(self.plan[self.position], _tensor_args(args, kwargs))
            self.position += 1
            return result
        if capturing:  # no clone, sync or comparison is allowed inside a capture
            self.launches.append(LaunchAudit(name, captured=True))
            return orig(fn_obj, *args, **kwargs)
        if any(_opaque(a) for a in list(args) + list(kwargs.values())):
            self.launches.append(LaunchAudit(name, opaque=True))
            return orig(fn_obj, *args, **kwargs)
        tensors = _tensor_args(args, kwargs)
        pre = [_storage_clone(t) for t in tensors]
        result = orig(fn_obj, *args, **kwargs)
        _sync(tensors)
        changed = [i for i, t in enumerate(tensors) if not _bits_equal(t, pre[i])]
        # an argument can be written with the values it already held (zero pages, or stale
        # memory that still holds this very result): one run per such argument, on copies
        # with that argument alone NaN-filled, shows whether the kernel writes it
        for i, t in enumerate(tensors):
            if i not in changed and _prefillable(t) and t.numel() and not self._is_protected(t):
                probe = [_storage_clone(p) for p in pre]
                _prefill(probe[i])
                orig(fn_obj, *_substitute(args, tensors, probe), **_substitute_kw(kwargs, tensors, probe))
                _sync(probe)
                if bool((~_still_prefilled(probe[i])).any()):
                    changed.append(i)
        audit = LaunchAudit(name)
        self.launches.append(audit)
        if not changed:
            return result
        probe = [_storage_clone(p) for p in pre]
        for i in changed:
            _prefill(probe[i])
        orig(fn_obj, *_substitute(args, tensors, probe), **_substitute_kw(kwargs, tensors, probe))
        _sync(probe)
        store_only = all(_agrees_where_written(tensors[i], pre[i], probe[i]) for i in changed)
        selects = kernel_selects(getattr(fn_obj, "fn", None))
        for i in changed:
            t = tensors[i]
            if store_only and _prefillable(t):
                mask = ~_still_prefilled(probe[i])
                sources = [(j, pre[j]) for j in range(len(tensors)) if j not in changed or not _prefillable(tensors[j])]
                in_place = None
            else:
                mask = ~_bits_equal_elementwise(t, pre[i])
                sources = list(enumerate(pre))
                in_place = pre[i]
            computes, why = _classify(t, mask, sources, in_place, selects, i)
            audit.writes.append(Write(i, mask, computes, why, random_fill(t) if computes else None))
        return result


def _classify(t: torch.Tensor, mask: torch.Tensor, sources: list[tuple[int, torch.Tensor]],
              in_place: torch.Tensor | None, selects: bool, arg: int) -> tuple[bool, str]:
    written = t[mask]
    n = written.numel()
    if n == 0:
        return False, f"argument #{arg}: nothing written"
    if in_place is not None and _near(written, in_place[mask]):
        return False, f"argument #{arg}: changed in place by at most {NEAR_ULPS} ulps (identity arithmetic)"
    for j, s in sources:
        if j != arg and s.numel() == n and _near(torch.sort(written.flatten()).values,
                                                 torch.sort(s.to(t.dtype).flatten()).values):
            return False, (f"argument #{arg}: its {n} values are those of argument #{j} (a copy, permutation, "
                           f"reshape or cast, within {NEAR_ULPS} ulps)")
    pool = [s.to(t.dtype).flatten() for j, s in sources if j != arg and s.numel()]
    if in_place is not None:
        pool.append(in_place.flatten())
    new = written.flatten()
    if t.is_floating_point():
        new = new[~torch.isnan(new)]
    fresh = int((~torch.isin(new, torch.cat(pool))).sum()) if pool and new.numel() else new.numel()
    if fresh == 0 and not selects:
        return False, f"argument #{arg}: every value it writes is one of its inputs' values (a gather or copy)"
    if fresh == 0:
        return True, f"argument #{arg}: selects among its inputs' values by comparison"
    return True, f"argument #{arg}: {fresh} of {n} written values are new"


def _near(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape:
        return False
    if not a.is_floating_point():
        return bool(torch.equal(a, b))
    a64, b64 = a.double(), b.double()
    nan_a, nan_b = torch.isnan(a64), torch.isnan(b64)
    if not torch.equal(nan_a, nan_b):
        return False
    ok = ~nan_a
    if not bool(ok.any()):
        return True
    a64, b64 = a64[ok], b64[ok]
    scale = float(b64.abs().max())
    if not torch.isfinite(torch.tensor(scale)):
        return bool(torch.equal(a64, b64))
    tol = NEAR_ULPS * torch.finfo(a.dtype).eps * scale
    return bool(((a64 - b64).abs() <= tol).all())


def _replace_computed(planned: LaunchAudit, tensors: list[torch.Tensor]) -> None:
    """Counterfactual: the values a computing write produced become random values."""
    for w in planned.writes:
        if not w.computes or w.arg >= len(tensors):
            continue
        t = tensors[w.arg]
        if w.mask.shape != t.shape:
            continue
        with torch.no_grad():
            # torch.where + copy_ (no boolean indexing): no host sync, so a graph capture
            # records the replacement too
            t.copy_(torch.where(w.mask, _fill_like(t, w), t))


def _fill_like(t: torch.Tensor, w: Write) -> torch.Tensor:
    if w.fill is None or w.fill.shape != t.shape or w.fill.device != t.device:
        w.fill = random_fill(t)
    return w.fill


def random_fill(t: torch.Tensor) -> torch.Tensor:
    """Values unrelated to what ``t`` holds (drawn outside any graph capture)."""
    if t.is_floating_point():
        gen = torch.Generator(device="cpu").manual_seed(7)
        return torch.randn(t.shape, generator=gen, dtype=torch.float32).to(t.device, t.dtype)
    # integers may be indices read by a later kernel: their own values, shifted by one
    # position, stay in range where any other replacement could address out of bounds
    return t.detach().flatten().roll(1).reshape(t.shape).clone()


# -- tensors -------------------------------------------------------------------------------
def _tensor_of(a: Any) -> torch.Tensor | None:
    """The memory a launch argument hands the kernel: a tensor, or the ``base`` tensor of a
    descriptor dataclass (``triton.tools.tensor_descriptor.TensorDescriptor``)."""
    if isinstance(a, torch.Tensor):
        return a
    base = getattr(a, "base", None)
    return base if dataclasses.is_dataclass(a) and isinstance(base, torch.Tensor) else None


def _opaque(a: Any) -> bool:
    """Reaches memory other than through ``_tensor_of`` (an object with ``data_ptr``)."""
    return _tensor_of(a) is None and not isinstance(a, (int, float, bool, str, type(None))) \
        and (callable(getattr(a, "data_ptr", None)) or isinstance(getattr(a, "base", None), torch.Tensor))


def _tensor_args(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[torch.Tensor]:
    """The launch's tensors, each once (a tensor passed twice is one buffer)."""
    out: list[torch.Tensor] = []
    for a in list(args) + list(kwargs.values()):
        t = _tensor_of(a)
        if t is not None and all(u is not t for u in out):
            out.append(t)
    return out


def _swap(a: Any, tensors: list[torch.Tensor], by: list[torch.Tensor]) -> Any:
    t = _tensor_of(a)
    if t is None:
        return a
    k = next(i for i, u in enumerate(tensors) if u is t)
    return by[k] if isinstance(a, torch.Tensor) else dataclasses.replace(a, base=by[k])


def _substitute(args: tuple[Any, ...], tensors: list[torch.Tensor], by: list[torch.Tensor]) -> tuple[Any, ...]:
    return tuple(_swap(a, tensors, by) for a in args)


def _substitute_kw(kwargs: dict[str, Any], tensors: list[torch.Tensor], by: list[torch.Tensor]) -> dict[str, Any]:
    return {k: _swap(a, tensors, by) for k, a in kwargs.items()}


def _storage_clone(t: torch.Tensor) -> torch.Tensor:
    """A copy of ``t``'s whole storage viewed with ``t``'s shape, strides and offset: a kernel
    given it with the original strides (passed as integers) stays inside it."""
    n = t.untyped_storage().nbytes() // t.element_size()
    flat = torch.empty(0, dtype=t.dtype, device=t.device)
    flat.set_(t.untyped_storage(), 0, (n,), (1,))
    return flat.clone().as_strided(t.shape, t.stride(), t.storage_offset())


def _sync(tensors: list[torch.Tensor]) -> None:
    if any(t.is_cuda for t in tensors):
        torch.cuda.synchronize()


def _bits(t: torch.Tensor) -> torch.Tensor:
    if t.dtype == torch.bool:
        return t
    view = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}.get(t.element_size())
    return t.view(view) if view is not None and t.is_floating_point() else t


def _bits_equal_elementwise(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return _bits(a) == _bits(b)


def _bits_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    return bool(_bits_equal_elementwise(a, b).all()) if a.numel() else True


def _prefillable(t: torch.Tensor) -> bool:
    return t.is_floating_point() or (t.dtype != torch.bool and not t.is_complex())


def _prefill(t: torch.Tensor) -> None:
    with torch.no_grad():
        if t.is_floating_point():
            t.fill_(float("nan"))
        elif _prefillable(t):
            t.fill_(torch.iinfo(t.dtype).min)


def _still_prefilled(t: torch.Tensor) -> torch.Tensor:
    if t.is_floating_point():
        return torch.isnan(t)
    if _prefillable(t):
        return t == torch.iinfo(t.dtype).min
    return torch.zeros(t.shape, dtype=torch.bool, device=t.device)


def _agrees_where_written(real: torch.Tensor, pre: torch.Tensor, probe: torch.Tensor) -> bool:
    """The pre-filled run wrote what the real run wrote, everywhere the real run changed
    something: the kernel did not read the buffer."""
    if not _prefillable(real):
        return False
    written = ~_still_prefilled(probe)
    if bool((~_bits_equal_elementwise(real, pre) & ~written).any()):
        return False  # a position the real run changed kept its NaN: the kernel read it
    a, b = real[written], probe[written]
    if not a.is_floating_point():
        return bool(torch.equal(a, b))
    return bool(torch.allclose(a.double(), b.double(), rtol=1e-5, atol=1e-8, equal_nan=True))


# -- the kernel's source -------------------------------------------------------------------
def kernel_selects(fn: Any, depth: int = 0) -> bool:
    """Whether a Triton kernel's body (or a ``@triton.jit`` helper it calls) selects by
    comparison. Unknown (no source, a call we cannot resolve) counts as selecting: the
    exemption then applies, the other tests still do."""
    if fn is None or depth > 4:
        return True
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return True
    scope = getattr(fn, "__globals__", {})
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
        if name is None:
            return True
        if name in SELECTION_CALLS:
            return True
        if isinstance(f, ast.Name) and not hasattr(builtins, name):
            target = scope.get(name)
            inner = getattr(target, "fn", None)
            if inner is not None and kernel_selects(inner, depth + 1):
                return True
    return False
