"""Stage ``compile``: import the candidate, construct it (weights copied from the
reference), compile its kernels ahead (``precompile``) and make its first call on trial 0's
set (Triton's JIT compile happens there)."""

from __future__ import annotations

import os

import torch

from .. import launch_counter, loading, output_checks
from ..defenses import Outcome, exc_summary
from .context import Evidence, JobContext

NAME = "compile"


def run(ctx: JobContext) -> Evidence:
    ev, opts, v, dev, spec = ctx.ev, ctx.opts, ctx.v, ctx.device, ctx.spec
    mod_name = ctx.mod_name = f"_ke_candidate_{os.getpid()}_{ev.counter}"
    try:
        mod = loading.import_source(ctx.job["candidate_source"], mod_name, ctx.jobdir)
    except SyntaxError as exc:
        raise Outcome("compile_error", f"syntax error at line {exc.lineno}: {exc.msg}") from None
    except Exception as exc:  # noqa: BLE001
        raise Outcome("compile_error", f"candidate module raised on import: {exc_summary(exc)}") from None
    cls = getattr(mod, "ModelNew", None)
    if cls is None:
        raise Outcome("compile_error", "candidate does not define ModelNew")
    if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
        raise Outcome("compile_error", "ModelNew is not a torch.nn.Module subclass")
    spec_mod = spec.module.__name__
    if issubclass(cls, spec.Model) or any(getattr(c, "__module__", "") == spec_mod for c in cls.__mro__):
        raise Outcome("rejected", "ModelNew inherits from the reference Model")
    ctx.cls = cls
    try:
        ctx.cand_model = loading.build_model(cls, ctx.init, ctx.seed, dev)
    except Exception as exc:  # noqa: BLE001
        raise Outcome("compile_error", f"ModelNew(*get_init_inputs()) raised: {exc_summary(exc)}") from None
    v.evidence["parameters"] = loading.copy_parameters(ctx.ref_model, ctx.cand_model)

    recorder = ctx.recorder = launch_counter.LaunchRecorder(module_name=mod_name)
    seed = ctx.seed
    ctx.inputs0 = ctx.refs.inputs("trial 0", lambda: spec.inputs(seed + 1000, dev))
    # the candidate's kernels compiled side by side into Triton's cache, from a second
    # import run on fake tensors; the first call below is still what is judged
    v.evidence["precompile"] = ev._precompile(opts, ctx.job["candidate_source"], f"{mod_name}_dry", ctx.jobdir,
                                              ctx.init, ctx.inputs0)
    ctx.first_in = output_checks.clone_tree(ctx.inputs0)
    ctx.first_out = ctx.run_candidate(ctx.first_in, "first call")
    ctx.kernel_launches = {k: s.launches for k, s in recorder.own.items()}
    ctx.kernel_meta = {k: (s.registers, s.shared_bytes, s.spills) for k, s in recorder.own.items()}
    return {}
