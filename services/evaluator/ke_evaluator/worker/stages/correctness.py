"""Stage ``correctness`` (phase ``run``): trial 0 (already called by the compile stage),
the other trials, the extra shape sets; per set: inputs unchanged, structure, values
(tolerance.py), and on trial 0 the checksum and determinism checks (candidate ->
reference -> candidate)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import torch

from .. import defenses, memory, output_checks, tolerance
from ..defenses import Outcome
from . import checks
from .context import Evidence, JobContext

NAME = "correctness"


def _copy_into(buffers: list[Any], values: list[Any]) -> None:
    """New values into the same buffers (a function: no loop variable keeps a set alive)."""
    for dst, src in zip(output_checks.leaves(buffers), output_checks.leaves(values), strict=False):
        if isinstance(dst, torch.Tensor):
            dst.copy_(src)


def _given(inputs: list[Any]) -> list[Any]:
    return inputs


def _same_shapes(a: list[Any], b: list[Any]) -> bool:
    la, lb = output_checks.leaves(a), output_checks.leaves(b)
    if len(la) != len(lb):
        return False
    for x, y in zip(la, lb, strict=False):
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return False
        if isinstance(x, torch.Tensor) and (x.shape != y.shape or x.dtype != y.dtype):
            return False
    return True


def trial_sets(ctx: JobContext) -> tuple[list[tuple[str, Callable[[], list[Any]]]], set[str]]:
    """(label, maker) of every set in order, and the labels of per-job (never cached) ones.
    Each set is made when its trial starts, not all up front: on the device one trial's
    set is live at a time (plus trial 0's), not all of them."""
    opts, spec, refs, dev = ctx.opts, ctx.spec, ctx.refs, ctx.device
    seed, fresh_seed = ctx.seed, ctx.fresh_seed
    sets: list[tuple[str, Callable[[], list[Any]]]] = [("trial 0", lambda: ctx.inputs0)]
    fresh: set[str] = set()  # per-job values: never cached
    for i in range(1, max(1, opts.correctness_trials)):
        if i == 1 and opts.seed_shared:
            sets.append(("trial 1", partial(spec.inputs, fresh_seed + 1001, dev)))
            fresh.add("trial 1")
        else:
            sets.append((f"trial {i}", partial(refs.inputs, f"trial {i}", partial(spec.inputs, seed + 1000 + i, dev))))
    if opts.seed_shared:
        # Per-job values where a check hangs on one set (hard-coded shapes, the error
        # budget below): an answer stored by an earlier job of the spec cannot pass them.
        extras = [(f"extra shape set {j}", x) for j, x in enumerate(spec.extra_inputs(fresh_seed + 5000, dev))]
        fresh |= {label for label, _ in extras}
        refs.stats["fresh_values"] = "trial 1, the extra shape sets, the timing sets (per-job secret seed)"
    else:
        extras = refs.extras(lambda: spec.extra_inputs(seed + 5000, dev))
    sets += [(label, partial(_given, x)) for label, x in extras]
    return sets, fresh


def run(ctx: JobContext) -> Evidence:
    ev, opts, v, dev, spec, refs = ctx.ev, ctx.opts, ctx.v, ctx.device, ctx.spec, ctx.refs
    ref_model, seed = ctx.ref_model, ctx.seed
    ctx.phase("run")
    sets, fresh = trial_sets(ctx)
    corr = ctx.corr
    # Memory (README "Memory"): one input set and its outputs on the device at a time.
    # Trial 0's buffers wait for trial 1 (x.copy_(new)); every other copy of a set, the
    # candidate's output and the reference's are dropped before the next set is made;
    # large references and trial 0's inputs wait on the host (memory.to_host).
    first_in, first_out = ctx.first_in, ctx.first_out
    ctx.first_in = ctx.first_out = None
    persistent: list[Any] | None = first_in  # trial 1 reuses trial 0's buffers
    inputs: Any = None
    for idx, (label, make_inputs) in enumerate(sets):
        ev._step_aside()
        inputs = make_inputs()
        if idx == 0:
            cand_in, out = first_in, first_out
            del first_in, first_out
        elif idx == 1 and persistent is not None and _same_shapes(persistent, inputs):
            _copy_into(persistent, inputs)
            cand_in = persistent
            label += " (same buffers as trial 0, new values)"
            out = ctx.run_candidate(cand_in, label)
        else:
            cand_in = output_checks.clone_tree(inputs)
            out = ctx.run_candidate(cand_in, label)
        if idx >= 1:
            persistent = None
        # The candidate's copy of the set is done with: its storage spans are enough for
        # the alias check (an output aliasing it keeps that storage alive).
        cand_spans = checks.after_call(ctx, label, inputs, cand_in)
        del cand_in

        reference = partial(checks.eager_reference, ctx, inputs, label)

        key = label.split(" (")[0]
        if key in fresh or idx == 0:  # trial 0: the reference runs after the candidate, as always
            ref, ref_aliases = reference()
            if idx == 0:
                refs.check_recomputed(key, ref, ref_aliases, spec.tolerance)
                ev._mem.note(inputs, ref_model, ref)
        else:
            ref, ref_aliases = refs.reference(key, reference)
        ev._note_output_sizes(ref)
        bad = output_checks.check_structure(out, ref, cand_spans, strict_strides=opts.strict_strides,
                                            allow_input_alias=ref_aliases, device_type=dev.type)
        if bad:
            raise Outcome("incorrect", f"{bad} ({label})")
        if not opts.strict_strides:
            loose = output_checks.check_structure(out, ref, cand_spans, strict_strides=True, device_type=dev.type)
            if loose and loose not in v.warnings:
                v.warnings.append(loose)
        if isinstance(ref, torch.Tensor) and not ref.is_contiguous() and out.stride() != ref.stride():
            v.warnings.append("reference output is non-contiguous; candidate returned a contiguous tensor")
        # The policy (eager bound, outliers judged against float64, error budget):
        # tolerance.py. The float64 reference runs only where the policy needs it.
        budget_set = idx == 0 or key == "extra shape set 0" or (opts.seed_shared and key == "trial 1")
        ref64 = partial(ev._float64_reference, ref_model, inputs)
        if key not in fresh:
            ref64 = partial(refs.float64, key, ref64)
        factor = (None if spec.error_budget is False else opts.error_budget_factor if spec.error_budget is None
                  else float(spec.error_budget))
        if factor is None:
            v.evidence["error_budget"] = "off: the spec sets KE_ERROR_BUDGET = False (KE_TOLERANCE binds)"
        cmp = tolerance.compare(out, ref, spec.tolerance, ref64=ref64, factor=factor, budget=budget_set)
        del ref64  # the float64 reference (host) goes with its comparison
        tolerance.record(corr, label, cmp)
        if ev._reference_draws:
            v.evidence["reference_draws_random"] = ("every forward call (reference, candidate) starts from "
                                                    "the same generator state; the float64 reference "
                                                    "replays eager's draws")
        v.warnings += [n for n in dict.fromkeys(ev._float64_notes) if n not in v.warnings]
        if cmp.reference_nan:
            # Rule 4: say it on the verdict (the first set's note; every set's count).
            if "reference_nan_defects" not in v.evidence:
                v.warnings += [f"{note} ({label})" for note in cmp.notes]
            v.evidence.setdefault("reference_nan_defects", {})[key] = cmp.reference_nan
        v.correctness = corr
        if budget_set:
            budget_key = f"seed {seed + 1000}" if idx == 0 else f"extra set 0 seed {seed + 5000}"
            if opts.seed_shared:  # the shared seed is not reported
                budget_key = "extra set 0" if key.startswith("extra") else key
            defenses.budget_evidence(v, budget_key, cmp)
        if not cmp.ok:
            raise Outcome("incorrect", f"{cmp.reason} ({label})")
        if idx == 0:
            ctx.ref_out0 = ref
            ctx.out_shapes = [tuple(t.shape) for t in output_checks.leaves(ref) if isinstance(t, torch.Tensor)]
            # Trial 0's inputs serve the probes after the loop (each gets its own copy):
            # a large set waits on the host meanwhile. The repeat's copy comes from the
            # candidate's own buffers (kept for trial 1, equal to the set: checked above).
            ctx.inputs0 = inputs = memory.to_host(ctx.inputs0, ev.backend)
            assert persistent is not None
            defenses.crc_and_determinism(ctx.run_candidate, persistent, out, ref, spec, v, cmp.reference_nan,
                                         cmp.outliers)
        # Nothing of this set stays on the device while the next one is made.
        del out, ref, cmp, reference
        inputs = None
    v.evidence["kernel_launches"] = ctx.kernel_launches
    v.evidence["correctness_sets"] = len(sets)
    return {}
