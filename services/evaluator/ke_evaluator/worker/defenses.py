"""Individual checks of one evaluation that go beyond "same values as the reference":
stale memory and determinism, dependence on the candidate's own kernels (each raises
``Outcome`` with a final status); NaN-poisoning of the allocator; how a candidate's
exception is reported; the evidence of the float64 error budget (``tolerance.py``
applies it). Worker side: torch only.
"""

from __future__ import annotations

import dataclasses
import math
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from kernelevolve.ports.verdict import Verdict

from . import arithmetic_audit, data_movement, diagnosis, launch_counter, loading, memory, output_checks, tolerance


class Outcome(Exception):
    """Ends an evaluation early with a final status."""

    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def crc_and_determinism(run_candidate: Callable[[list[Any], str], Any], inputs: list[Any], out1: Any, ref: Any,
                        spec: loading.LoadedSpec, v: Verdict, reference_nan: int = 0, outliers: int = 0) -> None:
    """Candidate -> reference -> candidate: the second call runs after the reference's
    output memory was freed, on fresh clones; it must still be right, and agree with the
    first call (bitwise, or within the spec tolerance for atomics-style nondeterminism).
    ``reference_nan``: how many NaN or inf of ``ref`` the first call's comparison judged
    against float64 (tolerance.py, rule 4); there the second call must agree with the first.
    ``outliers``: how many elements outside eager's bound the first call's comparison accepted
    against float64 (rule 2): eager is not the answer there, so the second call is held to
    the first (which the whole policy verified), not to eager: an H200/H100 reference of a
    2^31-element ConvTranspose2d, finite garbage at 1.66e9 elements that rule 2 settled,
    failed the rule-1 repeat although the second call equalled the first bitwise."""
    again_in = output_checks.clone_tree(inputs)
    out2 = run_candidate(again_in, "repeat after the reference ran")
    for a, b in zip(output_checks.leaves(out1), output_checks.leaves(out2), strict=False):
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.numel() and output_checks.overlaps(a, b):
            raise Outcome("rejected", "returned the same output memory on two calls (a cached or persistent "
                                      "result): each call must return new memory")
    first = [t for t in output_checks.leaves(out1) if isinstance(t, torch.Tensor)]
    bad = output_checks.check_structure(out2, ref, output_checks.spans(again_in), strict_strides=False,
                                        device_type=first[0].device.type if first else None)
    del again_in
    if bad:
        raise Outcome("incorrect", f"{bad} (repeat after the reference ran)")
    if not outliers:
        cmp = tolerance.compare_values(out2, ref, spec.tolerance, excuse_reference_nan=bool(reference_nan))
        if not cmp.ok:
            raise Outcome("incorrect", f"{cmp.reason} (repeat after the reference ran: stale memory or caching?)")
    if reference_nan or outliers:
        # Where eager's NaN or inf, or elements outside eager's bound, were judged against
        # float64, the first call is the verified answer: memory left by the reference (its
        # values there) fails this.
        where = " and ".join(w for w, n in (("where the reference has NaN or inf", reference_nan),
                                           ("at elements outside the reference's bound", outliers)) if n)
        cmp = tolerance.compare_values(out2, out1, spec.tolerance)
        if not cmp.ok:
            raise Outcome("incorrect", f"{cmp.reason} against the first call, which matched the float64 reference "
                                       f"{where} (repeat after the reference ran: stale memory or caching?)")
    if output_checks.bitwise_equal(out1, out2):
        v.evidence["deterministic"] = "bitwise"
    else:
        v.evidence["deterministic"] = "within tolerance"
        v.warnings.append("two runs on identical inputs differ in the last bits (nondeterministic kernel)")


