"""Stage ``integrity``: the output must depend on the candidate's own kernels (launches
suppressed one by one) and their arithmetic must be what the output needs (the audit);
process state as it was."""

from __future__ import annotations

from functools import partial

import torch

from .. import arithmetic_audit, defenses
from ..defenses import Outcome
from .context import Evidence, JobContext

NAME = "integrity"


def run(ctx: JobContext) -> Evidence:
    ev, opts, v, dev = ctx.ev, ctx.opts, ctx.v, ctx.device
    ev._step_aside()
    graph_seen = ctx.graph_seen
    if graph_seen[0]:
        v.evidence["cuda_graph"] = {"replays": graph_seen[0], "replayed_launches": graph_seen[1]}

    def probe_model() -> torch.nn.Module:
        # calls that replay a CUDA graph launch nothing: a fresh instance captures again,
        # so that its kernels launch (and can be suppressed, audited) on the way
        return (defenses.fresh_model(ctx.cls, ctx.init, ctx.seed, dev, ctx.ref_model) if graph_seen[0]
                else ctx.cand_model)

    if opts.check_kernel_dependency:
        try:
            defenses.kernel_dependency(ev._call, ev.poison, probe_model(), ctx.recorder, ctx.inputs0, ctx.ref_out0,
                                       ctx.spec, v, device=dev)
            defenses.kernel_arithmetic(ev._call, ev.poison, probe_model, ctx.recorder, ctx.inputs0, ctx.ref_out0,
                                       ctx.spec, dev.type, v, device=dev,
                                       economy=arithmetic_audit.Economy() if opts.audit_economy else None,
                                       reference=partial(ev._reference_on, ctx.ref_model))
        except Outcome:
            ctx.lap(NAME)  # what deciding a rejection cost
            raise

    ev._check_state(ctx.before)
    return {}
