"""Checks the correctness and screen stages share: after a candidate call (process state,
the cached tensors, the inputs) and the eager reference of one input set."""

from __future__ import annotations

from typing import Any

from .. import memory, output_checks
from ..defenses import Outcome
from ..global_state import set_precision_flags
from .context import JobContext


def after_call(ctx: JobContext, label: str, inputs: list[Any], cand_in: list[Any]) -> list[Any]:
    """Process state as it was, the evaluator's cached tensors unchanged, the candidate's
    copy of the set unchanged; returns that copy's storage spans (enough for the alias
    check once the copy is dropped)."""
    ctx.ev._check_state(ctx.before)
    if not ctx.refs.unchanged(label.split(" (")[0]):
        ctx.refs.invalidate()
        raise Outcome("rejected", f"the evaluator's cached inputs or reference changed while the "
                                  f"candidate ran (writes outside its own tensors?) ({label})")
    mutated = output_checks.inputs_unchanged(inputs, cand_in)
    if mutated:
        raise Outcome("incorrect", f"{mutated} ({label})")
    return output_checks.spans(cand_in)


def eager_reference(ctx: JobContext, inputs: list[Any]) -> tuple[Any, bool]:
    """(the reference's output on a copy of ``inputs``, whether it aliases that copy). A view
    of its own input stays as it is; any other large output waits on the host (compared
    chunk by chunk from there)."""
    ev = ctx.ev
    ref_in = output_checks.clone_tree(inputs)
    with ev._mem.reference():
        out_ref = ev._call(ctx.ref_model, ref_in)
    ev._reference_draws |= ev._last_call_drew
    set_precision_flags()
    aliases = output_checks.aliases_any(out_ref, ref_in)
    return (out_ref if aliases else memory.to_host(out_ref, ev.backend)), aliases
