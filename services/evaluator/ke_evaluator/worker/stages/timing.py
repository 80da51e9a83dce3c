"""Stage ``timing``: the candidate timed against the eager reference (and torch.compile
when asked), interleaved, on fresh values every round, with the device lock EXCLUSIVE
(``Evaluator._time``)."""

from __future__ import annotations

from .context import Evidence, JobContext

NAME = "timing"


def run(ctx: JobContext) -> Evidence:
    ev = ctx.ev
    if ctx.opts.time_candidates:
        ev._time(ctx.spec, ctx.ref_model, ctx.cand_model, ctx.opts, ctx.v, ctx.fresh_seed)  # takes the lock EXCLUSIVE
        ev._check_state(ctx.before)
    ev._hold(None)
    return {}
