"""Whole sessions with the LLM synthesizer against the scripted endpoint, through the
product's own services and the real evaluator (in-process ``run_session``): the repair
loop, refused replies, the token budget, an endpoint that goes down, the recorded
fallback to the offline compiler, and offline seeds expanded by the LLM."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from ke_cli.inprocess import run_session
from ke_evaluator.judge import EvalOptions, Judge
from ke_synthesizer.composite import Hybrid, WithFallback
from ke_synthesizer.llm import LlmSynthesizer, OpenAIChat, connect
from ke_synthesizer.offline import OfflineSynthesizer
from kernelevolve.config import LlmEndpoint, LlmSettings, Settings, TimingOptions
from kernelevolve.ports.verdict import Verdict
from kernelevolve.v1 import common_pb2 as pb

from .conftest import KEY, llm_settings
from .fake_openai import FakeOpenAI, Status, Text
from .knowledge_double import sample_knowledge
from .ops import BROKEN, CORRECT, SPEC, fenced


class CountingJudge:
    """The real judge, counting the evaluations it was asked for."""

    def __init__(self, judge: Judge) -> None:
        self._judge = judge
        self.evaluated: list[str] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self._judge, name)

    def evaluate(self, spec_source: str, candidate_source: str, candidate_id: str = "",
                 fresh_worker: bool = False, tier: str | None = None) -> Verdict:
        self.evaluated.append(candidate_id)
        return self._judge.evaluate(spec_source, candidate_source, candidate_id, fresh_worker)


@pytest.fixture(scope="module")
def real_judge() -> Iterator[Judge]:
    opts = EvalOptions(device="cpu", correctness_trials=2, timing=TimingOptions(max_trials=3, input_sets=1),
                       profile_library_time=False)
    with Judge(opts) as j:
        yield j


@pytest.fixture
def judge(real_judge: Judge) -> CountingJudge:
    return CountingJudge(real_judge)


def _llm(fake: FakeOpenAI, **kw: object) -> LlmSynthesizer:
    settings = llm_settings(fake, **kw)  # type: ignore[arg-type]
    return LlmSynthesizer(settings, OpenAIChat(settings, KEY), knowledge=sample_knowledge())


def _settings(repair_attempts: int = 2) -> Settings:
    return Settings(llm=LlmSettings(repair_attempts=repair_attempts))


def _by_id(result: object) -> dict[str, object]:
    return {c.node.node_id: c for c in result.candidates}  # type: ignore[attr-defined]


async def test_the_repair_loop_fixes_a_broken_candidate_on_the_second_attempt(fake: FakeOpenAI,
                                                                                judge: CountingJudge) -> None:
    fake.script(Text(fenced(BROKEN)), Text(fenced(CORRECT)))
    synth = _llm(fake)
    result = await run_session(SPEC, "affine_relu", synthesizer=synth, judge=judge, budget=2,
                               settings=_settings())
    nodes = _by_id(result)
    broken, fixed = nodes["r1-1"], nodes["r2-1"]
    assert broken.node.status in (pb.EVALUATION_STATUS_COMPILE_ERROR, pb.EVALUATION_STATUS_RUNTIME_ERROR)
    assert fixed.node.parent_id == "r1-1" and fixed.node.transformation.name == "llm_repair"
    assert fixed.node.transformation.params["repair_attempt"] == "1"
    assert fixed.node.status == pb.EVALUATION_STATUS_CORRECT and result.session.best_candidate_id == "r2-1"
    draft, repair = fake.requests
    assert "Write a first Triton implementation" in draft.prompt and "[doc-masking-17]" in draft.prompt
    assert "repair attempt 1" in repair.prompt and "tl.maximmum(x, 0.0)" in repair.prompt
    assert "maximmum" in repair.prompt.split("Diagnostics", 1)[1]  # the evaluator's error text
    genome = fixed.proposal.genome
    assert genome["llm_model"] == "model-a" and genome["llm_template"] == "repair.v1"
    assert genome["llm_record"].endswith("llm/r2-1.json")
    # Outcomes reached the bandit through the evaluations.
    arm = synth.bandit.arms["model-a"]
    assert (arm.correct, arm.failed) == (1, 1)


async def test_a_keyless_local_drafter_and_a_keyed_hosted_refiner_share_one_session(
        fake: FakeOpenAI, keyless: FakeOpenAI, judge: CountingJudge) -> None:
    keyless.script(Text(fenced(CORRECT)))
    fake.script(Text(fenced(CORRECT + "\n_REFINED = 1\n")))
    settings = LlmSettings(endpoints=(
        LlmEndpoint(name="local", base_url=keyless.url, models="drafter", keyless=True),
        LlmEndpoint(name="hosted", base_url=fake.url, models="refiner", api_key_env="HOSTED_KEY")),
        backoff_s=0.01, max_retries=1)
    synth = LlmSynthesizer(settings, connect(settings, {"HOSTED_KEY": KEY, "OPENAI_API_KEY": "sk-not-for-local"}),
                           knowledge=sample_knowledge())
    result = await run_session(SPEC, "affine_relu", synthesizer=synth, judge=judge, budget=2, settings=_settings())
    nodes = _by_id(result)
    assert {n.proposal.genome["llm_model"] for n in nodes.values()} == {"drafter", "refiner"}
    assert all(n.node.status == pb.EVALUATION_STATUS_CORRECT for n in nodes.values())
    assert [r.authorization for r in keyless.requests] == [""]  # no key, not even OPENAI_API_KEY
    assert [r.authorization for r in fake.requests] == [f"Bearer {KEY}"]
    assert synth.bandit.arms["drafter"].correct == synth.bandit.arms["refiner"].correct == 1


async def test_a_refused_reply_is_a_failed_node_that_costs_no_evaluation(fake: FakeOpenAI,
                                                                         judge: CountingJudge) -> None:
    fake.script(Text("Sorry, here is a sketch: def kernel(:"), Text(fenced(CORRECT)))
    result = await run_session(SPEC, "affine_relu", synthesizer=_llm(fake), judge=judge, budget=2,
                               settings=_settings())
    refused = _by_id(result)["r1-1"]
    assert refused.node.status == pb.EVALUATION_STATUS_COMPILE_ERROR
    assert "reply refused before evaluation" in refused.verdict.reason
    assert "r1-1" not in judge.evaluated and "r2-1" in judge.evaluated
    assert result.session.best_candidate_id == "r2-1"


async def test_a_spent_token_budget_ends_the_session_with_its_verified_best(fake: FakeOpenAI,
                                                                             judge: CountingJudge) -> None:
    replies = iter(range(100))  # each reply a distinct module: twins are de-duplicated, not evaluated
    fake.responder = lambda body: Text(fenced(CORRECT + f"\n_VARIANT = {next(replies)}\n"), prompt_tokens=900,
                                       completion_tokens=300)
    result = await run_session(SPEC, "affine_relu", synthesizer=_llm(fake, session_token_budget=2000),
                               judge=judge, budget=6, settings=_settings())
    assert len(fake.requests) == 2  # 1200 tokens, then 2400 >= 2000: nothing more is asked
    assert result.session.status == pb.SESSION_STATUS_COMPLETED and result.session.evaluated == 2
    assert result.best is not None and result.best.verdict.status == "correct"


async def test_an_endpoint_that_goes_down_fails_the_session_with_the_reason_and_keeps_the_best(
        fake: FakeOpenAI, judge: CountingJudge) -> None:
    fake.script(Text(fenced(CORRECT)))
    fake.responder = lambda body: Status(503)
    result = await run_session(SPEC, "affine_relu", synthesizer=_llm(fake, max_retries=1), judge=judge,
                               budget=4, settings=_settings())
    assert result.session.status == pb.SESSION_STATUS_FAILED
    assert "LlmUnavailable" in result.session.error and "HTTP 503" in result.session.error
    assert result.session.best_candidate_id == "r1-1" and result.best is not None


async def test_a_refused_key_ends_the_session_with_that_reason(fake: FakeOpenAI, judge: CountingJudge) -> None:
    settings = llm_settings(fake)
    synth = LlmSynthesizer(settings, OpenAIChat(settings, "sk-revoked"))
    result = await run_session(SPEC, "affine_relu", synthesizer=synth, judge=judge, budget=2, settings=_settings())
    assert result.session.status == pb.SESSION_STATUS_FAILED
    assert "LlmAuthError" in result.session.error
    assert "refused the API key (401, key from the caller)" in result.session.error
    assert len(fake.requests) == 1 and judge.evaluated == [] and result.best is None


async def test_fallback_to_offline_is_allowed_only_when_asked_and_recorded(judge: CountingJudge) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    settings = LlmSettings(base_url=dead, models="m", max_retries=0)
    synth = WithFallback(LlmSynthesizer(settings, OpenAIChat(settings, KEY)), OfflineSynthesizer())
    result = await run_session(SPEC, "affine_relu", synthesizer=synth, judge=judge, budget=1, settings=_settings())
    (only,) = result.candidates
    assert only.proposal.genome["fallback_from"] == "llm" and only.proposal.genome["fallback_to"] == "offline"
    assert "unavailable" in only.proposal.genome["fallback_reason"]
    assert only.node.transformation.params["fallback_from"] == "llm"
    assert result.session.status == pb.SESSION_STATUS_COMPLETED


async def test_offline_seeds_and_the_llm_expands_the_best_of_them(fake: FakeOpenAI, judge: CountingJudge) -> None:
    fake.responder = lambda body: Text(fenced(CORRECT))
    synth = Hybrid(OfflineSynthesizer(), _llm(fake))
    result = await run_session(SPEC, "affine_relu", synthesizer=synth, judge=judge, budget=2, settings=_settings())
    nodes = _by_id(result)
    seed, child = nodes["r1-1"], nodes["r2-1"]
    assert "llm_model" not in seed.proposal.genome and seed.node.status == pb.EVALUATION_STATUS_CORRECT
    assert child.node.parent_id == "r1-1" and child.node.transformation.name == "llm_expansion"
    (req,) = fake.requests
    assert seed.proposal.source.strip().splitlines()[-1].strip() in req.prompt  # the offline parent's code
    assert "Timing, profile and roofline diagnosis" in req.prompt
