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
   Otherwise it *computes*: it wrote values found in none of its arguments. A bool write
   that is no copy (2a, of an argument holding only 0 and 1) computes: comparison results
   (2b cannot tell them from a gather).
3. The forward runs again with every computing write replaced by random values at the
   positions it wrote (the launch itself still runs, so moves still happen). If the
   output is still correct, no computed value reaches it: a decoy computes while a copy
   of a library result is returned.

A candidate whose launches compute nothing, or whose computed values do not reach the
output, is rejected.

Economy (``Economy``, ``defenses.kernel_arithmetic``): step 1 costs a snapshot and two or
more reruns per launch, for every launch of a whole model (120 s of a U-Net's integrity
phase on an H100, bench/RESULTS.md). A first pass analyses launches in order only until
it has found ``Economy.computing`` computing launches (or one, once the analysed arguments
exceed ``Economy.budget_bytes``), replaces what each found launch computed right after it
ran (step 3, in the same forward; not later, when a move may have written a library result
over those positions) and runs the rest of the forward plainly (a found
launch after the first is analysed on the replacements; the first, the evidence that the
kernels compute at all, sees what the full audit sees). An output
that is then wrong shows computed values reaching it, and the audit passes. In every other
case (the output still correct: a decoy launched first, a computed value overwritten
later; the forward raising; no computing launch found) the full audit runs and decides,
so a rejection is always the full audit's; a first pass that found nothing computing and
so analysed every launch and replaced nothing is that full audit. A graph-replaying
candidate's replay ran plainly: its counterfactual is a step-3 pass of its own on the found
launches. What this can accept that the full audit would not: an output wrong with the
found launches' values replaced while later launches compute from the replacements, yet
correct with every computed value replaced; or a found launch after the first that
computes only on replaced values. Either needs kernels or code that test values for
being replacements (independent random values leave an output correct only through such a
test; arithmetic would carry them through), and a candidate that tests a computed value
against its own library result passes the full audit already: no new way in.

Memory: the snapshots of a launch's arguments are the audit's one full-size cost (one
copy of each argument, plus one more set for the NaN-filled reruns; on an accelerator a
large snapshot waits on the host). Everything else works piece by piece: over
``EXACT_ELEMENTS`` written elements, the tests of 2a run on chunks (a bitwise multiset
hash confirms a copy, counts at 4096 thresholds refute one: what a move would have to
satisfy), and 2b looks for a new value among a sample of the written values first;
only what neither decides (a near-copy off by a few ulps, a gather) is sorted, on the
host. Before, the sort and ``torch.isin`` of a 4 GiB output asked the device for 16 GiB
at once (H100, bench/RESULTS.md 2026-11-25). Residual (README "Library calls"): arithmetic that moves a library
result by more than ``NEAR_ULPS`` ulps but stays within the tolerance and the float64
error budget (a deliberate ``x * 1.00001``) passes; the error budget bounds what it can
change. Worker side: torch only.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import inspect
import math
import re
import secrets
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from .memory import HOST_SPILL_BYTES, copy_to
from .tolerance import chunks

# a write within this many ulps (of the dtype, times the source's largest magnitude) of
# a source is a move: covers +0.0, *1.0, casts and FMA contraction; an honest epilogue
# with default-initialised BatchNorm (x * 0.999995, ~42 fp32 ulps) still computes
NEAR_ULPS = 8
# Up to this many written elements the tests of 2a/2b sort and search in one piece on the
# tensors' device (tens of bytes an element for a moment); above it they go by chunks.
EXACT_ELEMENTS = 1 << 22
# Elements per chunk of the piecewise tests, and the written values sampled for a new one.
CHUNK = 1 << 21
SAMPLE = 1 << 16
# Thresholds of the count test (2a refuted): a move's sorted values are within the
# tolerance of the source's, so at every threshold its count below it is bounded by the
# source's count below the threshold plus the tolerance (and the other way round).
THRESHOLDS = 4096
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
    # A copy write: whether the argument whose values it holds is the forward's own data (an
    # input, parameter or buffer, or memory an earlier audited launch of the candidate
    # wrote), not a tensor some library call produced (None: not a copy)
    moves_own_data: bool | None = None