def budget_evidence(v: Verdict, key: str, cmp: tolerance.Comparison) -> None:
    """Record the float64 error budget of one input set (``tolerance.compare`` applied it)."""
    skipped = cmp.details.get("budget_skipped")
    if skipped:
        v.evidence.setdefault("error_budget", f"skipped: {skipped}")
        return
    if "budget" not in cmp.details:
        return
    v.evidence.setdefault("error_budget", {})
    if isinstance(v.evidence["error_budget"], dict):
        v.evidence["error_budget"][key] = {"candidate_error": cmp.candidate_error,
                                           "eager_error": cmp.reference_error, "budget": cmp.details["budget"]}


def _spans(module: torch.nn.Module, inputs: list[Any]) -> list[tuple[int, int]]:
    """Storage spans of the call's inputs and the module's parameters and buffers."""
    spans = [output_checks.storage_span(t) for t in output_checks.leaves(inputs) if isinstance(t, torch.Tensor)]
    return spans + [output_checks.storage_span(t) for t in list(module.parameters()) + list(module.buffers())]


def kernel_dependency(call: Callable[[torch.nn.Module, list[Any]], Any], poison: Callable[[list[Any]], None],
                      cand_model: torch.nn.Module, recorder: launch_counter.LaunchRecorder, inputs0: list[Any],
                      ref0: Any, spec: loading.LoadedSpec, v: Verdict, device: torch.device | None = None) -> None:
    """Re-run with every candidate launch replaced by a NaN-fill of the tensors it was
    given (inputs and parameters excepted). A result that is still correct was not
    computed by the candidate's kernels (decoy kernel + library fallback). What the fills
    overwrote is put back afterwards (``LaunchRecorder.restore``): the model is probed
    again and timed as it was. ``inputs0`` and ``ref0`` may wait on the host: the call gets
    a copy on ``device``, the comparison reads the reference chunk by chunk."""
    # Bool arguments filled with True, then (only if the output is still correct) with False:
    # a bool output that is right whatever its kernels wrote is right under both.
    for bool_fill in (True, False):
        probe_in = _copy(inputs0, device)
        probe = launch_counter.LaunchRecorder(module_name=recorder.module_name, suppress=True,
                                              protected=_spans(cand_model, probe_in), bool_fill=bool_fill)
        poison(probe_in)
        try:
            try:
                with launch_counter.recording(probe):
                    out = call(cand_model, probe_in)
            except Exception:  # noqa: BLE001 - failing without its kernels means it needs them
                v.evidence["kernel_dependency"] = "output needs the kernels (raises without them)"
                return
            still_correct = _still_correct(out, ref0, probe_in, spec, device)
            del out  # nothing of it to put back
        finally:
            # The fills reached what the candidate keeps across calls too (a weight it packed
            # once): the audit and the timing run this model next, as it was.
            probe.restore()
        if not still_correct:
            break
    if still_correct:
        raise Outcome("rejected", "the output does not depend on the candidate's Triton kernels: with every "
                                  "launch suppressed it is still correct (work done by library calls?)")
    v.evidence["kernel_dependency"] = "output changes when the kernels are suppressed"


def _copy(inputs: list[Any], device: torch.device | None) -> list[Any]:
    return output_checks.clone_tree(inputs) if device is None else memory.clone_to(inputs, device)


def _device_type(device: torch.device | None) -> str | None:
    return device.type if device is not None else None


def fresh_model(cls: type, init: list[Any], seed: int, device: torch.device, ref_model: torch.nn.Module
                ) -> torch.nn.Module:
    """Another instance of the candidate, built and loaded as the judged one was (no graph
    captured yet)."""
    model = loading.build_model(cls, init, seed, device)
    loading.copy_parameters(ref_model, model)
    return model


