"""Stage ``library_profile``: the share of the candidate's time spent in torch library
calls, and the torch ops it calls per forward (fallback nodes, decoys: for the search)."""

from __future__ import annotations

from .. import diagnosis, memory
from .context import Evidence, JobContext

NAME = "library_profile"


def run(ctx: JobContext) -> Evidence:
    ev, v, dev, diag = ctx.ev, ctx.v, ctx.device, ctx.diag
    assert diag is not None
    ev._step_aside()
    if not ctx.opts.profile_library_time:
        return {}
    cand_model = ctx.cand_model
    probe_in = memory.clone_to(ctx.inputs0, dev)  # copied outside the profiled region
    frac, per_kernel, ops = diagnosis.library_time_fraction(
        lambda: ev._call(cand_model, probe_in), dev.type, set(ctx.kernel_launches), ev.backend)
    diag.library_time_fraction = frac
    v.evidence["library_ops"] = ops
    v.evidence["library_share"] = diagnosis.library_share(ops, ctx.heavy_ops)
    for ki in diag.kernels:
        ki.time_ms = sum(t for name, t in per_kernel.items() if name.startswith(ki.name))
    if frac > 0.5:
        v.warnings.append(f"{frac:.0%} of the candidate's time is spent in torch library calls")
    ev._check_state(ctx.before)
    return {}