@dataclass(frozen=True)
class Economy:
    """When the audit pass may stop analysing (module docstring, "Economy"): once it has
    found ``computing`` computing launches, or one and has analysed ``budget_bytes`` of
    launch arguments (the storages it snapshots), the rest of the forward runs plainly."""

    # Two found launches make the replacement likelier to break an honest output than one
    # (either may be a side result); past 64 MiB of arguments (the size at which a snapshot
    # waits on the host, memory.HOST_SPILL_BYTES) one is enough, since a real-size launch
    # costs seconds to analyse. Measured in the interpreter, 2 of 22 launches of a shrunk
    # U-Net analysed: integrity phase 12.6 -> 3.1 s, a ResNet layer 2.9 -> 1.3 s (2 CPU
    # cores, bench/RESULTS.md 2026-11-25).
    computing: int = 2
    budget_bytes: int = HOST_SPILL_BYTES
    # Launches of the forward run plainly before any is analysed: the tail pass
    # (``defenses.kernel_arithmetic``) analyses only the last ``tail`` launches, the ones
    # nearest the output, when replacing the first ones left the output correct.
    start: int = 0
    tail: int = 4

    def enough(self, found: int, analysed_bytes: int) -> bool:
        return found >= 1 and (found >= self.computing or analysed_bytes >= self.budget_bytes)

    def skips(self, position: int, found: int, analysed_bytes: int) -> bool:
        """Whether the launch at ``position`` of the forward runs plainly."""
        return position < self.start or self.enough(found, analysed_bytes)


