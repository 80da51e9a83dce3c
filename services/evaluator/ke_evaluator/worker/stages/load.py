"""Stage ``load``: the spec, the job's seeds, the reference model, its references (cached
per spec and seed) and, on a spec's first job, the reference's own cost (phase
``measure``), all before the candidate is imported."""

from __future__ import annotations

import os
import random

from .. import loading, precision
from ..defenses import Outcome, exc_summary
from ..global_state import snapshot
from .context import Evidence, JobContext, clock

NAME = "load"


def run(ctx: JobContext) -> Evidence:
    ev, opts, v, dev = ctx.ev, ctx.opts, ctx.v, ctx.device
    ctx.jobdir = os.path.join(ev.scratch, "jobs")
    spec = ctx.spec = precision.import_spec(
        lambda: loading.load_spec(ctx.job["spec_source"], ctx.job.get("spec_name", ""), ctx.jobdir, ev.spec_cache),
        loading.source_sha(ctx.job["spec_source"]))
    cacheable = opts.seed is not None
    if opts.seed is None:
        opts.seed = random.SystemRandom().randrange(1 << 30)
    # Per-job secret: with shared seeds, trial 1 and the timing sets take values that no
    # earlier job has seen (an answer stored by an earlier candidate cannot pass them).
    ctx.fresh_seed = random.SystemRandom().randrange(1 << 30) if opts.seed_shared else opts.seed
    if opts.seed_shared:
        v.evidence["seed_source"], v.evidence["seed_id"] = "shared", opts.seed_id
    else:
        v.evidence["seed_source"] = "fixed" if cacheable else "random"
        v.evidence["seed"] = opts.seed
    ctx.seed = opts.seed
    ev._forward_seed = loading.forward_seed(opts.seed)
    ev._reference_draws = False
    ev._float64_notes = []
    ctx.phase("measure" if opts.measure_reference_cost else "compile")
    ev._hold("shared")
    v.precision = precision.enter_job(opts.precision, spec.sha)
    t_build = clock()
    ctx.init = spec.init_inputs()
    ctx.ref_model = loading.build_model(spec.Model, ctx.init, opts.seed, dev)
    build_s = clock() - t_build
    ctx.refs = ev._refs = ev._references(opts, spec, ctx.init, cacheable)
    if opts.measure_reference_cost:
        try:
            cost = ev._measure_reference(spec, ctx.ref_model, opts.seed, build_s)
        except MemoryError:
            raise
        except Exception as exc:  # noqa: BLE001 - the spec's fault, said so (a device OOM stays recognisable)
            raise Outcome("runtime_error", "the reference raised while its cost was measured, before any "
                                           f"candidate code ran: {exc_summary(exc)}") from None
        ctx.lap("measure")
        ctx.phase("compile", cost)
    ctx.before = ev._before = snapshot()
    return {}