def kernel_arithmetic(call: Callable[[torch.nn.Module, list[Any]], Any], poison: Callable[[list[Any]], None],
                      model: Callable[[], torch.nn.Module], recorder: launch_counter.LaunchRecorder,
                      inputs0: list[Any], ref0: Any, spec: loading.LoadedSpec, device_type: str, v: Verdict,
                      device: torch.device | None = None, economy: arithmetic_audit.Economy | None = None,
                      reference: Callable[[list[Any]], Any] | None = None) -> None:
    """The candidate's own kernels must do part of the operator's arithmetic, and what they
    compute must reach the output (``arithmetic_audit``): a copy of a library result through
    a Triton kernel is rejected. ``model()`` gives the module to probe (a fresh one for a
    graph-replaying candidate, so that its kernels launch eagerly again).

    With ``economy`` the first pass stops analysing once it has its evidence (computing
    launches, ``arithmetic_audit.Economy``) and replaces what those launches computed as it
    goes, so its own output is the counterfactual: an output that is then wrong passes the
    audit (a graph-replaying candidate's replay ran plainly: a counterfactual pass mirrors
    the replacements into it). Anything else (the output still correct, the forward raising,
    nothing computing found) is decided by the full audit, so every rejection is the full
    audit's; a pass that analysed every launch and replaced nothing is that full audit.

    ``reference`` (runs the reference model on a set of inputs): when every launch only
    moves data, the inputs may be where the operator is the identity (ReLU of uniform
    [0, 1) values): ``_off_identity`` judges the kernels again on inputs moved to where
    it is not, and the candidate passes when they compute there."""
    economical = economy is not None
    audit, correct = _audit_pass(call, poison, model, recorder, inputs0, ref0, spec, device, economy)
    if economical and audit.replaced:
        reach: bool | str | None = True if correct is False else None
        if any(la.captured for la in audit.launches):
            reach = _computed_reach(call, poison, model, recorder, audit, inputs0, ref0, spec, device)
        if reach is not None:
            summary = _summary(audit)
            summary.update(computed_values_reach_output=reach,
                           audit=f"economical: {summary['analysed']} of {summary['launches']} launches analysed, "
                                 "their computed values replaced")
            v.evidence["kernel_arithmetic"] = summary
            return
    if economical and correct is True and not any(la.captured for la in audit.launches):
        assert economy is not None
        # The first launches' values washed out before the output (a deep default-initialised
        # net: its classifier hardly depends on its first layers). The launches nearest the
        # output decide instead of the full audit, whose snapshots and reruns of every
        # launch grew with the model (a SqueezeNet-style seed ran out of its run phase).
        start = len(audit.launches) - economy.tail
        if start > 0:
            del audit
            audit, correct = _audit_pass(call, poison, model, recorder, inputs0, ref0, spec, device,
                                         dataclasses.replace(economy, start=start))
            if audit.replaced and correct is False:
                summary = _summary(audit)
                summary.update(computed_values_reach_output=True,
                               audit=f"economical: {summary['analysed']} of {summary['launches']} launches "
                                     f"analysed (of the last {economy.tail}, the first ones' values having "
                                     "washed out), their computed values replaced")
                v.evidence["kernel_arithmetic"] = summary
                return
    # correct is None after an economical pass: its forward raised (the full audit's raises too)
    if economical and (audit.replaced or not audit.complete or correct is None):
        del audit  # its written-position masks are full-size: not held through the full pass
        audit, _ = _audit_pass(call, poison, model, recorder, inputs0, ref0, spec, device, None)
    else:
        economical = False  # the economical pass analysed everything and replaced nothing: the full audit
    summary = _summary(audit)
    summary["audit"] = "full after the economical pass" if economical else "full"
    v.evidence["kernel_arithmetic"] = summary
    analysed = [la for la in audit.launches if not la.captured]
    computing = audit.computing()
    if analysed and not computing:
        off = (_off_identity(call, poison, model, recorder, audit, inputs0, spec, device, reference)
               if reference is not None else None)
        if off is not None and off.passed:
            summary["off_identity"] = off.evidence()
            return
        moved = _data_movement(reference, analysed, inputs0, device, off)
        if moved is not None:
            summary["data_movement"] = moved
            return
        raise Outcome("rejected", "its Triton kernels only move data; the arithmetic runs in library calls: "
                                  + "; ".join(la.describe() for la in analysed[:4])
                                  + (f" ({off.note})" if off is not None and off.note else "")
                                  + _library_share(call, model, inputs0, device_type, set(recorder.own), device))
    if not any(w.computes for la in computing for w in la.writes):
        summary["computed_values_reach_output"] = "not checked: no computing launch could be analysed"
        return
    full_reach = _computed_reach(call, poison, model, recorder, audit, inputs0, ref0, spec, device)
    if full_reach is None:
        raise Outcome("rejected", "the values its Triton kernels compute do not reach the output: with them "
                                  "replaced by random values it is still correct (the arithmetic that matters "
                                  "runs in library calls; computing: "
                                  + "; ".join(la.describe() for la in computing[:3]) + ")"
                                  + _library_share(call, model, inputs0, device_type, set(recorder.own), device))
    summary["computed_values_reach_output"] = full_reach


