"""How correctness is decided: the one tolerance policy of the evaluator.

This docstring is the policy's documentation (the service README summarises it).

Quantities, per output leaf, elementwise: ``c`` the candidate's output, ``r`` the eager
reference's output (same dtype, same precision flags: no TF32), ``r64`` the reference
re-run in float64 (model and inputs upcast; on the host when the device cannot).

1. **Agreement with eager** (every input set):
   ``|c - r| <= atol + rtol * |r|`` with (atol, rtol) by dtype: fp64 1e-7/1e-7, fp32
   1e-4/1e-4, fp16 and bf16 1e-2/1e-2, or the spec's ``KE_TOLERANCE``. Where
   ``|r| > atol / rtol`` the rtol term dominates, so the bound is *relative*: an output
   of magnitude 1e19 is judged against 1e-4 x 1e19, what fp32 (eps 1.2e-7) can still
   say about it, never against atol. The verdict names the regime ("relative at
   |ref| ~ 1e19" or "absolute").
   NaN must appear exactly where the reference has NaN, infinities must match (unless
   rule 4 says the reference's NaN or inf is no answer). Integer and bool outputs must be
   equal (indices, masks, comparison results: judged exactly, the bound says so). Complex
   outputs are judged as their real and imaginary parts (a float view with a trailing
   dimension of 2), each part by these rules.
2. **Elements outside that bound (outliers)** are not accepted by loosening the
   tolerance. An element outside bound 1 is accepted only when the reference's own fp32
   result is comparably wrong *there*:
   ``|c - r64| <= atol + rtol * |r64| + max(k * |r - r64|, L)``, with ``k`` the
   error-budget factor (``error_budget_factor``, default 10, or the spec's
   ``KE_ERROR_BUDGET``) applied to eager's own error at the element, and ``L`` (only when
   eager itself breaks the tolerance against float64 somewhere in this output: the
   tolerance cannot hold at that magnitude) eager's largest error within the element's
   block of ``LOCAL_BLOCK`` (256) consecutive row-major elements and the two
   neighbouring blocks, not multiplied: no worse than the reference's worst nearby.
   This is where a near tie (max/argmax of values equal to rounding),
   catastrophic cancellation, or a long recurrence evaluated in another order
   legitimately moves the candidate away from eager: eager is then far from the float64
   answer too. Why the neighbourhood: a chunked evaluation of ``h = 0.999 h + x`` over
   64 x 2048 values ~1e19 (a selective scan's state) put 300-385 elements outside bound 1,
   at places where eager, which breaks the tolerance against float64 at ~3000 elements
   itself, happened to be exact; its error overall was 0.93-1.06x eager's, and it
   passes (those elements needed at most 0.3 L). Why only when eager breaks the
   tolerance, and why L is not multiplied by k: eager's largest error in a block of
   mixed magnitudes (bf16 values up to 6 round by 0.03) would otherwise excuse a wrong
   small element (0.2 off at 0.4). A blocked cumsum whose carries lose digits that
   eager's sequential sum keeps (eager within the tolerance everywhere) fails. An
   outlier where eager is accurate (1 of 1024 outputs off by 0.3 % while eager's own
   error there is 1e-7) fails, and the reason
   names the flat and multi-dimensional index, the candidate's value, eager's value,
   the float64 value and both errors there. The float64 run happens only when needed (an
   element outside bound 1, or a set with a budget check below), so a set that matches
   eager costs nothing more.
3. **Error budget** (norm-level, trial 0, the first extra set and, with shared seeds,
   trial 1): ``max|c - r64| <= max(k * max|r - r64|, 64 ulp x output scale)``. Catches a
   precision downgrade (bf16 matmul) that a loose tolerance (``KE_TOLERANCE``) lets
   through. ``KE_ERROR_BUDGET = False`` turns 2, 3 and 4 off (the spec's tolerance is then
   the only bound; it must be explicit).
4. **NaN or inf of the reference that its float64 run has not.** Where eager is NaN or
   +/-inf and the float64 value (rounded to the output's dtype) is finite, eager's value is
   no answer: the candidate is held to the float64 value:
   ``|c - r64| <= atol + rtol * |r64| + L``, with rule 2's ``L`` (zero unless eager breaks
   the tolerance against float64 somewhere in the output; its NaN and inf count as no
   error) and no ``k`` term (eager's own error there is unbounded). Why ``L``: bf16
   rounding alone breaks the bare bound (rtol 1e-2 is ~2.5 ulp): over 3 x 1031 values of
   ``exp(x - max) * 3 + x``, eager itself was outside ``atol + rtol * |r64|`` at 0.08 % of
   its elements (up to 1.02x the bound) and a reordered candidate at 0.13 % (1.10x). A NaN
   or inf candidate there fails, eager's own inf included: NaN is also the harness's
   poison for fresh memory, so a NaN that float64 cannot explain is indistinguishable
   from an element nobody wrote, and an inf where the operator's value is finite is that
   value overflowed. Why the rule: on H100s (torch 2.11, cuDNN 9.19) a ConvTranspose2d
   with a 2^31-element output gave NaN at 4,195,062 elements of finite random inputs
   inside the judge (none when run alone on an idle card), and candidates were judged
   ``incorrect`` ("misses 4195062 NaN the reference has") for the library's defect; on an
   H200 (2026-11-28) the same spec's eager output had +/-inf where the candidate was
   finite, judged ``incorrect`` ("infinities differ from the reference"): the same
   defect, the same treatment. A float32 overflow
   inside the reference is judged the same way: a softmax written without the max
   subtraction gives inf / inf = NaN where float64 gives 1.0; the operator's value there
   is the float64 one, a fused kernel that never overflows computes it and passes, and a
   kernel that copies eager's overflow fails. Why not only NaN that a second eager call
   does not reproduce: both suspected causes of the H100 NaN (a defect at that size, or
   elements the library never wrote, read back from memory the harness NaN-poisoned or the
   first call left NaN) would likely reproduce in the same process, so that test would not
   have told that case apart. Eager NaN that float64 has too (0/0, log of a negative, NaN
   in the inputs), eager inf that float64 has too (a true overflow: the float64 value is
   beyond the dtype's range, or inf itself), and eager NaN or inf whose float64 value is
   otherwise not finite in the output's dtype must still be matched as in rule 1. A
   candidate inf where eager is finite fails as in rule 2 (unless the float64 value
   rounds to that inf). The candidate moves neither eager
   nor float64, so rule 4 admits only the float64 value: an all-NaN output still fails on
   the reference's finite elements, and wrong values at the NaN or inf elements fail the
   bound. The float64 run happens on every set whose reference has NaN or inf; without it
   (it failed, or ``KE_ERROR_BUDGET = False``) NaN and inf must match as in rule 1. The
   count is reported: in the bound, in a verdict warning ("the reference had N NaN or
   infinities its float64 run has not (a reference defect): judged against float64
   there") and in each set's figures.

Every verdict carries the figures (``Correctness``): the bound applied (``bound``), the
candidate's error against float64 (``candidate_error``), the reference's own
(``reference_error``), their ratio (``error_ratio``: 0.8 means the candidate is closer to
the exact answer than eager) and how many outliers rule 2 accepted (``outliers``); each
set's record also counts the elements rule 4 judged against float64, NaN and inf
(``reference_nan_defects``).

**Accumulation order and TF32.** Bound 1 leaves room for a different summation order
(fp32: rtol 1e-4 is ~800 ulp). Both models run with TF32 off (``global_state``); a spec
whose ``forward`` turns TF32 on itself gets eager's TF32 error in ``|r - r64|``, so rules
2 and 3 widen by exactly that: the policy needs no TF32 special case. A candidate that
uses TF32 (or bf16) against an fp32 reference that does not fails rule 3 unless the spec
declares the looser contract (``KE_TOLERANCE`` with ``KE_ERROR_BUDGET = False``).

**Randomness and batch statistics.** Training-mode dropout with p > 0 draws random
numbers: every forward call of a job starts from one generator state
(``loading.seed_forward``), so the candidate (the offline synthesizer keeps such dropout a
library call, in the reference's order) draws eager's mask, and the float64 reference
replays eager's draws (``random_replay``); the policy has no statistical comparison mode.
Both models run in training mode as built; batch-statistics norms (BatchNorm in
training) are deterministic functions of the batch and are compared like any output
(their running-stat update is a side effect, not an output).

**Memory.** Every comparison runs over chunks of ``CHUNK_ELEMENTS`` elements (flat views
of contiguous tensors, slices along the leading dimensions otherwise), with float64
temporaries of one chunk only, on the candidate's device, with one host sync per chunk: the
checker's own memory does not grow with the output (a 1 GiB fp32 output used to need
five 2 GiB float64 copies), except rule 2's block maxima: one float32 per 256 output
elements (4 MiB for a 1 GiB fp32 output). The reference and the float64 reference may
lie on the host (the harness keeps large ones there, ``worker/memory.py``): each chunk
of them is copied to the candidate's device for its comparison, so the device holds the
candidate's output and one chunk of each, never a full-size float64 tensor.

Worker side: torch only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from kernelevolve.ports.verdict import Correctness

from .output_checks import leaves

# dtype -> (atol, rtol). fp32 tight; half types have ~3 decimal digits.
DEFAULT_TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1e-4, 1e-4),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (1e-2, 1e-2),
}
# Minimum error budget as a multiple of the dtype's machine epsilon (times output scale):
# a candidate may reorder reductions or use another exp/tanh formula and lose a few ulps.
ULP_FLOOR = 64.0
# Elements per chunk: float64 temporaries of 8 MiB each on the host, 64 MiB on a GPU.
# Smaller host chunks cost time, not memory: over 2^24 elements on a loaded 2-core host,
# 2^18-element chunks took 34 s, 2^20 9-13 s, 2^22 9 s, the unchunked check 5.6-6.1 s
# (948 MiB more peak RSS; 2^20: ~110 MiB). On an H200, one comparison of a 2^30-element
# output with a reference on the device took 0.63 s (rule 1) and 1.13 s (with the float64
# pass) at 2^21-element chunks, 0.15 s and 0.50 s at 2^24, 0.14 s and 0.46 s at 2^26
# (bench/results/host_transfer_h200.json: a host sync per chunk); 2^23 keeps most of that
# gain with the float64 pass's dozen chunk-sized temporaries under 1 GiB.
CHUNK_ELEMENTS = 1 << 20
CHUNK_ELEMENTS_CUDA = 1 << 23
# Rule 2's "at that element": eager's own error, max over this many consecutive elements
# (and the neighbouring blocks). A reordered scan or reduction moves the candidate's error
# around within a row: elementwise, eager is accurate by chance at some elements (a
# blocked cumsum of 64 x 4096 values ~1e19 failed 29 elements whose eager error was 1e-5
# of its neighbours'), while its neighbours show the scale fp32 has there.
LOCAL_BLOCK = 256
DEFAULT_FACTOR = 10.0


def tolerance_for(dtype: torch.dtype, override: dict[str, float] | None) -> tuple[float, float]:
    atol, rtol = DEFAULT_TOLERANCES.get(dtype, (0.0, 0.0))
    if override:
        atol = float(override.get("atol", atol))
        rtol = float(override.get("rtol", rtol))
    return atol, rtol


def eps_of(dtype: torch.dtype) -> float:
    try:
        return float(torch.finfo(dtype).eps)
    except TypeError:
        return 0.0


@dataclass
class Comparison:
    """The judgement of one output against its reference (one input set)."""

    ok: bool
    reason: str = ""
    max_abs: float = 0.0  # max |c - r| over finite reference elements
    max_rel: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)  # atol, rtol
    bound: str = ""  # the bound that decided, in words
    outliers: int = 0  # elements outside bound 1 accepted by rule 2
    # Against the float64 reference (None: not computed for this set).
    candidate_error: float | None = None
    reference_error: float | None = None
    scale: float = 0.0  # max |r| over finite elements
    # Rule 4: elements where eager is NaN or inf and float64 is finite, judged against float64.
    reference_nan: int = 0
    notes: list[str] = field(default_factory=list)  # for the verdict's warnings

    @property
    def error_ratio(self) -> float | None:
        if self.candidate_error is None or self.reference_error is None:
            return None
        if self.reference_error > 0:
            return self.candidate_error / self.reference_error
        return 0.0 if self.candidate_error == 0 else math.inf

    def figures(self) -> dict[str, Any]:
        """Per-set record for ``Correctness.details``."""
        ratio = self.error_ratio
        return {"ok": self.ok, "max_abs_error": self.max_abs, "max_rel_error": self.max_rel,
                "bound": self.bound, "outliers": self.outliers,
                "candidate_error": _finite(self.candidate_error), "reference_error": _finite(self.reference_error),
                "error_ratio": _finite(ratio), "reference_nan_defects": self.reference_nan}


def _finite(x: float | None) -> float | None:
    # Reports stay strict JSON: inf is clamped.
    return None if x is None else min(x, 1e308)


# -- chunking --------------------------------------------------------------------------------

def as_float64(t: torch.Tensor, dev: torch.device) -> torch.Tensor:
    """A chunk in float64 on ``dev``, cast there after the copy. ``t.to(device=dev,
    dtype=float64)`` from the host is a blocking copy, for which PyTorch converts on the host
    first: a host-held float32 reference then costs a host-side cast and twice the bytes over
    the bus for every chunk. One comparison of a 2^30-element output took 7-20 s on an H100
    host that way (2026-11-28, the real-size corpus's reference costs, bench/RESULTS.md)."""
    if t.device == dev:
        return t.to(torch.float64)
    return t.to(dev).to(torch.float64)


def chunks(tensors: list[torch.Tensor], limit: int = CHUNK_ELEMENTS) -> Iterator[tuple[int, list[torch.Tensor]]]:
    """(flat row-major offset, [flat piece of each tensor]) over equally shaped tensors,
    at most ``limit`` elements per piece. Contiguous tensors give views; otherwise slices
    along the leading dimensions, each copied (``reshape``) at most ``limit`` elements."""
    yield from _chunks(tensors, limit, 0)


def _chunks(ts: list[torch.Tensor], limit: int, offset: int) -> Iterator[tuple[int, list[torch.Tensor]]]:
    n = ts[0].numel()
    if n == 0:
        return
    if all(t.is_contiguous() for t in ts):
        flat = [t.view(-1) for t in ts]
        for s in range(0, n, limit):
            yield offset + s, [f[s:s + limit] for f in flat]
        return
    if n <= limit or ts[0].dim() == 0:
        yield offset, [t.reshape(-1) for t in ts]
        return
    rows = ts[0].shape[0]
    if rows == 1:
        yield from _chunks([t[0] for t in ts], limit, offset)
        return
    per_row = n // rows
    step = max(1, limit // per_row)
    for s in range(0, rows, step):
        k = min(step, rows - s)
        yield from _chunks([t.narrow(0, s, k) for t in ts], limit, offset + s * per_row)


def work_device(*ts: torch.Tensor) -> torch.device:
    """Where a comparison runs: the first accelerator among the tensors' devices (chunks
    of a host-held reference are copied there), else the host."""
    for t in ts:
        if t.device.type != "cpu":
            return t.device
    return ts[0].device


def _index(shape: torch.Size, flat: int) -> tuple[int, ...]:
    out = []
    for d in reversed(shape):
        out.append(flat % d if d else 0)
        flat = flat // d if d else 0
    return tuple(reversed(out))


# -- rule 1 -----------------------------------------------------------------------------------

@dataclass
class _Pass1:
    nan_extra: int = 0
    nan_missing: int = 0
    nan_both: int = 0  # NaN in the candidate and the reference
    inf_mismatch: int = 0  # reference inf where the candidate differs
    inf_ref: int = 0  # reference inf, matched or not (rule 4 asks float64 about each)
    nbad: int = 0
    max_abs: float = 0.0
    max_rel: float = 0.0
    scale: float = 0.0
    worst_excess: float = -math.inf
    worst_index: int = -1


def _eager_pass(o: torch.Tensor, r: torch.Tensor, atol: float, rtol: float, limit: int) -> _Pass1:
    """Rule 1 over chunks; one host sync per chunk."""
    # Per-chunk figures go to the host at once: small tensors kept across chunks pinned
    # freed chunk memory in the host heap (peak RSS grew by 195 MiB over 2^26 elements).
    stats: list[list[float]] = []
    dev = work_device(o, r)
    for off, (oc, rc) in chunks([o.detach(), r.detach()], limit):
        o64 = as_float64(oc, dev)
        r64 = as_float64(rc, dev)
        nan_o, nan_r = torch.isnan(o64), torch.isnan(r64)
        inf_mismatch = (torch.isinf(r64) & (o64 != r64)).sum(dtype=torch.float64)
        inf_ref = torch.isinf(r64).sum(dtype=torch.float64)
        finite = torch.isfinite(r64)
        ra = r64.abs().masked_fill_(~finite, 0.0)
        diff = (o64 - r64).abs_().masked_fill_(~finite, 0.0).nan_to_num_(nan=0.0, posinf=math.inf)
        del o64, r64
        excess = diff - ra * rtol - atol
        worst = excess.max()
        stats.append(torch.stack([
            (nan_o & ~nan_r).sum(dtype=torch.float64), (~nan_o & nan_r).sum(dtype=torch.float64), inf_mismatch,
            (excess > 0).sum(dtype=torch.float64), diff.max(),
            (diff / ra.clamp_min(1e-12)).max(), ra.max(), worst,
            (excess.argmax() + off).to(torch.float64), (nan_o & nan_r).sum(dtype=torch.float64), inf_ref]).tolist())
    p = _Pass1()
    for row in stats:
        p.nan_extra += int(row[0])
        p.nan_missing += int(row[1])
        p.nan_both += int(row[9])
        p.inf_mismatch += int(row[2])
        p.inf_ref += int(row[10])
        p.nbad += int(row[3])
        p.max_abs = max(p.max_abs, row[4])
        p.max_rel = max(p.max_rel, row[5])
        p.scale = max(p.scale, row[6])
        if row[7] > p.worst_excess:
            p.worst_excess, p.worst_index = row[7], int(row[8])
    # Clamped so that the report stays strict JSON when the candidate produced inf.
    p.max_abs, p.max_rel = min(p.max_abs, 1e308), min(p.max_rel, 1e308)
    return p


# -- rules 2 and 3 ----------------------------------------------------------------------------

@dataclass
class _Pass2:
    residual: int = 0
    outliers: int = 0
    candidate_error: float = 0.0
    reference_error: float = 0.0
    scale64: float = 0.0
    worst_excess: float = -math.inf
    worst_index: int = -1
    local: torch.Tensor | None = None  # per block: eager's error over the block and its neighbours
    reference_broken: int = 0  # elements where eager breaks the tolerance against float64
    # Rule 4: eager NaN or inf where float64 is finite (in the output's dtype), judged against float64.
    reference_nan: int = 0
    reference_nan_failed: int = 0  # of those, outside atol + rtol*|r64| + L (NaN and inf included)
    reference_nan_error: float = 0.0  # max |c - r64| over those within the bound
    defect_excess: float = -math.inf
    defect_index: int = -1
    nan_missing: int = 0  # eager NaN that float64 has too (or is infinite): the candidate lacks them
    inf_mismatch: int = 0  # eager inf that float64 has too (or NaN): the candidate differs

    def local_error(self, flat: int) -> float:
        return float(self.local[flat // LOCAL_BLOCK]) if self.local is not None else 0.0


def _local_reference_error(r: torch.Tensor, r64: torch.Tensor, atol: float, rtol: float,
                           limit: int, dev: torch.device) -> tuple[torch.Tensor, int]:
    """(eager's largest error vs float64 per block of ``LOCAL_BLOCK`` consecutive
    row-major elements, float32 on ``dev``; how many elements of eager break the
    tolerance against float64)."""
    n = r.numel()
    blocks = torch.zeros((n + LOCAL_BLOCK - 1) // LOCAL_BLOCK, dtype=torch.float32, device=dev)
    broken = 0
    for off, (rc, xc) in chunks([r.detach(), r64.detach()], limit):
        e = as_float64(rc, dev)
        x = as_float64(xc, dev)
        err = (e - x).abs_().nan_to_num_(nan=0.0, posinf=0.0)
        broken += int((err > x.abs().nan_to_num_(nan=0.0, posinf=0.0).mul_(rtol).add_(atol)).sum())
        ids = torch.arange(off, off + err.numel(), device=err.device).floor_divide_(LOCAL_BLOCK)
        blocks.scatter_reduce_(0, ids, err.to(torch.float32), "amax")
    return blocks, broken


def _float64_pass(o: torch.Tensor, r: torch.Tensor, r64: torch.Tensor, atol: float, rtol: float, k: float,
                  limit: int) -> _Pass2:
    # Per-chunk figures go to the host at once (see _eager_pass).
    stats: list[list[float]] = []
    dev = work_device(o, r)
    blocks, broken = _local_reference_error(r, r64, atol, rtol, limit, dev)
    # The block, its two neighbours: an element near a block's edge sees both sides. Only
    # where eager itself breaks the tolerance somewhere in this output (else zeros: the
    # element's own eager error alone counts).
    local = torch.maximum(blocks, torch.maximum(F.pad(blocks[1:], (0, 1)), F.pad(blocks[:-1], (1, 0))))
    if not broken:
        local.zero_()
    del blocks
    for off, (oc, rc, xc) in chunks([o.detach(), r.detach(), r64.detach()], limit):
        c = as_float64(oc, dev)
        e = as_float64(rc, dev)
        x = as_float64(xc, dev)
        # Rule 2 judges where eager and float64 are finite. A non-finite candidate there is
        # outside every bound (|c - r64| is inf), unless float64 rounds to that same inf in
        # the output's dtype: an inf candidate where eager and float64 are finite used to
        # drop out of rule 2 with the other non-finite elements and pass.
        fin = torch.isfinite(x) & torch.isfinite(e)
        ids = torch.arange(off, off + c.numel(), device=dev).floor_divide_(LOCAL_BLOCK)
        around = local[ids].to(torch.float64)
        del ids
        # Rule 4: where eager is NaN or inf and the float64 value is representable in the
        # output's dtype, the candidate is held to that value (a NaN or inf candidate is
        # outside it); eager NaN or inf that float64 has too (or that it rounds to inf)
        # must still be matched. Infinities as NaN: on an H200 (2026-11-28) the eager
        # ConvTranspose2d with a 2^31-element output had +/-inf where an earlier run had
        # NaN, and the candidate was judged incorrect ("infinities differ") for the
        # library's defect. Only a chunk with eager NaN or inf pays for the temporaries
        # (chunk-sized: with six of them in every chunk the 2^26-element probe of
        # test_tolerance grew by 200-207 MiB, over its 192 MiB bound; without, as before
        # rule 4), and only one with an inf candidate for rule 2's rounding test. One host
        # sync for both questions.
        flags = torch.stack([~torch.isfinite(e).all(), torch.isinf(c).any()]).tolist()
        has_bad, has_c_inf = bool(flags[0]), bool(flags[1])
        if has_bad:
            e_bad = ~torch.isfinite(e)
            defect = e_bad & torch.isfinite(x.to(r.dtype))
            kept = e_bad & ~defect
            e_nan = torch.isnan(e)
            nan_lost = (kept & e_nan & ~torch.isnan(c)).sum(dtype=torch.float64)
            inf_lost = (kept & ~e_nan & (c != e)).sum(dtype=torch.float64)
            del kept, e_nan
            d_excess = ((c - x).abs_() - x.abs().mul_(rtol).add_(atol) - around).nan_to_num_(nan=math.inf)
            d_bad = defect & (d_excess > 0)
            d_err = (c - x).abs_().masked_fill_(~(defect & ~d_bad), 0.0)
            d_worst = d_excess.masked_fill_(~d_bad, -math.inf)
            rule4 = [defect.sum(dtype=torch.float64), d_bad.sum(dtype=torch.float64), d_err.max(), d_worst.max(),
                     (d_worst.argmax() + off).to(torch.float64), nan_lost, inf_lost]
            del e_bad, defect, d_excess, d_bad, d_err, d_worst
        else:
            rule4 = [torch.zeros((), dtype=torch.float64, device=dev)] * 3 + [
                torch.full((), -math.inf, dtype=torch.float64, device=dev),
                torch.full((), -1.0, dtype=torch.float64, device=dev)] + [
                torch.zeros((), dtype=torch.float64, device=dev)] * 2
        # "not within": a NaN difference counts as outside.
        eager_out = torch.le((c - e).abs_(), e.abs().mul_(rtol).add_(atol)).logical_not_()
        err_c = (c - x).abs_().nan_to_num_(nan=math.inf, posinf=math.inf).masked_fill_(~fin, 0.0)
        if has_c_inf:
            err_c.masked_fill_(torch.isinf(c) & (c == x.to(r.dtype)), 0.0)
        err_r = (e - x).abs_().masked_fill_(~fin, 0.0)
        del c, e
        near = torch.maximum(around, err_r * k)
        del around
        # inf - inf (an inf candidate, eager's error around beyond float32's range) is outside.
        excess = (err_c - x.abs().mul_(rtol).add_(atol) - near).nan_to_num_(nan=math.inf, posinf=math.inf,
                                                                             neginf=-math.inf)
        del near
        residual = eager_out & fin & (excess > 0)
        accepted = eager_out & fin & ~(excess > 0)
        worst = excess.masked_fill(~residual, -math.inf)
        stats.append(torch.stack([
            residual.sum(dtype=torch.float64), accepted.sum(dtype=torch.float64), err_c.max(), err_r.max(),
            x.abs().masked_fill_(~fin, 0.0).max(), worst.max(), (worst.argmax() + off).to(torch.float64),
            *rule4]).tolist())
    p = _Pass2(local=local, reference_broken=broken)
    for row in stats:
        p.residual += int(row[0])
        p.outliers += int(row[1])
        p.candidate_error = max(p.candidate_error, row[2])
        p.reference_error = max(p.reference_error, row[3])
        p.scale64 = max(p.scale64, row[4])
        if row[5] > p.worst_excess:
            p.worst_excess, p.worst_index = row[5], int(row[6])
        p.reference_nan += int(row[7])
        p.reference_nan_failed += int(row[8])
        p.reference_nan_error = max(p.reference_nan_error, row[9])
        if row[10] > p.defect_excess:
            p.defect_excess, p.defect_index = row[10], int(row[11])
        p.nan_missing += int(row[12])
        p.inf_mismatch += int(row[13])
    return p


def _regime(atol: float, rtol: float, scale: float) -> str:
    if rtol > 0 and rtol * scale > atol:
        return f"relative at |ref| ~ {scale:.2g}"
    return "absolute"


def _value(t: torch.Tensor, flat: int) -> float:
    return float(t.detach().reshape(-1)[flat]) if t.is_contiguous() else float(t.detach()[_index(t.shape, flat)])


def compare(out: Any, ref: Any, tolerance: dict[str, float] | None, *,
            ref64: Callable[[], Any] | None = None, factor: float | None = DEFAULT_FACTOR,
            budget: bool = False, limit: int | None = None, excuse_reference_nan: bool = False) -> Comparison:
    """Judge ``out`` against ``ref`` by the policy above. ``ref64``: computes the float64
    reference (called at most once, only when needed); ``factor``: k of rules 2, 3 and 4
    (None: all three off); ``budget``: apply rule 3 on this set (computes ``ref64``); ``limit``:
    elements per chunk (None: by device); ``excuse_reference_nan``: any value agrees with a
    NaN of the reference, a value other than NaN with an inf (``compare_values``)."""
    details: dict[str, Any] = {}
    total = Comparison(True, details=details)
    r64_tree: list[Any] | None = None
    r64_failed = ""

    def float64_leaves() -> list[Any] | None:
        nonlocal r64_tree, r64_failed
        if r64_tree is None and not r64_failed and ref64 is not None:
            try:
                r64_tree = leaves(ref64())
            except Exception as exc:  # noqa: BLE001 - a spec op without float64 support
                r64_failed = f"float64 reference failed ({type(exc).__name__})"
        return r64_tree

    use64 = ref64 is not None and factor is not None
    bounds: list[str] = []
    eps = 0.0
    for i, (o, r) in enumerate(zip(leaves(out), leaves(ref), strict=False)):
        if not isinstance(r, torch.Tensor):
            continue
        where = f"output[{i}]"
        if r.is_complex():
            # Judged as its real and imaginary parts: a float leaf with a trailing dimension of
            # 2 (flat index 2k is element k's real part, 2k + 1 its imaginary part).
            if not isinstance(o, torch.Tensor) or not o.is_complex():
                return _fail(total, f"{where} is not complex like the reference")
            o, r = _parts(o), _parts(r)
            where += " (real and imaginary parts)"
        step = limit or (CHUNK_ELEMENTS_CUDA if work_device(o, r).type == "cuda" else CHUNK_ELEMENTS)
        atol, rtol = tolerance_for(r.dtype, tolerance)
        details.setdefault("atol", atol)
        details.setdefault("rtol", rtol)
        if r.numel() == 0:
            continue
        if not r.is_floating_point():
            if not _equal_chunked(o, r, step):
                return _fail(total, f"{where} {_exact_kind(r.dtype)} values differ{_first_difference(o, r)}")
            bound = f"equal ({_exact_kind(r.dtype)}: judged exactly)"
            bounds.append(bound if len(leaves(ref)) == 1 else f"{where}: {bound}")
            continue
        eps = max(eps, eps_of(r.dtype))
        p = _eager_pass(o, r, atol, rtol, step)
        total.max_abs, total.max_rel = max(total.max_abs, p.max_abs), max(total.max_rel, p.max_rel)
        total.scale = max(total.scale, p.scale)
        if p.nan_extra:
            return _fail(total, f"{where} has {p.nan_extra} NaN where the reference has none")
        if excuse_reference_nan:
            p.nan_missing = p.inf_mismatch = 0
        # Eager NaN and inf are settled by rule 4 when the float64 run can say whether they
        # are the answer: it runs whenever the reference has NaN or inf, matched or not (a
        # candidate that copies eager's inf where float64 is finite fails on every set,
        # not only on those whose float64 run happens for another reason).
        if p.nan_missing and not use64:
            return _fail(total, f"{where} misses {p.nan_missing} NaN the reference has (of {r.numel()} elements)")
        if p.inf_mismatch and not use64:
            return _fail(total, f"{where} infinities differ from the reference")
        bound = f"|c - r| <= {atol:g} + {rtol:g}*|r| ({_regime(atol, rtol, p.scale)})"
        need64 = use64 and (budget or p.nbad > 0 or p.nan_missing + p.nan_both + p.inf_ref > 0)
        r64s = float64_leaves() if need64 else None
        x = r64s[i] if r64s is not None and i < len(r64s) and isinstance(r64s[i], torch.Tensor) else None
        if x is not None and x.is_complex():
            x = _parts(x)
        q: _Pass2 | None = None
        if x is not None and tuple(x.shape) == tuple(r.shape):
            assert factor is not None
            q = _float64_pass(o, r, x, atol, rtol, factor, step)
            total.candidate_error = max(total.candidate_error or 0.0, q.candidate_error)
            total.reference_error = max(total.reference_error or 0.0, q.reference_error)
            total.outliers += q.outliers
        if p.nan_missing and (q is None or q.nan_missing):
            missing = q.nan_missing if q is not None else p.nan_missing
            msg = f"{where} misses {missing} NaN the reference has (of {r.numel()} elements"
            msg += (f"; its float64 run has NaN there too, or a value beyond {r.dtype}'s range" if q is not None
                    else f"; {r64_failed or 'no float64 output to compare'}") + ")"
            return _fail(total, msg)
        if p.inf_mismatch and (q is None or q.inf_mismatch):
            return _fail(total, f"{where} infinities differ from the reference" + (
                f" ({q.inf_mismatch} of {r.numel()} elements; its float64 run, rounded to {r.dtype}, is not "
                f"finite there either)" if q is not None else f" ({r64_failed or 'no float64 output to compare'})"))
        if q is not None and q.reference_nan:
            total.reference_nan += q.reference_nan
            defect = (f"the reference had {q.reference_nan} NaN or infinities its float64 run has not (a reference "
                      f"defect): judged against float64 there")
            rule4 = f"|c - r64| <= {atol:g} + {rtol:g}*|r64|" + (
                " + the reference's largest error around" if q.reference_broken else "")
            if q.reference_nan_failed:
                assert x is not None  # q is the float64 pass over x
                idx = q.defect_index
                got, exact = _value(o, idx), _value(x, idx)
                around = (f"; the reference's largest error around it {q.local_error(idx):.3g}, it breaks the "
                          f"tolerance against float64 at {q.reference_broken} elements" if q.reference_broken else "")
                return _fail(total, f"{where}: {defect}, and {q.reference_nan_failed} of them are outside "
                                    f"{rule4} (e.g. flat index {idx} = {_index(r.shape, idx)}: got {got:.6g}, "
                                    f"float64 {exact:.6g}{around})")
            total.notes.append(f"{where}: {defect} (max |c - r64| {q.reference_nan_error:.3g})")
            bound += f"; {defect}: {rule4}"
        if q is not None and q.outliers:
            bound += (f"; {q.outliers} element(s) outside it accepted: |c - r64| <= atol + rtol*|r64| + "
                      f"max({factor:g}x the reference's own error there, its largest around)")
        bounds.append(bound if len(leaves(ref)) == 1 else f"{where}: {bound}")
        if p.nbad == 0:
            continue
        if q is not None and q.residual == 0:
            continue
        # Fail: name the worst element (of the residual when float64 judged it).
        idx = q.worst_index if q is not None else p.worst_index
        nbad = q.residual if q is not None else p.nbad
        got, want = _value(o, idx), _value(r, idx)
        msg = (f"{where} mismatch: {nbad}/{r.numel()} elements outside atol={atol:g} rtol={rtol:g} "
               f"({_regime(atol, rtol, p.scale)}); max abs error {p.max_abs:.3g} (e.g. flat index {idx} "
               f"= {_index(r.shape, idx)}: got {got:.6g}, expected {want:.6g}")
        if q is not None and x is not None:
            exact = _value(x, idx)
            own = abs(want - exact)
            around = (f"up to {q.local_error(idx):.3g} around it; the reference itself breaks the tolerance "
                      f"at {q.reference_broken} elements" if q.reference_broken
                      else "the reference holds the tolerance against float64 everywhere")
            msg += (f", float64 {exact:.6g}: the candidate's error there is {abs(got - exact):.3g}, the "
                    f"reference's own {own:.3g} ({around}); allowed: atol + rtol*|r64| + max({factor:g}x the "
                    f"reference's own, its largest around)")
        elif use64 and r64_failed:
            msg += f"; outliers not judged: {r64_failed}"
        msg += ")"
        total.bound = "; ".join(bounds)
        return _fail(total, msg)
    total.bound = "; ".join(bounds)
    if budget and use64:
        assert factor is not None
        if total.candidate_error is None:
            details["budget_skipped"] = r64_failed or "no float64 output to compare"
            return total
        floor = ULP_FLOOR * eps * max(total.scale, 1.0)
        allowed = max(factor * (total.reference_error or 0.0), floor)
        details["budget"] = allowed
        ratio = total.error_ratio
        total.bound += (f"; error vs float64 {total.candidate_error:.3g} = "
                        f"{ratio:.2g}x the reference's own ({total.reference_error:.3g}), budget {allowed:.3g}")
        if total.candidate_error > allowed:
            return _fail(total, f"error vs float64 reference {total.candidate_error:.3g} exceeds the budget "
                                f"{allowed:.3g} ({factor:g}x eager PyTorch's own error "
                                f"{total.reference_error:.3g}); precision downgrade?")
    return total


def _fail(c: Comparison, reason: str) -> Comparison:
    c.ok, c.reason = False, reason
    return c


def _parts(t: torch.Tensor) -> torch.Tensor:
    """A complex tensor's real and imaginary parts as a float view (a conjugated view's bit
    resolved first: ``view_as_real`` refuses it)."""
    return torch.view_as_real(t.resolve_conj())


def _exact_kind(dtype: torch.dtype) -> str:
    return "bool" if dtype == torch.bool else f"integer ({str(dtype).replace('torch.', '')})"


def _first_difference(o: torch.Tensor, r: torch.Tensor) -> str:
    """`` (n of N elements; e.g. flat index i = (..): got a, expected b)`` for a reason; empty
    for a large output (the count would read it whole once more)."""
    if o.numel() > CHUNK_ELEMENTS:
        return ""
    r = r.detach().to(o.device)
    diff = (o.detach() != r).reshape(-1)
    n = int(diff.sum())
    if not n:
        return ""
    idx = int(diff.nonzero()[0])
    return (f" ({n} of {r.numel()} elements; e.g. flat index {idx} = {_index(r.shape, idx)}: got "
            f"{o.detach().reshape(-1)[idx].item()!r}, expected {r.reshape(-1)[idx].item()!r})")


def _equal_chunked(o: torch.Tensor, r: torch.Tensor, limit: int) -> bool:
    if o.shape != r.shape:
        return False
    dev = work_device(o, r)
    flags = [torch.equal(oc.to(dev), rc.to(dev)) for _, (oc, rc) in chunks([o.detach(), r.detach()], limit)]
    return all(flags)


def compare_values(out: Any, ref: Any, tolerance: dict[str, float] | None, *,
                   excuse_reference_nan: bool = False) -> Comparison:
    """Rule 1 only (no float64 reference): the repeat, kernel-dependency and signal-floor
    checks, which compare with eager or with a copy of the output. ``excuse_reference_nan``:
    a value where the reference has NaN agrees (NaN or not), and so does one that is not NaN
    where it has inf, for the checks that reject a candidate whose output is *still*
    correct without its kernels: a correct candidate may differ from eager there (rule 4),
    and excusing those elements only makes "still correct" easier to reach, so those checks
    get stricter, never looser."""
    return compare(out, ref, tolerance, ref64=None, factor=None, excuse_reference_nan=excuse_reference_nan)


def record(corr: Correctness, label: str, cmp: Comparison) -> None:
    """Fold one input set's figures into the verdict's: the worst errors and ratio, and the
    bound of the failing set, else of the set with the largest error ratio."""
    corr.atol = cmp.details.get("atol", corr.atol)
    corr.rtol = cmp.details.get("rtol", corr.rtol)
    corr.details.append({"set": label, **cmp.figures()})
    corr.trials += 1
    corr.max_abs_error = max(corr.max_abs_error, cmp.max_abs)
    corr.max_rel_error = max(corr.max_rel_error, cmp.max_rel)
    corr.outliers += cmp.outliers
    ratio = cmp.figures()["error_ratio"]
    if ratio is not None and (corr.error_ratio is None or ratio > corr.error_ratio):
        corr.error_ratio, corr.candidate_error, corr.reference_error = ratio, cmp.candidate_error, cmp.reference_error
        corr.bound = cmp.bound
    if not cmp.ok or not corr.bound:
        corr.bound = cmp.bound
