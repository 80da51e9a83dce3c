"""Stage ``diagnosis``: what bounds the candidate (memory, compute, launches), its
roofline fraction (a timing above the roofline is flagged for audit), and the verdict's
reason."""

from __future__ import annotations

import torch

from .. import diagnosis, output_checks
from .context import Evidence, JobContext

NAME = "diagnosis"


def run(ctx: JobContext) -> Evidence:
    ev, v, dev, diag, corr = ctx.ev, ctx.v, ctx.device, ctx.diag, ctx.corr
    assert diag is not None
    ct = v.candidate_timing
    median = ct.median_ms if ct else 0.0
    cls_ = diagnosis.classify(bytes_moved=ctx.bytes_moved, flops=ctx.flops, median_ms=median, device_type=dev.type,
                              device_ms=ct.device_median_ms if ct else 0.0,
                              host_ms=ct.host_median_ms if ct else 0.0,
                              device_name=ev.fingerprint.get("device_name", ""), backend=ev.backend,
                              uses_tensor_cores=any(t.dtype in (torch.float16, torch.bfloat16)
                                                    for t in output_checks.leaves(ctx.inputs0)
                                                    if isinstance(t, torch.Tensor)))
    for k, val in cls_.items():
        if k == "notes":
            diag.notes.extend(val)
        else:
            setattr(diag, k, val)
    v.diagnosis = diag
    if diag.roofline_fraction > 1.05:
        v.warnings.append(f"timing implies {diag.roofline_fraction:.2f}x the device roofline: flagged for audit")
    v.status = "correct"
    screened = "screened (provisional until its full verdict): " if ctx.opts.tier == "screen" else ""
    v.reason = (f"{screened}matches the reference on {corr.trials} input sets "
                f"(max abs error {corr.max_abs_error:.3g}, atol={corr.atol:g}, rtol={corr.rtol:g}"
                + (f"; error vs float64 {corr.error_ratio:.2g}x the reference's own"
                   if corr.error_ratio is not None and "error vs float64" not in corr.bound else "")
                + f"; bound: {corr.bound})")
    return {}