@dataclass
class LaunchAudit:
    kernel: str
    writes: list[Write] = field(default_factory=list)
    captured: bool = False  # launched inside a CUDA graph capture: not analysed
    # memory reached through an argument that is neither a tensor nor a descriptor dataclass
    # over one: reruns on copies would write the real memory, so it is not analysed, and
    # it is no evidence of arithmetic (else any such launch would excuse a copy kernel)
    opaque: bool = False
    # ran plainly: an economical pass had its evidence before this launch
    skipped: bool = False

    @property
    def computes(self) -> bool:
        return any(w.computes for w in self.writes)

    def describe(self) -> str:
        if self.opaque:
            return f"{self.kernel}: not analysed (memory passed other than as a tensor or a tensor descriptor)"
        if self.skipped:
            return f"{self.kernel}: not analysed (run plainly after the audit's evidence)"
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
    # None: every launch is analysed (the full audit)
    economy: Economy | None = None
    analysed_bytes: int = 0
    # storage spans the audited launches wrote (a later launch moving them moves our data)
    own_written: list[tuple[int, int]] = field(default_factory=list)
    replaced: bool = False  # an economical pass replaced computed values in its own forward

    @property
    def complete(self) -> bool:
        """Every launch that could be analysed was (no launch ran plainly)."""
        return not any(la.skipped for la in self.launches)

    def _is_protected(self, t: torch.Tensor) -> bool:
        st = t.untyped_storage()
        lo, hi = st.data_ptr(), st.data_ptr() + st.nbytes()
        return any(lo < p_hi and p_lo < hi for p_lo, p_hi in self.protected)

    def _is_own_data(self, t: torch.Tensor) -> bool:
        st = t.untyped_storage()
        lo, hi = st.data_ptr(), st.data_ptr() + st.nbytes()
        return self._is_protected(t) or any(lo < p_hi and p_lo < hi for p_lo, p_hi in self.own_written)

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
        if self.economy is not None and self.economy.skips(len(self.launches), len(self.computing()),
                                                           self.analysed_bytes):
            self.launches.append(LaunchAudit(name, skipped=True))
            return orig(fn_obj, *args, **kwargs)
        if any(_opaque(a) for a in list(args) + list(kwargs.values())):
            self.launches.append(LaunchAudit(name, opaque=True))
            return orig(fn_obj, *args, **kwargs)
        tensors = _tensor_args(args, kwargs)
        self.analysed_bytes += sum(t.untyped_storage().nbytes() for t in tensors)
        # The snapshots: on an accelerator a large one waits on the host (the reruns get
        # copies on the device, the comparisons read it in pieces).
        pre = [_storage_clone(t, _snapshot_device(t)) for t in tensors]
        result = orig(fn_obj, *args, **kwargs)
        _sync(tensors)
        changed = [i for i, t in enumerate(tensors) if not _bits_equal(t, pre[i])]
        # an argument can be written with the values it already held (zero pages, or stale
        # memory that still holds this very result): one run per such argument, on copies
        # with that argument alone NaN-filled, shows whether the kernel writes it
        for i, t in enumerate(tensors):
            if i not in changed and _prefillable(t) and t.numel() and not self._is_protected(t):
                probe = [_storage_clone(p, u.device) for p, u in zip(pre, tensors, strict=True)]
                _prefill(probe[i])
                orig(fn_obj, *_substitute(args, tensors, probe), **_substitute_kw(kwargs, tensors, probe))
                _sync(probe)
                if bool((~_still_prefilled(probe[i])).any()):
                    changed.append(i)
        audit = LaunchAudit(name)
        self.launches.append(audit)
        if not changed:
            return result
        probe = [_storage_clone(p, u.device) for p, u in zip(pre, tensors, strict=True)]
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
                mask = ~_bits_equal_elementwise(t, pre[i].to(t.device))
                sources = list(enumerate(pre))
                in_place = pre[i]
            computes, why = _classify(t, mask, sources, in_place, selects, i)
            # a large write's random replacement is drawn when the counterfactual first needs
            # it (in the eager run before any capture: a captured launch takes the writes of
            # its eager counterpart), not held through the audit pass
            small = t.numel() * t.element_size() < HOST_SPILL_BYTES
            copied = _COPY_OF.search(why) if not computes else None
            own = self._is_own_data(tensors[int(copied.group(1))]) if copied else None
            if not computes and copied is None and _GATHERED in why:
                # a gather: its values come from the launch's arguments of its dtype
                own = all(self._is_own_data(u) for j, u in enumerate(tensors)
                          if j not in changed and u.dtype == t.dtype and u.numel())
            audit.writes.append(Write(i, mask, computes, why, random_fill(t) if computes and small else None,
                                      moves_own_data=own))
        for i in changed:
            st = tensors[i].untyped_storage()
            self.own_written.append((st.data_ptr(), st.data_ptr() + st.nbytes()))
        if self.economy is not None and audit.computes:
            # the economical pass is its own counterfactual: what this launch computed is
            # replaced before anything reads it (a large replacement is not held: drawn again
            # if a later pass needs it), once the snapshots and rerun copies are let go
            del pre, probe, sources, in_place
            large = [w for w in audit.writes if w.fill is None]
            _replace_computed(audit, tensors)
            self.replaced = True
            for w in large:
                w.fill = None
        return result


# How ``_classify`` names a copy's source (``Write.moves_own_data`` reads it back).
_COPY_OF = re.compile(r"values are those of argument #(\d+)")
_GATHERED = "every value it writes is one of its inputs' values"


def _truth_values(s: torch.Tensor) -> bool:
    """``s`` could be a bool tensor held in another dtype (only 0 and 1): a bool write with
    its values is a cast of it. Any other argument cast to bool is "nonzero", which a
    comparison's result equals by chance (``a >= b`` of one element, all True)."""
    if s.dtype == torch.bool:
        return True
    return all(bool(((x == 0) | (x == 1)).all()) for _, (x,) in _chunks([s]))


# A bool write that is no copy of an argument (2a, the arguments cast to bool): comparison
# results. Test 2b says nothing about it (any argument holding both truth values "contains"
# every value it writes), and ``torch.isin`` refuses bool (every masked-mean candidate that
# wrote its mask ``m > 0.5`` failed with that error). Residual: a bool gather from a larger
# library-computed bool tensor counts as computing.
_BOOL_COMPUTES = "argument #{arg}: writes comparison results (bool values that copy no argument)"