# Spreads (half-widths about 0) the off-identity check moves each floating input to, in
# order: +-2 takes uniform [0, 1) past ReLU's, leaky ReLU's, ELU's and hardtanh's kinks
# (hardtanh clips at 1); +-64 past wider clamps. The first on which the reference is no
# copy of an input, and finite, is used.
# Where an operator that is the identity on the given inputs may not be: spread wide (ReLU,
# hardtanh on uniform [0, 1)), narrow (a threshold's dead zone: hardshrink and softshrink
# were the identity over +-2 and +-64 alike), and with NaN and infinities among the values
# (nan_to_num); (half-width, non-finite values mixed in).
OFF_IDENTITY_SPREADS: tuple[tuple[float, bool], ...] = ((2.0, False), (64.0, False), (1.0 / 64, False), (2.0, True))


@dataclass
class OffIdentity:
    """The kernels judged again on inputs where the operator is not the identity."""

    passed: bool = False
    note: str = ""  # why not, for the rejection's reason
    spread: float = 0.0
    nonfinite: bool = False
    # the reference copied an input on every spread tried: the identity wherever we looked
    always_identity: bool = False
    computing: int = 0
    reach: bool | str = False

    def evidence(self) -> dict[str, Any]:
        return {"why": "on the given inputs every kernel's writes equal an input's values (the operator is the "
                       "identity there)",
                "inputs": _spread_words(self.spread, self.nonfinite),
                "computing": self.computing, "computed_values_reach_output": self.reach}


def _spread_words(half: float, nonfinite: bool) -> str:
    return (f"each floating input moved linearly onto [-{half:g}, {half:g}]"
            + (", every 7th value NaN, every 11th +inf, every 13th -inf" if nonfinite else ""))


def _spread(inputs: list[Any], half: float, nonfinite: bool = False) -> list[Any] | None:
    """Copies of ``inputs`` (on the host) with each floating tensor mapped linearly onto
    ``[-half, half]``, its smallest value to ``-half``; one without two distinct values (a
    single element, a constant) to ``-(|x| + half)``, the other side of every kink the
    spread passes; ``nonfinite``: NaN and infinities mixed in. None when no input can move
    (no floating tensor)."""
    moved = [False]

    def spread(t: torch.Tensor) -> torch.Tensor:
        x = one(t)
        if nonfinite and x.is_floating_point() and x.numel():
            flat = x.view(-1)
            flat[::7] = math.nan
            flat[5::11] = math.inf
            flat[3::13] = -math.inf
        return x

    def one(t: torch.Tensor) -> torch.Tensor:
        # in the tensor's own dtype, one copy: a float64 temporary of a real-size input set
        # would be twice its size again
        x = t.detach().to("cpu", copy=True)
        if not x.is_floating_point() or not x.numel():
            return x
        moved[0] = True
        fin = torch.isfinite(x)
        lo = float(x.masked_fill(~fin, math.inf).min())
        hi = float(x.masked_fill(~fin, -math.inf).max())
        if not hi > lo:
            return x.abs_().add_(half).neg_()
        return x.sub_((lo + hi) / 2).mul_(2 * half / (hi - lo))

    out = output_checks.map_tree(inputs, spread)
    return out if moved[0] else None


