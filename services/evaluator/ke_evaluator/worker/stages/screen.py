"""Stage ``screen`` (tier screen, phase ``run``): trial 0's output, already made by the
compile stage's first call, against the eager reference of that set (the worker's cached
output when it has one: ``reference_cache``), by the same tolerance rule as the full
protocol (outliers judged against float64 when there are any; no error budget). The
defenses that must see every candidate ran on that call (``JobContext.run_candidate``:
poisoned allocator, launch accounting, process state) and the static policy before it.

What the screen does not do (the full protocol does): other input sets (new values in the
same buffers, extra shapes), the float64 error budget, the determinism and stale-memory
repeat, the kernel-dependency probe and the arithmetic audit. So a screened verdict is
provisional: a replayed or shape-specific answer passes it and fails its full verdict."""

from __future__ import annotations

from functools import partial

import torch

from .. import output_checks, tolerance
from ..defenses import Outcome
from . import checks
from .context import Evidence, JobContext

NAME = "screen"
LABEL = "trial 0"


def run(ctx: JobContext) -> Evidence:
    ev, opts, v, dev, spec, refs = ctx.ev, ctx.opts, ctx.v, ctx.device, ctx.spec, ctx.refs
    ref_model = ctx.ref_model
    ctx.phase("run")
    inputs, cand_in, out = ctx.inputs0, ctx.first_in, ctx.first_out
    ctx.first_in = ctx.first_out = None
    cand_spans = checks.after_call(ctx, LABEL, inputs, cand_in)
    del cand_in

    # The cached eager output when the worker has one (computed by an earlier job of this
    # spec and seed, checksummed); else the reference runs now, after the candidate.
    ref, ref_aliases = refs.reference(LABEL, partial(checks.eager_reference, ctx, inputs, LABEL))
    ev._mem.note(inputs, ref_model, ref)
    ev._note_output_sizes(ref)
    bad = output_checks.check_structure(out, ref, cand_spans, strict_strides=opts.strict_strides,
                                        allow_input_alias=ref_aliases, device_type=dev.type)
    if bad:
        raise Outcome("incorrect", f"{bad} ({LABEL})")
    ref64 = partial(refs.float64, LABEL, partial(ev._float64_reference, ref_model, inputs))
    factor = (None if spec.error_budget is False else opts.error_budget_factor if spec.error_budget is None
              else float(spec.error_budget))
    cmp = tolerance.compare(out, ref, spec.tolerance, ref64=ref64, factor=factor, budget=False)
    del ref64
    tolerance.record(ctx.corr, LABEL, cmp)
    v.correctness = ctx.corr
    v.warnings += [n for n in dict.fromkeys(ev._float64_notes) if n not in v.warnings]
    if not cmp.ok:
        raise Outcome("incorrect", f"{cmp.reason} ({LABEL})")
    ctx.ref_out0 = ref
    ctx.out_shapes = [tuple(t.shape) for t in output_checks.leaves(ref) if isinstance(t, torch.Tensor)]
    v.evidence["kernel_launches"] = ctx.kernel_launches
    v.evidence["correctness_sets"] = 1
    return {}
