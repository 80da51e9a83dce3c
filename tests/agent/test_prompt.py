"""The prompt an answerer gets: spec with input shapes and dtypes, parent with its verdict,
reason, timing and diagnosis, and the required answer format."""

from __future__ import annotations

from pathlib import Path

from ke_synthesizer.agent import build_prompt
from kernelevolve.ports.synthesis import ParentInfo, ProposalRequest, Transformation

SPEC = (Path(__file__).parent / "specs" / "clamp_scale.py").read_text()


def test_a_seed_prompt_has_the_spec_its_inputs_and_the_answer_format() -> None:
    prompt = build_prompt(ProposalRequest(spec_source=SPEC, spec_name="clamp_scale"))
    assert SPEC.strip() in prompt
    assert "forward input 0: Tensor(shape=(7, 333), dtype=float32)" in prompt and "init inputs: [float(0.75)]" in prompt
    assert "No parent" in prompt and "class ModelNew(torch.nn.Module)" in prompt and "torch + triton" in prompt


def test_a_child_prompt_has_the_parent_and_how_it_fared() -> None:
    parent = ParentInfo("r1-1", "# the parent\nclass ModelNew: ...\n", Transformation("agent", {"request": "r1-1"}),
                        result={"status": "correct", "speedup": 1.5, "reason": "matches the reference",
                                "bound": "memory", "roofline_fraction": 0.42, "candidate_ms": 2.0,
                                "baseline_ms": 3.0, "notes": ["loads are not coalesced"]})
    prompt = build_prompt(ProposalRequest(spec_source=SPEC, spec_name="clamp_scale", parent=parent,
                                          tried=(Transformation("agent", {"request": "r2-1"}),)))
    for fact in ("# the parent", "verdict: correct", "reason: matches the reference", "1.500x",
                 "timing: 2 ms, eager PyTorch 3 ms", "memory-bound, 42.0% of roofline", "note: loads are not coalesced",
                 "r2-1"):
        assert fact in prompt, fact


def test_a_spec_whose_inputs_cannot_be_built_still_gets_a_prompt() -> None:
    broken = SPEC.replace("torch.randn(7, 333)", "torch.randn(-1)")
    assert "could not be built here" in build_prompt(ProposalRequest(spec_source=broken, spec_name="broken"))