def _copies_an_input(ref: Any, inputs: list[Any]) -> bool:
    """Some output leaf holds exactly (within ``NEAR_ULPS``) the values of an input, in any
    order: the operator is a move there too. Also true for a non-finite output: the operator
    is not defined there (a log of the negatives), no ground to judge the kernels on."""
    ins = [t for t in output_checks.leaves(inputs) if isinstance(t, torch.Tensor)]
    for r in output_checks.leaves(ref):
        if not isinstance(r, torch.Tensor):
            continue
        if r.is_floating_point() and not bool(torch.isfinite(r).all()):
            return True
        if any(arithmetic_audit.same_values(r, x) for x in ins):
            return True
    return False


def _off_identity(call: Callable[[torch.nn.Module, list[Any]], Any], poison: Callable[[list[Any]], None],
                  model: Callable[[], torch.nn.Module], recorder: launch_counter.LaunchRecorder,
                  first: arithmetic_audit.ArithmeticAudit, inputs0: list[Any], spec: loading.LoadedSpec,
                  device: torch.device | None, reference: Callable[[list[Any]], Any]) -> OffIdentity:
    """Every launch only moved data: judge the kernels by what they do where the operator is
    not the identity. On inputs moved there (``_spread``), the candidate must be correct
    against the reference on them, launch the same kernels in the same order, and the full
    audit must find computing launches whose values reach the output. A kernel that copies
    a library result copies it there too; one that copies its input is wrong there; one that
    copies only where the values are those of the given inputs (non-negative, in range)
    writes its own values elsewhere, and they are wrong or do not reach the output.
    Residual: a kernel that computes from its inputs where they are unlike the given ones
    and copies a library result where they are alike passes: the verdict a partial library
    fallback gets on inputs that never make the operator the identity (README "Library
    calls")."""
    why = OffIdentity(note="no floating input to move to where the operator is not the identity")
    for half, nonfinite in OFF_IDENTITY_SPREADS:
        moved = _spread(inputs0, half, nonfinite)
        if moved is None:
            return why
        ref = reference(_copy(moved, device))
        if _copies_an_input(ref, moved):
            why.note = ("the operator is still the identity, or undefined, on inputs spread over +-2, +-64 and "
                        "+-1/64 and with NaN and infinities")
            continue
        found = OffIdentity(spread=half, nonfinite=nonfinite)
        module = model()
        probe_in = _copy(moved, device)
        audit = arithmetic_audit.ArithmeticAudit(protected=_spans(module, probe_in))
        probe = launch_counter.LaunchRecorder(module_name=recorder.module_name, audit=audit)
        poison(probe_in)
        where = (f"on inputs spread over +-{half:g}{' with NaN and infinities' if nonfinite else ''}, where the "
                 "operator is not the identity")
        try:
            with launch_counter.recording(probe):
                out = call(module, probe_in)
        except Exception as exc:  # noqa: BLE001 - a kernel right only on the given inputs
            found.note = f"{where}, it raises: {exc_summary(exc)}"[:400]
            return found
        if not _still_correct(out, ref, probe_in, spec, device):
            cmp = tolerance.compare_values(out, ref, spec.tolerance)
            found.note = f"{where}, its output is wrong: {cmp.reason or 'structure differs'}"[:400]
            return found
        del out
        if [la.kernel for la in audit.launches] != [la.kernel for la in first.launches]:
            found.note = f"{where}, it launches other kernels"
            return found
        found.computing = len(audit.computing())
        if not found.computing:
            found.note = f"{where}, its kernels still only move data"
            return found
        reach = _computed_reach(call, poison, model, recorder, audit, moved, ref, spec, device)
        if reach is None:
            found.note = f"{where}, the values its kernels compute do not reach the output"
            return found
        found.passed, found.reach = True, reach
        return found
    why.always_identity = True
    return why