def _classify(t: torch.Tensor, mask: torch.Tensor, sources: list[tuple[int, torch.Tensor]],
              in_place: torch.Tensor | None, selects: bool, arg: int) -> tuple[bool, str]:
    pool_elements = sum(s.numel() for j, s in sources if j != arg) + (in_place.numel() if in_place is not None else 0)
    if int(mask.sum()) > EXACT_ELEMENTS or pool_elements > EXACT_ELEMENTS:
        return _classify_large(t, mask, sources, in_place, selects, arg)
    sources = [(j, s.to(t.device)) for j, s in sources]
    in_place = in_place.to(t.device) if in_place is not None else None
    written = t[mask]
    n = written.numel()
    if n == 0:
        return False, f"argument #{arg}: nothing written"
    if in_place is not None and _near(written, in_place[mask]):
        return False, f"argument #{arg}: changed in place by at most {NEAR_ULPS} ulps (identity arithmetic)"
    for j, s in sources:
        if t.dtype == torch.bool and not _truth_values(s):
            continue
        if j != arg and s.numel() == n and _near(torch.sort(written.flatten()).values,
                                                 torch.sort(s.to(t.dtype).flatten()).values):
            return False, (f"argument #{arg}: its {n} values are those of argument #{j} (a copy, permutation, "
                           f"reshape or cast, within {NEAR_ULPS} ulps)")
    if t.dtype == torch.bool:
        return True, _BOOL_COMPUTES.format(arg=arg)
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


# -- the same tests, piece by piece (large writes) ---------------------------------------
def _written(t: torch.Tensor, mask: torch.Tensor) -> Any:
    """The written values of ``t`` (flat, row-major), one piece at a time."""
    for _, (x, m) in _chunks([t, mask]):
        yield x[m]


def _values(s: torch.Tensor, dtype: torch.dtype, dev: torch.device) -> Any:
    for _, (x,) in _chunks([s]):
        yield x.to(device=dev, dtype=dtype)


def _near_in_place(t: torch.Tensor, mask: torch.Tensor, before: torch.Tensor) -> bool:
    """``_near(t[mask], before[mask])`` in pieces: NaN where NaN was, and every written value
    within ``NEAR_ULPS`` ulps of the largest magnitude it replaced."""
    if not t.is_floating_point():
        return all(torch.equal(x[m], y[m]) for _, (x, y, m) in _chunks([t, before, mask]))
    scale = 0.0
    for _, (x, y, m) in _chunks([t, before, mask]):
        a, b = x[m], y[m]
        if not torch.equal(torch.isnan(a), torch.isnan(b)):
            return False
        ok = ~torch.isnan(b)
        if bool(ok.any()):
            scale = max(scale, float(b[ok].double().abs().max()))
    if not math.isfinite(scale):
        return all(torch.equal(x[m], y[m]) for _, (x, y, m) in _chunks([t, before, mask]))
    tol = NEAR_ULPS * torch.finfo(t.dtype).eps * scale
    for _, (x, y, m) in _chunks([t, before, mask]):
        a, b = x[m].double(), y[m].double()
        ok = ~torch.isnan(a)
        if not bool(((a[ok] - b[ok]).abs() <= tol).all()):
            return False
    return True


_MIX = 0x9E3779B97F4A7C15 - (1 << 64)  # odd 64-bit constant (as a signed int64)


def _multiset_hash(pieces: Any) -> tuple[int, int, int]:
    """(count, and two wrapping sums of mixed bit patterns): equal for two multisets of
    equal values (same bits), whatever their order."""
    n = h1 = h2 = 0
    for x in pieces:
        w = _bits(x).to(torch.int64) if x.dtype != torch.bool else x.to(torch.int64)
        m = w * _MIX
        m = torch.bitwise_xor(m, torch.bitwise_right_shift(m, 29))
        n += x.numel()
        h1 = (h1 + int(m.sum())) & ((1 << 64) - 1)
        h2 = (h2 + int((m * (m | 1)).sum())) & ((1 << 64) - 1)
    return n, h1, h2


