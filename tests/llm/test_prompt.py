"""Prompts: the evidence a model sees for a draft, an expansion and a repair, within a
token budget, and the checks a reply passes before an evaluation is spent."""

from __future__ import annotations

import pytest

from ke_synthesizer.llm.extract import check_reply, extract_code
from ke_synthesizer.llm.prompt import build_prompt, gather_context
from ke_synthesizer.llm.tokens import count_tokens
from kernelevolve.ports.synthesis import AttemptSummary, ParentInfo, ProposalRequest, Transformation

from .knowledge_double import sample_knowledge
from .ops import BROKEN, CORRECT, SPEC, fenced

TRACEBACK = "\n".join([f"  File \"/site-packages/triton/x{i}.py\", line {i}, in f" for i in range(80)]
                      + ["  File \"candidate.py\", line 12, in _affine_relu",
                         "AttributeError: module 'triton.language' has no attribute 'maximmum'"])
REPORT = {"status": "correct", "speedup": 1.25,
          "correctness": {"trials": 5, "max_abs_error": 1.2e-7, "max_rel_error": 3e-7, "atol": 1e-5, "rtol": 1e-5},
          "candidate_timing": {"median_ms": 0.8, "iqr_ms": 0.01}, "baseline_timing": {"median_ms": 1.0},
          "diagnosis": {"bound": "memory", "roofline_fraction": 0.42, "achieved_gbps": 12.5,
                        "kernels": [{"name": "_affine_relu", "launches": 1, "time_ms": 0.7}],
                        "notes": ["one launch, no library time"]}}


def _parent(status: str, report: dict) -> ParentInfo:
    return ParentInfo("r1-1", CORRECT if status == "correct" else BROKEN,
                      Transformation("llm_draft", {"model": "model-a"}), {"family": "pointwise"},
                      {"status": status, "speedup": report.get("speedup", 0.0), "reason": report.get("reason", "")},
                      report)


def test_an_expansion_prompt_carries_the_parents_evidence_documents_and_skills() -> None:
    kb = sample_knowledge()
    req = ProposalRequest(SPEC, "affine_relu", parent=_parent("correct", REPORT), hardware_kind="cpu",
                          siblings=(AttemptSummary("r2-1", Transformation("llm_expansion", {"sample": "0"}),
                                                   "incorrect", 0.0, "max abs error 1.0 > atol"),))
    prompt = build_prompt(req, gather_context(req, kb), token_budget=4000)
    assert prompt.kind == "expansion" and prompt.template == "expansion.v1"
    text = prompt.user
    for needle in ("relu(x) * alpha + 1", "torch.randn(37, 53)", "_affine_relu[(triton.cdiv", "speedup over the "
                   "reference: 1.250x", "max abs error 1.2e-07", "bound: memory, roofline fraction 0.42",
                   "kernel _affine_relu", "r2-1", "max abs error 1.0 > atol", "[skill-fuse-42] fuse_epilogue",
                   "[doc-masking-17]", "[doc-cpu-interp-3]"):
        assert needle in text, needle
    assert "doc-h100-tma-9" not in text  # filtered by hardware
    assert kb.queries == [(kb.queries[0][0], "cpu", "pointwise")]
    assert prompt.doc_ids == ("doc-masking-17",) and prompt.skill_ids == ("skill-fuse-42",)
    assert prompt.tokens == count_tokens(prompt.system) + count_tokens(prompt.user) <= 4000


def test_a_tuning_request_asks_for_the_parents_launch_configuration_only() -> None:
    tried = (Transformation("tune", {"set": "g0.BLOCK_SIZE=256"}),)
    req = ProposalRequest(SPEC, "affine_relu", parent=_parent("correct", REPORT), tune=True, tried=tried)
    prompt = build_prompt(req, token_budget=4000)
    assert prompt.kind == "expansion"
    assert "tunes the parent's launch configuration" in prompt.user and "set=g0.BLOCK_SIZE=256" in prompt.user
    plain = build_prompt(ProposalRequest(SPEC, "affine_relu", parent=_parent("correct", REPORT)), token_budget=4000)
    assert "launch configuration" not in plain.user


def test_a_repair_prompt_keeps_the_tail_of_the_error_and_the_failed_source() -> None:
    report = {"status": "compile_error", "reason": TRACEBACK}
    req = ProposalRequest(SPEC, "affine_relu", parent=_parent("compile_error", report), repair_attempt=2)
    prompt = build_prompt(req, token_budget=3000)
    assert prompt.kind == "repair" and "repair attempt 2" in prompt.user
    assert "no attribute 'maximmum'" in prompt.user and "candidate.py\", line 12" in prompt.user
    assert "x3.py" not in prompt.user  # framework frames trimmed
    assert "tl.maximmum(x, 0.0)" in prompt.user


@pytest.mark.parametrize("budget", [700, 1200, 2500])
def test_evidence_is_cut_to_the_token_budget_by_priority(budget: int) -> None:
    kb = sample_knowledge()
    kb.docs[0] = type(kb.docs[0])("doc-long", "guidance", "Long", "word " * 3000, 0.9)
    req = ProposalRequest(SPEC, "affine_relu", parent=_parent("correct", REPORT))
    prompt = build_prompt(req, gather_context(req, kb), token_budget=budget)
    assert prompt.tokens <= budget + 150  # required sections are kept even when they alone are large
    assert "speedup over the reference" in prompt.user and "_affine_relu" in prompt.user
    if budget >= 1200:
        assert "class ModelNew" in prompt.user  # the parent whole, before any optional evidence
    assert "doc-long" in prompt.dropped or "[... trimmed ...]" in prompt.user


def test_a_draft_has_no_lineage() -> None:
    prompt = build_prompt(ProposalRequest(SPEC, "affine_relu"))
    assert prompt.kind == "draft" and "Parent kernel" not in prompt.user and "Model(nn.Module)" in prompt.user


@pytest.mark.parametrize(("reply", "why"), [
    ("", "empty reply"),
    ("I cannot help with that.", "syntax error"),
    (fenced("import torch\nclass Model2(torch.nn.Module):\n    pass\n"), "does not define class ModelNew"),
    (fenced(CORRECT.replace("import torch\n", "import torch\nimport os\n")), "static policy"),
    (fenced("def broken(:\n"), "syntax error"),
])
def test_replies_that_cannot_be_evaluated_are_refused_with_a_reason(reply: str, why: str) -> None:
    checked = check_reply(reply)
    assert why in checked.rejected


@pytest.mark.parametrize("reply", [fenced(CORRECT), CORRECT, fenced(CORRECT, "```text\nnotes\n```\nthen:")])
def test_code_comes_from_the_fence_or_the_whole_reply(reply: str) -> None:
    assert extract_code(reply).strip() == CORRECT.strip()
    assert check_reply(reply).rejected == ""
