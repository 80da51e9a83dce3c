"""Prompt building: a ``ProposalRequest`` plus retrieved context → the text a model sees.

Public surface (also used by the ``agent`` synthesizer, whose external agent answers the
same prompts): ``gather_context`` reads documents and skills through a ``KnowledgeReader``,
``build_prompt`` renders the versioned template for the request's kind (draft, expansion
or repair) with the evidence that fits ``token_budget`` tokens.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from string import Template
from typing import Any

from ke_synthesizer.llm.context import Section, fit
from ke_synthesizer.llm.tokens import count_tokens
from kernelevolve.ports.knowledge import KnowledgeReader, RetrievedDoc, SkillHint
from kernelevolve.ports.synthesis import ProposalRequest

TEMPLATE_VERSION = "v1"
FAILED = frozenset({"compile_error", "runtime_error", "incorrect", "crashed", "timeout"})


@dataclass(frozen=True)
class PromptContext:
    """What the knowledge base offers for one request."""

    docs: tuple[RetrievedDoc, ...] = ()
    skills: tuple[SkillHint, ...] = ()
    hardware_facts: str = ""


@dataclass(frozen=True)
class Prompt:
    kind: str  # "draft" | "expansion" | "repair"
    template: str  # e.g. "expansion.v1": goes with every candidate
    system: str
    user: str
    tokens: int
    doc_ids: tuple[str, ...] = ()
    skill_ids: tuple[str, ...] = ()
    dropped: tuple[str, ...] = field(default_factory=tuple)

    def messages(self) -> list[dict[str, str]]:
        return [{"role": "system", "content": self.system}, {"role": "user", "content": self.user}]


@cache
def _template(name: str) -> str:
    return resources.files("ke_synthesizer.llm").joinpath("templates", f"{name}.md").read_text()


def prompt_kind(request: ProposalRequest) -> str:
    if request.parent is None:
        return "draft"
    if request.repair_attempt > 0 or str(request.parent.result.get("status", "")) in FAILED:
        return "repair"
    return "expansion"


def op_family(request: ProposalRequest) -> str:
    """The op family the offline compiler recorded in a parent's genome, if any."""
    if request.parent is None:
        return ""
    return request.parent.genome.get("family", "")


def gather_context(request: ProposalRequest, reader: KnowledgeReader, *, docs: int = 4,
                   skills: int = 5) -> PromptContext:
    """Documents and skills for this request, filtered by hardware and op family."""
    family = op_family(request)
    query = f"{request.spec_name} {_forward_text(request.spec_source)}"[:1000]
    found = reader.retrieve(query, hardware_kind=request.hardware_kind, op_family=family, limit=docs)
    hints = reader.skills(hardware_kind=request.hardware_kind, op_family=family, limit=skills)
    facts = [d for d in found if d.level == "hardware"]
    return PromptContext(docs=tuple(d for d in found if d.level != "hardware"), skills=tuple(hints),
                         hardware_facts="\n\n".join(f"[{d.doc_id}] {d.text}" for d in facts))


def build_prompt(request: ProposalRequest, context: PromptContext = PromptContext(), *,
                 token_budget: int = 6000) -> Prompt:
    """The prompt for ``request``: its kind's template with the evidence that fits."""
    kind = prompt_kind(request)
    system = _template(f"system.{TEMPLATE_VERSION}")
    skeleton = _template(f"{kind}.{TEMPLATE_VERSION}")
    room = max(200, token_budget - count_tokens(system) - count_tokens(skeleton))
    fitted = fit(_sections(request, context, kind), room)
    attempt = str(request.repair_attempt or 1)
    user = Template(skeleton).safe_substitute(evidence=fitted.text().strip(), attempt=attempt)
    kept = {s.key for s in fitted.sections}
    return Prompt(kind=kind, template=f"{kind}.{TEMPLATE_VERSION}", system=system, user=user,
                  tokens=count_tokens(system) + count_tokens(user),
                  doc_ids=tuple(d.doc_id for d in context.docs if f"doc:{d.doc_id}" in kept),
                  skill_ids=tuple(s.skill_id for s in context.skills) if "skills" in kept else (),
                  dropped=fitted.dropped)


# -- sections ----------------------------------------------------------------------------


