"""Checks the correctness and screen stages share: after a candidate call (process state,
the cached tensors, the inputs) and the eager reference of one input set."""

from __future__ import annotations

from typing import Any

import torch

from .. import memory, output_checks, tolerance
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
        _updated_as_the_reference_does(ctx, label, inputs, cand_in, mutated)
    return output_checks.spans(cand_in)


def _updated_as_the_reference_does(ctx: JobContext, label: str, inputs: list[Any], cand_in: list[Any],
                                   mutated: str) -> None:
    """A candidate that changed its inputs is right only where the reference changes them
    too, to the same values (``F.batch_norm(training=True)`` updates the running statistics
    it is given): the reference runs once more on a copy of the set to say. Before, any
    change was "modified in place by the candidate", so a batch norm kernel that updated the
    statistics as torch does was judged incorrect and one that did not was judged correct."""
    ev = ctx.ev
    expected = output_checks.clone_tree(inputs)
    ev._call(ctx.ref_model, expected)
    set_precision_flags()
    if not output_checks.inputs_unchanged(inputs, expected):
        raise Outcome("incorrect", f"{mutated} ({label})")
    for i, (got, want) in enumerate(zip(cand_in, expected, strict=False)):
        if isinstance(want, torch.Tensor):
            cmp = tolerance.compare_values(got, want, ctx.spec.tolerance)
            if not cmp.ok:
                raise Outcome("incorrect", f"input {i} is updated in place by the reference; the candidate's "
                                           f"update differs: {cmp.reason} ({label})")
    ctx.inputs_updated.add(label.split(" (")[0])
    ctx.v.evidence["inputs_updated_in_place"] = "as the reference updates them (compared after every call)"


def reference_updates(ctx: JobContext, label: str, inputs: list[Any], ref_in: list[Any]) -> None:
    """The reference changed its copy of the set: the candidate must have changed its own
    alike (``_updated_as_the_reference_does`` checked the values)."""
    changed = output_checks.inputs_unchanged(inputs, ref_in)
    if changed and label.split(" (")[0] not in ctx.inputs_updated:
        which = changed.replace("the candidate", "the reference")
        raise Outcome("incorrect", f"the reference updates its inputs in place ({which}); the candidate leaves "
                                   f"them unchanged ({label})")


def eager_reference(ctx: JobContext, inputs: list[Any], label: str | None = None) -> tuple[Any, bool]:
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
    if label is not None:
        reference_updates(ctx, label, inputs, ref_in)
    return (out_ref if aliases else memory.to_host(out_ref, ev.backend)), aliases
