"""The prompt an answerer of a synthesis request gets: the one place that words it, so it
can later be the same builder an LLM synthesizer uses."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from kernelevolve.errors import KernelEvolveError
from kernelevolve.ports.knowledge import KnowledgeReader
from kernelevolve.ports.synthesis import ProposalRequest

log = logging.getLogger(__name__)

_FORMAT = """\
## What to write

Reply with one whole Python module (torch + triton only, no other imports) that defines
`class ModelNew(torch.nn.Module)`: a drop-in replacement for `Model`. It is built with the
same arguments as `Model` (`ModelNew(*get_init_inputs())`), must return the same outputs as
`Model.forward` for the inputs of `get_inputs()` within floating-point tolerance, and should
do its work in Triton kernels (`@triton.jit`) launched from `forward`. Do not call the
reference `Model` or fall back to the PyTorch operator being replaced. The evaluator checks
correctness on fresh inputs and times it against eager PyTorch.
"""


def _describe(value: Any) -> str:
    import torch

    if isinstance(value, torch.Tensor):
        return f"Tensor(shape={tuple(value.shape)}, dtype={str(value.dtype).removeprefix('torch.')})"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_describe(v) for v in value) + "]"
    return f"{type(value).__name__}({value!r})"


@functools.lru_cache(maxsize=64)
def describe_inputs(spec_source: str, spec_name: str) -> str:
    """The shapes and dtypes of ``get_inputs()`` and the ``get_init_inputs()`` values, one
    line each; a spec that cannot run here says so instead (the evaluator is the judge)."""
    namespace: dict[str, Any] = {"__name__": f"ke_agent_spec_{spec_name}"}
    try:
        exec(compile(spec_source, f"<spec {spec_name}>", "exec"), namespace)  # noqa: S102 - the user's own spec
        inputs = namespace["get_inputs"]()
        init = namespace["get_init_inputs"]()
    except Exception as exc:  # noqa: BLE001 - a description only
        log.info("spec inputs not described", extra={"spec": spec_name, "error": repr(exc)})
        return f"(the spec's inputs could not be built here: {exc!r})"
    lines = [f"- forward input {i}: {_describe(v)}" for i, v in enumerate(inputs)]
    lines.append(f"- init inputs: {_describe(list(init))}")
    return "\n".join(lines)


def _parent_section(request: ProposalRequest) -> str:
    parent = request.parent
    if parent is None:
        return ("## Starting point\n\nNo parent: write a first correct Triton implementation of the whole "
                "operator.\n")
    r = parent.result
    facts = [f"- candidate: {parent.candidate_id} (transformation {parent.transformation.name} "
             f"{dict(parent.transformation.params) or ''})".rstrip()]
    if r:
        facts.append(f"- verdict: {r.get('status', 'unknown')}")
        if r.get("reason"):
            facts.append(f"- reason: {r['reason']}")
        if r.get("speedup"):
            facts.append(f"- speedup over eager PyTorch: {float(r['speedup']):.3f}x")
        if r.get("candidate_ms") and r.get("baseline_ms"):
            facts.append(f"- timing: {float(r['candidate_ms']):.4g} ms, eager PyTorch {float(r['baseline_ms']):.4g} ms")
        if r.get("bound") and r.get("bound") != "unspecified":
            facts.append(f"- diagnosis: {r['bound']}-bound, {float(r.get('roofline_fraction') or 0):.1%} of roofline")
        facts.extend(f"- note: {n}" for n in r.get("notes") or [])
    else:
        facts.append("- not evaluated yet")
    tried = ", ".join(f"{t.name}{dict(t.params) or ''}" for t in request.tried) or "none"
    return ("## Parent to improve\n\n" + "\n".join(facts) + f"\n- children already tried from it: {tried}\n\n"
            "Improve on it: make it faster while keeping it correct (or fix it, when its verdict is not "
            "correct).\n\n```python\n" + parent.source.rstrip() + "\n```\n")


def build_prompt(request: ProposalRequest) -> str:
    return (f"# Write a Triton kernel for `{request.spec_name}` (hardware: {request.hardware_kind})\n\n"
            "## The operator (reference PyTorch spec)\n\n```python\n" + request.spec_source.rstrip() + "\n```\n\n"
            "Inputs:\n" + describe_inputs(request.spec_source, request.spec_name) + "\n\n"
            + _parent_section(request) + "\n" + _FORMAT)


def llm_prompt(reader: KnowledgeReader, token_budget: int = 6000) -> Callable[[ProposalRequest], str]:
    """The LLM synthesizer's own prompt (system and user message, with the documents and
    skills retrieved for the request), so an agent is asked exactly what a model would be;
    the spec's input shapes follow, since an agent may want to run it."""
    from ke_synthesizer.llm.prompt import PromptContext, gather_context
    from ke_synthesizer.llm.prompt import build_prompt as build_llm_prompt

    def build(request: ProposalRequest) -> str:
        try:
            context = gather_context(request, reader)
        except KernelEvolveError as exc:  # an agent can work without the knowledge base
            log.warning("no knowledge for the agent's prompt", extra={"session_id": request.session_id,
                                                                      "error": str(exc)})
            context = PromptContext()
        prompt = build_llm_prompt(request, context, token_budget=token_budget)
        return (prompt.system.rstrip() + "\n\n" + prompt.user.rstrip() + "\n\n## Inputs of the spec\n\n"
                + describe_inputs(request.spec_source, request.spec_name) + "\n")

    return build