def _sections(request: ProposalRequest, context: PromptContext, kind: str) -> list[Section]:
    out = [Section("reference", f"Reference operator `{request.spec_name}` (shapes and dtypes from get_inputs)",
                   _fenced(request.spec_source) + _shapes(request.spec_source), priority=0, required=True)]
    out.append(Section("hardware", f"Target hardware: {request.hardware_kind}",
                       context.hardware_facts or _default_facts(request.hardware_kind), priority=30))
    parent = request.parent
    if parent is not None:
        title = "Previous attempt (to repair)" if kind == "repair" else "Parent kernel"
        out.append(Section("parent", f"{title} {parent.candidate_id}: {parent.transformation.name}",
                           _fenced(parent.source), priority=1, required=True))
        out.append(Section("verdict", "Its verdict", _verdict(parent.result, parent.report), priority=2,
                           required=True))
        err = _error_text(parent.result, parent.report)
        if err:
            out.append(Section("diagnostics", "Diagnostics (error text, trimmed)", err, priority=3, keep="tail"))
        perf = _performance(parent.report)
        if perf and kind == "expansion":
            out.append(Section("performance", "Timing, profile and roofline diagnosis", perf, priority=4))
        if request.tune and kind == "expansion":
            # The search's tuning stage: the parent is one of its best; only its launch
            # configuration is to change (the offline compiler answers these exactly).
            out.append(Section("tune", "This request tunes the parent's launch configuration",
                               "Keep the parent's kernels, fusion and arithmetic exactly as they are; change only "
                               "how they are launched: tile sizes (BLOCK_* constants), num_warps and num_stages. "
                               "Choose a configuration not listed under the transformations already tried.",
                               priority=1, required=True))
    if request.siblings:
        lines = [f"- {s.candidate_id} ({s.transformation.name} {_params(s.transformation.params)}): {s.status}"
                 + (f", speedup {s.speedup:.3f}x" if s.status == "correct" else f": {s.reason[:200]}")
                 for s in request.siblings]
        out.append(Section("siblings", "Sibling attempts from the same parent", "\n".join(lines), priority=10))
    if request.tried:
        out.append(Section("tried", "Transformations already tried from this parent",
                           "\n".join(f"- {t.name} {_params(t.params)}" for t in request.tried), priority=12))
    if context.skills:
        lines = [f"- [{s.skill_id}] {s.transformation} {_params(s.params)}: measured gain {s.gain:.2f}x "
                 f"({s.gain_low:.2f}-{s.gain_high:.2f}){' (demoted)' if s.status != 'active' else ''}"
                 + (f". {s.text}" if s.text else "") for s in context.skills]
        out.append(Section("skills", "Skills that paid off on this hardware", "\n".join(lines), priority=20))
    for i, d in enumerate(context.docs):
        out.append(Section(f"doc:{d.doc_id}", f"Document [{d.doc_id}] {d.title}", d.text, priority=40 + i))
    return out


def _fenced(source: str) -> str:
    return f"```python\n{source.strip()}\n```"


def _params(params: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(params.items()) if k not in ("repairable",))


def _shapes(spec_source: str) -> str:
    """The lines of get_inputs/get_init_inputs and module constants: shapes and dtypes."""
    consts = [ln for ln in spec_source.splitlines() if re.match(r"^[A-Za-z_][A-Za-z0-9_]*\s*=", ln)]
    return ("\n\nModule constants: " + "; ".join(c.strip() for c in consts[:20])) if consts else ""


def _forward_text(spec_source: str) -> str:
    m = re.search(r"def forward\(.*?(?=\n\S|\Z)", spec_source, re.S)
    return " ".join((m.group(0) if m else spec_source[:400]).split())


def _default_facts(kind: str) -> str:
    if kind == "cpu":
        return ("Kernels run in the Triton interpreter on CPU: correctness matters, timings are not "
                "GPU timings. Prefer simple, fully masked blocks.")
    return f"NVIDIA {kind}: coalesced loads, fused elementwise work, block sizes multiple of 32."


def _verdict(result: dict[str, Any], report: dict[str, Any]) -> str:
    status = result.get("status") or report.get("status", "unknown")
    lines = [f"status: {status}"]
    speedup = result.get("speedup") or report.get("speedup")
    if status == "correct" and speedup:
        lines.append(f"speedup over the reference: {float(speedup):.3f}x")
    corr = report.get("correctness") or {}
    if corr:
        lines.append(f"correctness: {corr.get('trials', 0)} trials, max abs error {corr.get('max_abs_error', 0):.3g}, "
                     f"max rel error {corr.get('max_rel_error', 0):.3g} (atol {corr.get('atol', 0):.3g}, "
                     f"rtol {corr.get('rtol', 0):.3g})")
    return "\n".join(lines)


def _error_text(result: dict[str, Any], report: dict[str, Any]) -> str:
    status = result.get("status") or report.get("status", "")
    if status not in FAILED:
        return ""
    reason = str(report.get("reason") or result.get("reason") or "")
    evidence = report.get("evidence") or {}
    extra = [f"{k}: {v}" for k, v in evidence.items() if isinstance(v, (str, int, float)) and k != "source"]
    details = (report.get("correctness") or {}).get("details") or []
    mism = [json.dumps(d, sort_keys=True)[:300] for d in details[:3]]
    return "\n".join([_trim_traceback(reason), *extra[:8], *mism]).strip()


def _trim_traceback(text: str) -> str:
    """Keep what names the error: the candidate's own frames and the final lines, not the
    framework's internals."""
    lines = text.splitlines()
    if len(lines) <= 30:
        return text
    own = [ln for ln in lines if "candidate" in ln or "ModelNew" in ln]
    return "\n".join([*own[-8:], "...", *lines[-15:]])


def _performance(report: dict[str, Any]) -> str:
    lines = []
    ct, bt = report.get("candidate_timing") or {}, report.get("baseline_timing") or {}
    if ct:
        lines.append(f"candidate median {ct.get('median_ms', 0):.4g} ms (IQR {ct.get('iqr_ms', 0):.3g}), "
                     f"reference median {bt.get('median_ms', 0):.4g} ms")
    diag = report.get("diagnosis") or {}
    if diag:
        lines.append(f"bound: {diag.get('bound', 'unknown')}, "
                     f"roofline fraction {diag.get('roofline_fraction', 0):.3g}, "
                     f"{diag.get('achieved_gbps', 0):.3g} GB/s, {diag.get('achieved_gflops', 0):.3g} GFLOP/s, "
                     f"library time {diag.get('library_time_fraction', 0):.0%}")
        for k in (diag.get("kernels") or [])[:6]:
            lines.append(f"- kernel {k.get('name')}: {k.get('launches', 0)} launches, {k.get('time_ms', 0):.4g} ms, "
                         f"{k.get('registers', 0)} registers, {k.get('spills', 0)} spills")
        lines.extend(f"- {n}" for n in (diag.get("notes") or [])[:6])
    if report.get("interpreted"):
        lines.append("(timed in the Triton interpreter: relative figures only)")
    return "\n".join(lines)