def _scan(pieces: Any, at: torch.Tensor | None,
          dev: torch.device) -> tuple[torch.Tensor | None, int, float, float]:
    """One pass over the pieces: how many values lie below each of ``at`` (``[j]``: below
    ``at[j]``; None without ``at``), the NaN count, and the smallest and largest other value
    (inf, -inf when there is none)."""
    counts = torch.zeros(at.numel() + 1, dtype=torch.int64, device=dev) if at is not None else None
    nans, lo, hi = 0, math.inf, -math.inf
    for x in pieces:
        x = x.double()
        nan = torch.isnan(x)
        nans += int(nan.sum())
        x = x[~nan]
        if x.numel():
            lo, hi = min(lo, float(x.min())), max(hi, float(x.max()))
            if counts is not None and at is not None:
                counts += torch.bincount(torch.bucketize(x, at, right=False), minlength=at.numel() + 1)
    return (counts.cumsum(0)[:-1] if counts is not None else None), nans, lo, hi


def _counts_refute(written: Any, source: Any, dtype: torch.dtype, dev: torch.device) -> bool:
    """True when the written values cannot be within ``NEAR_ULPS`` ulps (of the source's
    scale) of the source's values after sorting both: their NaN counts, extremes or counts
    below one of ``THRESHOLDS`` thresholds disagree by more than the tolerance allows.
    Necessary conditions of ``_near(sort(a), sort(b))``, read in pieces; False: undecided."""
    _, nan_b, lo, hi = _scan(source(), None, dev)
    scale = max(abs(lo), abs(hi)) if hi >= lo else 0.0  # the largest magnitude
    if not math.isfinite(scale):
        return False  # an infinite source: only equality decides (the sort)
    tol = NEAR_ULPS * torch.finfo(dtype).eps * scale if dtype.is_floating_point else 0.0
    if hi < lo:
        edges = torch.zeros(1, dtype=torch.float64, device=dev)
    else:
        edges = torch.linspace(lo, hi, THRESHOLDS, dtype=torch.float64, device=dev)

    def below(pieces: Any, at: torch.Tensor) -> tuple[torch.Tensor, int, float, float]:
        counts, nans, a_lo, a_hi = _scan(pieces, at, dev)
        assert counts is not None
        return counts, nans, a_lo, a_hi

    wa, nan_a, a_lo, a_hi = below(written(), edges)
    if nan_a != nan_b:
        return True
    if math.isfinite(a_lo) != math.isfinite(lo):
        return True
    if math.isfinite(lo) and (abs(a_lo - lo) > tol or abs(a_hi - hi) > tol):
        return True
    wb_up = below(source(), edges + tol)[0]
    if bool((wa > wb_up).any()):
        return True
    wb = below(source(), edges)[0]
    wa_up = below(written(), edges + tol)[0]
    return bool((wb > wa_up).any())


def _host_near_sorted(written: Any, source: Any) -> bool:
    a = torch.cat([x.cpu() for x in written()])
    b = torch.cat([x.cpu() for x in source()])
    return _near(torch.sort(a).values, torch.sort(b).values)


def _new_in_sample(t: torch.Tensor, mask: torch.Tensor, pool: list[torch.Tensor]) -> int:
    """How many of the first ``SAMPLE`` written values (NaN aside) occur in none of the
    ``pool`` tensors (read in pieces)."""
    sample = next(iter(_written(t, mask)), t.new_empty(0))[:SAMPLE]
    if t.is_floating_point():
        sample = sample[~torch.isnan(sample)]
    if not sample.numel():
        return 0
    found = torch.zeros(sample.shape, dtype=torch.bool, device=sample.device)
    for s in pool:
        for x in _values(s, t.dtype, sample.device):
            found |= torch.isin(sample, x)
    return int((~found).sum())


def _count_new(t: torch.Tensor, mask: torch.Tensor, pool: list[torch.Tensor]) -> int:
    """How many written values (NaN aside) occur in none of the ``pool`` tensors: the
    distinct written values sorted once (on the device up to ``EXACT_ELEMENTS`` of them,
    else on the host), each pool piece looked up in them."""
    dev = t.device if int(mask.sum()) <= EXACT_ELEMENTS else torch.device("cpu")
    vals = torch.cat([x.to(dev) for x in _written(t, mask)])
    if vals.is_floating_point():
        vals = vals[~torch.isnan(vals)]
    if not vals.numel():
        return 0
    uniq, inverse = torch.unique(vals, sorted=True, return_inverse=True)
    found = torch.zeros(uniq.shape, dtype=torch.bool, device=dev)
    for s in pool:
        for x in _values(s, t.dtype, dev):
            at = torch.searchsorted(uniq, x).clamp_(max=uniq.numel() - 1)
            hit = uniq[at] == x
            found[at[hit]] = True
    return int((~found[inverse]).sum())