def _audit_pass(call: Callable[[torch.nn.Module, list[Any]], Any], poison: Callable[[list[Any]], None],
                model: Callable[[], torch.nn.Module], recorder: launch_counter.LaunchRecorder,
                inputs0: list[Any], ref0: Any, spec: loading.LoadedSpec, device: torch.device | None,
                economy: arithmetic_audit.Economy | None) -> tuple[arithmetic_audit.ArithmeticAudit, bool | None]:
    """One forward with every own launch analysed (``economy``: until it has its evidence,
    replacing what it found computed). With ``economy``, whether its output is still correct
    (None: the forward raised); else None (the output is not needed)."""
    module = model()
    probe_in = _copy(inputs0, device)
    audit = arithmetic_audit.ArithmeticAudit(protected=_spans(module, probe_in), economy=economy)
    probe = launch_counter.LaunchRecorder(module_name=recorder.module_name, audit=audit)
    poison(probe_in)
    if economy is None:
        with launch_counter.recording(probe):
            call(module, probe_in)
        return audit, None  # the audit's snapshots are its own
    try:
        with launch_counter.recording(probe):
            out = call(module, probe_in)
    except Exception:  # noqa: BLE001 - decided by the full audit
        return audit, None
    return audit, _still_correct(out, ref0, probe_in, spec, device)


def _still_correct(out: Any, ref0: Any, inputs: list[Any], spec: loading.LoadedSpec,
                   device: torch.device | None) -> bool:
    structure_ok = not output_checks.check_structure(out, ref0, inputs, strict_strides=False,
                                                     device_type=_device_type(device))
    # Elements where eager is NaN or inf are excused: a correct candidate may differ from eager
    # there (tolerance.py, rule 4), and a library fallback that does must not pass as
    # dependent on its kernels for it.
    return structure_ok and tolerance.compare_values(out, ref0, spec.tolerance, excuse_reference_nan=True).ok


def _computed_reach(call: Callable[[torch.nn.Module, list[Any]], Any], poison: Callable[[list[Any]], None],
                    model: Callable[[], torch.nn.Module], recorder: launch_counter.LaunchRecorder,
                    audit: arithmetic_audit.ArithmeticAudit, inputs0: list[Any], ref0: Any,
                    spec: loading.LoadedSpec, device: torch.device | None) -> bool | str | None:
    """The counterfactual forward: what ``audit``'s computing launches wrote replaced by
    random values. True (or why) when the output is then wrong; None when still correct."""
    counter = arithmetic_audit.ArithmeticAudit.counterfactual(audit.launches)
    again = launch_counter.LaunchRecorder(module_name=recorder.module_name, audit=counter)
    cf_in = _copy(inputs0, device)
    poison(cf_in)
    try:
        with launch_counter.recording(again):
            out = call(model(), cf_in)
    except Exception:  # noqa: BLE001 - failing without its computed values means it needs them
        return "raises without them"
    return None if _still_correct(out, ref0, cf_in, spec, device) else True


def _summary(audit: arithmetic_audit.ArithmeticAudit) -> dict[str, Any]:
    analysed = [la for la in audit.launches if not (la.captured or la.skipped)]
    return {"launches": len(audit.launches), "analysed": len(analysed), "computing": len(audit.computing()),
            "moves_only": [la.describe() for la in analysed if not la.computes][:8]}


