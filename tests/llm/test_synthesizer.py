"""The LLM synthesizer without the evaluator: the model bandit follows measured outcomes,
each proposal carries its record, and token/USD accounting per session."""

from __future__ import annotations

from typing import Any

from ke_synthesizer.llm import LlmSynthesizer, OpenAIChat
from ke_synthesizer.llm.bandit import ModelBandit
from kernelevolve.ports.synthesis import ParentInfo, ProposalRequest, Transformation

from .conftest import KEY, llm_settings
from .fake_openai import FakeOpenAI, Text
from .ops import CORRECT, INCORRECT, SPEC, fenced


def _request(session_id: str = "s1") -> ProposalRequest:
    return ProposalRequest(SPEC, "affine_relu", session_id=session_id)


def test_the_bandit_shifts_to_the_model_whose_candidates_are_correct(fake: FakeOpenAI) -> None:
    # "good" writes the correct kernel, "bad" an incorrect one; the outcome fed back is the
    # status the evaluator gives those two sources (tests/llm/test_session.py runs it for real).
    def answer(body: dict[str, Any]) -> Text:
        return Text(fenced(CORRECT if body["model"] == "good" else INCORRECT))

    fake.responder = answer
    settings = llm_settings(fake, models="bad,good", seed=7)
    synth = LlmSynthesizer(settings, OpenAIChat(settings, KEY))
    chosen = []
    for _ in range(40):
        (p,) = synth.propose(_request())
        correct = p.source == CORRECT
        synth.observe(p.genome, "correct" if correct else "incorrect", 1.3 if correct else 0.0)
        chosen.append(p.genome["llm_model"])
    assert chosen[:10].count("bad") >= 1  # both were tried
    assert chosen[-20:].count("good") >= 17, chosen


def test_gain_per_token_breaks_a_tie_in_correctness() -> None:
    bandit = ModelBandit(("cheap", "dear"), seed=1)
    for _ in range(30):
        bandit.observe("cheap", correct=True, gain=0.2, tokens=1000)
        bandit.observe("dear", correct=True, gain=0.2, tokens=8000)
    picks = [bandit.choose() for _ in range(50)]
    assert picks.count("cheap") >= 45


def test_every_proposal_carries_its_record_and_the_session_pays_for_it(fake: FakeOpenAI) -> None:
    fake.responder = lambda body: Text(fenced(CORRECT), prompt_tokens=1000, completion_tokens=500)
    settings = llm_settings(fake, models="m1", prices="m1=2/10", session_usd_budget=0.02)
    synth = LlmSynthesizer(settings, OpenAIChat(settings, KEY))
    (p,) = synth.propose(_request("s1"))
    rec = p.record
    assert rec["model"] == "m1" and rec["template"] == "draft.v1" and rec["reply"] == fenced(CORRECT)
    assert rec["messages"][1]["content"] == fake.requests[0].body["messages"][1]["content"]
    assert (rec["prompt_tokens"], rec["completion_tokens"]) == (1000, 500) and rec["latency_s"] >= 0
    assert abs(rec["usd"] - 0.007) < 1e-9  # 1000 * 2 / 1e6 + 500 * 10 / 1e6
    assert KEY not in repr(rec) and KEY not in repr(synth.__dict__)
    assert synth.propose(_request("s1")) and synth.propose(_request("s1"))  # $0.021 spent now
    assert synth.propose(_request("s1")) == [] and "budget spent" in synth.budget_spent("s1")
    assert synth.propose(_request("s2"))  # per session
    assert synth.total.requests == 4 and synth.usage["s1"].tokens == 4500


def test_at_most_the_configured_requests_are_in_flight(fake: FakeOpenAI) -> None:
    fake.responder = lambda body: Text(fenced(CORRECT), delay_s=0.5)
    settings = llm_settings(fake, concurrency=2)
    synth = LlmSynthesizer(settings, OpenAIChat(settings, KEY))
    proposals = synth.propose(ProposalRequest(SPEC, "affine_relu", count=5, session_id="s"))
    assert len(proposals) == 5 and len({p.transformation.params["sample"] for p in proposals}) == 5
    assert fake.max_concurrent == 2


def test_a_tuning_request_is_answered_with_its_mark_on_the_edge(fake: FakeOpenAI) -> None:
    fake.responder = lambda body: Text(fenced(CORRECT))
    settings = llm_settings(fake, models="m1")
    synth = LlmSynthesizer(settings, OpenAIChat(settings, KEY))
    parent = ParentInfo("r1-1", CORRECT, Transformation("llm_draft", {"model": "m1"}), {}, {"status": "correct"})
    (p,) = synth.propose(ProposalRequest(SPEC, "affine_relu", parent=parent, tune=True))
    assert p.transformation.name == "llm_expansion" and p.transformation.params["tune"] == "1"
    assert "launch configuration" in fake.requests[0].body["messages"][1]["content"]
    (q,) = synth.propose(ProposalRequest(SPEC, "affine_relu", parent=parent))
    assert "tune" not in q.transformation.params