def _classify_large(t: torch.Tensor, mask: torch.Tensor, sources: list[tuple[int, torch.Tensor]],
                    in_place: torch.Tensor | None, selects: bool, arg: int) -> tuple[bool, str]:
    """``_classify`` for a large write, piece by piece (the module docstring, "Memory"):
    the same three tests, each decided without a full-size temporary where it can be."""
    n = int(mask.sum())
    dev = t.device
    if in_place is not None and _near_in_place(t, mask, in_place):
        return False, f"argument #{arg}: changed in place by at most {NEAR_ULPS} ulps (identity arithmetic)"

    def written() -> Any:
        return _written(t, mask)

    for j, s in sources:
        if j == arg or s.numel() != n or (t.dtype == torch.bool and not _truth_values(s)):
            continue

        def source(s: torch.Tensor = s) -> Any:
            return _values(s, t.dtype, dev)

        exact = _multiset_hash(written()) == _multiset_hash(source())
        if exact or (not _counts_refute(written, source, t.dtype, dev) and _host_near_sorted(written, source)):
            return False, (f"argument #{arg}: its {n} values are those of argument #{j} (a copy, permutation, "
                           f"reshape or cast, within {NEAR_ULPS} ulps)")
    if t.dtype == torch.bool:
        return True, _BOOL_COMPUTES.format(arg=arg)
    pool = [s for j, s in sources if j != arg and s.numel()]
    if in_place is not None:
        pool.append(in_place)
    new = _new_in_sample(t, mask, pool) if pool else n
    if new:
        return True, f"argument #{arg}: {new} of the first {min(n, SAMPLE)} written values are new"
    # Every sampled value occurs in the arguments: count exactly.
    fresh = _count_new(t, mask, pool)
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


def same_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    """``a`` holds ``b``'s values in some order (the test of 2a): within ``NEAR_ULPS`` ulps
    after sorting both, or, over ``EXACT_ELEMENTS``, bitwise equal as multisets (no sort of
    a full-size tensor)."""
    if a.numel() != b.numel() or a.dtype != b.dtype:
        return False
    if a.numel() > EXACT_ELEMENTS:
        return _multiset_hash(_values(a, a.dtype, a.device)) == _multiset_hash(_values(b, a.dtype, a.device))
    x, y = a.detach().flatten(), b.detach().flatten().to(a.device)
    return _near(torch.sort(x).values, torch.sort(y).values)


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
        # Drawn where ``t`` lives (on the host a 4 GiB output's normals cost seconds, 64 Mi of
        # them 0.4 s on 2 cores, and a copy over; a backend without a device generator still
        # draws them there), from a fresh secret seed: a fixed one (7, before) gave values a
        # candidate could recognise, and so tell the counterfactual's replacement from its own.
        seed = secrets.randbits(63)
        try:
            gen = torch.Generator(device=t.device).manual_seed(seed)
            values = torch.randn(t.shape, generator=gen, dtype=torch.float32, device=t.device)
        except RuntimeError:
            gen = torch.Generator(device="cpu").manual_seed(seed)
            values = torch.randn(t.shape, generator=gen, dtype=torch.float32)
        return values.to(t.device, t.dtype)
    if t.is_complex():
        return torch.randn(t.shape, dtype=t.dtype, device=t.device)
    if t.dtype == torch.bool:
        return ~t.detach()  # wrong everywhere: a random draw of one bit is right half the time
    # integers may be indices read by a later kernel: their own values, shifted by one
    # position, stay in range where any other replacement could address out of bounds. Where
    # the shift leaves a value as it was (a one-element output, equal neighbours: the argmax
    # of a single row was "still correct" with its index replaced), the value next to it
    # below (above, at 0), an index that is in range whenever the dimension has two entries.
    v = t.detach()
    rolled = v.flatten().roll(1).reshape(t.shape)
    return torch.where(rolled == v, torch.where(v > 0, v - 1, v + 1), rolled)


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