def _data_movement(reference: Callable[[list[Any]], Any] | None, analysed: list[arithmetic_audit.LaunchAudit],
                   inputs0: list[Any], device: torch.device | None, off: OffIdentity | None = None) -> str | None:
    """Why kernels that only move data are the operator (``data_movement``), or None: the
    reference itself only moves data (its ATen ops, or its output copied an input on every
    spread ``_off_identity`` tried: hardshrink with a threshold of 0), and every value the
    kernels copy comes from the forward's own inputs, parameters or buffers or from their
    own earlier writes, never from a tensor a library call produced (a library result
    copied through a kernel)."""
    writes = [w for la in analysed for w in la.writes]
    if reference is None or not writes or not all(w.moves_own_data for w in writes):
        return None
    probe_in = _copy(inputs0, device)
    ops = data_movement.reference_ops(lambda: reference(probe_in))
    if not data_movement.only_moves(ops):
        if off is not None and off.always_identity:
            return ("the reference's output copied an input on every input tried (the given ones, spread over "
                    "+-2, +-64 and +-1/64, with NaN and infinities); the candidate's kernels move the forward's "
                    "own inputs")
        return None
    return (f"the reference only moves data ({', '.join(sorted(ops))}); the candidate's kernels move the "
            "forward's own inputs, parameters or buffers")


def _library_share(call: Callable[[torch.nn.Module, list[Any]], Any], model: Callable[[], torch.nn.Module],
                   inputs0: list[Any], device_type: str, own: set[str], device: torch.device | None = None) -> str:
    """`` [library: 87% of the time; aten::mm x1, ...]`` for a rejection's reason."""
    probe_in = _copy(inputs0, device)
    module = model()
    frac, _, ops = diagnosis.library_time_fraction(lambda: call(module, probe_in), device_type, own)
    top = sorted(ops.items(), key=lambda kv: -kv[1])[:5]
    listed = ", ".join(f"{k} x{n}" for k, n in top) or "none seen"
    return f" [library calls: {listed}; {frac:.0%} of the forward's time]"


# glibc's dynamic mmap threshold never rises above this on 64-bit hosts (32 MiB): larger
# requests are always served by mmap.
MMAP_THRESHOLD_MAX = 32 * 2**20


def poison_allocator(device: torch.device, like: list[Any], output_sizes: set[int]) -> None:
    """Make fresh allocations hold NaN rather than a stale answer.

    CUDA: allocate NaN-filled blocks of the sizes about to be requested plus a large
    block, then free them: the caching allocator hands the same memory to the next
    ``torch.empty``. CPU: several NaN blocks per size, freed together, so malloc's LIFO
    bins serve the next requests of those sizes from NaN memory; allocations above
    glibc's mmap threshold come from fresh zeroed pages (no stale data, but zeros).
    Sizes: the tensors about to be passed plus every output size seen (``output_sizes``).
    """
    sizes = {t.numel() * t.element_size() for t in output_checks.leaves(like) if isinstance(t, torch.Tensor)}
    sizes |= output_sizes
    copies = 1
    if device.type == "cuda":
        sizes.add(64 * 1024 * 1024)
    else:
        copies = 8
        # Above glibc's largest mmap threshold every allocation is fresh zeroed pages, so NaN
        # blocks of that size poison nothing, and eight of them were 8x an input set at once.
        sizes = {n for n in sizes if n < MMAP_THRESHOLD_MAX}
    bufs = []
    for nbytes in sorted(sizes):
        n = max(1, nbytes // 4)
        for _ in range(copies):
            bufs.append(torch.full((n,), float("nan"), dtype=torch.float32, device=device))
    del bufs


def exc_summary(exc: BaseException, limit: int = 6) -> str:
    """``Type: message`` plus the candidate's own frames (file paths are the worker's, useless
    to a reader; line numbers inside candidate.py are what a synthesizer can act on)."""
    head = f"{type(exc).__name__}: {exc}"[:600]
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "_ke_candidate_" in (f.filename or "")]
    if not frames:
        return head
    where = "; ".join(f"candidate.py line {f.lineno} in {f.name}: {(f.line or '').strip()[:80]}"
                      for f in frames[-limit:])
    return f"{head} [at {where}]"


def is_compile_error(exc: BaseException) -> bool:
    names = {c.__name__ for c in type(exc).__mro__}
    return bool(names & {"CompilationError", "CompileTimeAssertionFailure", "UnsupportedLanguageConstruct"})
