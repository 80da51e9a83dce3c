"""Stage ``flops``: the work any implementation must do, for the diagnosis: minimum
traffic (inputs, weights and outputs once) and the reference's FLOPs (counted once per
spec and input shapes)."""

from __future__ import annotations

import torch

from kernelevolve.ports.verdict import Diagnosis, KernelInfo

from .. import diagnosis, loading, memory, output_checks
from ..global_state import set_precision_flags
from .context import Evidence, JobContext

NAME = "flops"


def run(ctx: JobContext) -> Evidence:
    ev, dev, ref_model, inputs0 = ctx.ev, ctx.device, ctx.ref_model, ctx.inputs0
    # Minimum traffic of any implementation: read inputs and weights once, write outputs once.
    weights = list(ref_model.parameters()) + list(ref_model.buffers())
    ctx.bytes_moved = (diagnosis.tensor_bytes(inputs0) + diagnosis.tensor_bytes(weights)
                       + diagnosis.tensor_bytes(ctx.ref_out0))
    ctx.ref_out0 = None  # the probes were its last readers
    fkey = (ctx.spec.sha, str([tuple(t.shape) for t in output_checks.leaves(inputs0) if isinstance(t, torch.Tensor)]))
    if fkey not in ev.flops_cache:
        ev.flops_cache[fkey] = diagnosis.count_work(lambda: ev._call(ref_model, memory.clone_to(inputs0, dev)))
        set_precision_flags()
    ctx.flops, ctx.heavy_ops = ev.flops_cache[fkey]
    diag = ctx.diag = Diagnosis(bytes_moved=float(ctx.bytes_moved), flops=ctx.flops)
    meta = ctx.kernel_meta
    diag.kernels = [KernelInfo(name=k, launches=n, registers=meta[k][0], shared_bytes=meta[k][1], spills=meta[k][2])
                    for k, n in ctx.kernel_launches.items()]
    ctx.v.evidence["output_shapes"] = ctx.out_shapes
    moved = loading.state_reassigned(ref_model)
    if moved:
        ctx.v.warnings.append(f"the reference reassigns {', '.join('self.' + m for m in moved)} in its forward: "
                              "every call was judged from the state __init__ built (the candidate does not "
                              "carry that state from call to call)")
    # The shapes judged (a spec shrunk for the CPU interpreter is judged at its smaller ones).
    ctx.v.evidence["input_shapes"] = [list(t.shape) for t in output_checks.leaves(inputs0)
                                      if isinstance(t, torch.Tensor)]
    return {}