def _storage_clone(t: torch.Tensor, device: torch.device | None = None) -> torch.Tensor:
    """A copy of ``t``'s whole storage (on ``device``, default ``t``'s) viewed with ``t``'s
    shape, strides and offset: a kernel given it with the original strides (passed as
    integers) stays inside it."""
    n = t.untyped_storage().nbytes() // t.element_size()
    flat = torch.empty(0, dtype=t.dtype, device=t.device)
    flat.set_(t.untyped_storage(), 0, (n,), (1,))
    # memory.copy_to: a large snapshot to the host goes through the staging buffer (the
    # integrity stage of a 4 GiB operator took 17-30 s on an H100/H200, 2026-11-28).
    out = copy_to(flat, device if device is not None else t.device)
    return out.as_strided(t.shape, t.stride(), t.storage_offset())


def _snapshot_device(t: torch.Tensor) -> torch.device:
    if t.device.type != "cpu" and t.untyped_storage().nbytes() >= HOST_SPILL_BYTES:
        return torch.device("cpu")
    return t.device


def _sync(tensors: list[torch.Tensor]) -> None:
    if any(t.is_cuda for t in tensors):
        torch.cuda.synchronize()


def _bits(t: torch.Tensor) -> torch.Tensor:
    if t.dtype == torch.bool:
        return t.view(torch.uint8)  # the bytes: a prefill's 2 is no True
    view = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}.get(t.element_size())
    return t.view(view) if view is not None and t.is_floating_point() else t


def _bits_equal_elementwise(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return _bits(a) == _bits(b)


def _bits_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Same bits everywhere, compared in pieces (``b`` may wait on the host)."""
    if not a.numel():
        return True
    return all(bool(_bits_equal_elementwise(x, y).all()) for _, (x, y) in _chunks([a, b]))


def _prefillable(t: torch.Tensor) -> bool:
    return not t.is_complex()


# A bool's prefill: byte 2, which no store of a bool writes (0 or 1). Without one, a
# comparison kernel writing into memory that held its answer by chance (a one-element
# output: half the time) "wrote nothing new".
_BOOL_PREFILL = 2


def _prefill(t: torch.Tensor) -> None:
    with torch.no_grad():
        if t.is_floating_point():
            t.fill_(float("nan"))
        elif t.dtype == torch.bool:
            t.view(torch.uint8).fill_(_BOOL_PREFILL)
        elif _prefillable(t):
            t.fill_(torch.iinfo(t.dtype).min)


def _still_prefilled(t: torch.Tensor) -> torch.Tensor:
    if t.is_floating_point():
        return torch.isnan(t)
    if t.dtype == torch.bool:
        return t.view(torch.uint8) == _BOOL_PREFILL
    if _prefillable(t):
        return t == torch.iinfo(t.dtype).min
    return torch.zeros(t.shape, dtype=torch.bool, device=t.device)


def _agrees_where_written(real: torch.Tensor, pre: torch.Tensor, probe: torch.Tensor) -> bool:
    """The pre-filled run wrote what the real run wrote, everywhere the real run changed
    something: the kernel did not read the buffer."""
    if not _prefillable(real):
        return False
    for _, (r, p, q) in _chunks([real, pre, probe]):
        written = ~_still_prefilled(q)
        if bool((~_bits_equal_elementwise(r, p) & ~written).any()):
            return False  # a position the real run changed kept its NaN: the kernel read it
        a, b = r[written], q[written]
        if not a.is_floating_point():
            if not torch.equal(a, b):
                return False
        elif not torch.allclose(a.double(), b.double(), rtol=1e-5, atol=1e-8, equal_nan=True):
            return False
    return True


def _chunks(ts: list[torch.Tensor]) -> Any:
    """(offset, equal pieces of equally shaped tensors), each piece on the first tensor's
    device (a host-held snapshot's piece is copied there)."""
    dev = ts[0].device
    for off, pieces in chunks([t.detach() for t in ts], CHUNK):
        yield off, [x.to(dev) for x in pieces]


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
