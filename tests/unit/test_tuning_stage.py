"""The search's tuning stage (``ke_search.tune``): after the structural share of the budget,
launch-config neighbours of the elite, asked of the real offline synthesizer and judged
like any other candidate. Sessions run through the product's own services in-process;
the judge is a double whose speedup is a fixed function of the source (the interpreter's
timings would say nothing here either), so that the tests count and compare requests."""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass, field
from typing import Any

import pytest

from ke_cli.inprocess import CandidateRecord, SessionResult, run_session
from ke_evaluator.service import EvaluatorService
from ke_gateway.service import GatewayService
from ke_search import tune
from ke_search.service import SearchService
from ke_search.state import RequestRecord, SearchState, request_of
from ke_synthesizer.offline import OfflineSynthesizer
from ke_synthesizer.offline.tune import LAUNCH_KNOBS, TUNE, launch_knobs, sweep
from ke_synthesizer.service import SynthesizerService
from kernelevolve.bus.memory import MemoryBus
from kernelevolve.bus.subjects import Keys, Subjects
from kernelevolve.config import SearchSettings
from kernelevolve.ports.strategy import STRATEGY_NAMES
from kernelevolve.ports.synthesis import ParentInfo, Proposal, ProposalRequest, Transformation
from kernelevolve.spec import make_spec
from kernelevolve.store import MemoryStore
from kernelevolve.v1 import common_pb2 as pb
from kernelevolve.v1 import services_pb2 as spb
from tests.unit.fakes import JudgeValidator
from tests.unit.landscape import GridJudge

# A linear layer with its epilogue (a matmul kernel: tiles, GROUP_M, warps, stages) and a
# row reduction after it (softmax: BLOCK_M / BLOCK_N, warps), so that elites have launch
# knobs in more than one kernel and structural knobs (fusion, epilogue, strategy) too.
SPEC = '''import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(32, 24)

    def forward(self, x):
        return torch.softmax(torch.relu(self.fc(x)) * 0.5, dim=-1)


def get_inputs():
    return [torch.randn(16, 32)]


def get_init_inputs():
    return []
'''


class SourceJudge(GridJudge):
    """Every candidate correct; its speedup a fixed pseudo-random function of its source."""

    def __init__(self) -> None:
        super().__init__(landscape=lambda p: 1.0)

    def speed(self, candidate_source: str, fresh_worker: bool) -> float:
        return 0.5 + int(hashlib.sha256(candidate_source.encode()).hexdigest()[:6], 16) % 1000 / 400


class Recording(OfflineSynthesizer):
    """The real offline synthesizer, keeping the requests it was asked."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[ProposalRequest] = []

    def propose(self, request: ProposalRequest) -> list[Proposal]:
        self.requests.append(request)
        return super().propose(request)


def _request_no(node_id: str) -> int:
    return int(request_of(node_id)[1:])


def _tuned(result: SessionResult) -> list[CandidateRecord]:
    return [c for c in result.candidates if c.node.transformation.name == TUNE]


def _launch_only(child: dict[str, str], parent: dict[str, str]) -> set[str]:
    """The knobs a child changed, asserting that they are launch knobs only."""
    assert child.keys() == parent.keys()
    changed = {k for k in child if child[k] != parent[k]}
    assert changed and all(k.split(".", 1)[1] in LAUNCH_KNOBS for k in changed), changed
    return changed


# -- the offline synthesizer's answer ---------------------------------------------------------

def _seed() -> Proposal:
    (seed,) = OfflineSynthesizer().propose(ProposalRequest(SPEC, "linear_softmax", count=1))
    return seed


def test_launch_neighbours_change_only_launch_knobs_spread_over_the_knobs() -> None:
    synth, seed = OfflineSynthesizer(), _seed()
    parent = ParentInfo("r1-1", seed.source, seed.transformation, seed.genome)
    first = synth.propose(ProposalRequest(SPEC, "linear_softmax", count=6, parent=parent, tune=True))
    assert len(first) == 6
    changed = [_launch_only(p.genome, seed.genome) for p in first]
    # a short sweep turns six different knobs, one at a time, before it turns any twice
    assert all(len(c) == 1 for c in changed) and len(set.union(*changed)) == 6
    assert {k.split(".")[0] for c in changed for k in c} == {"g0", "g1"}  # both kernels are tuned
    for p, c in zip(first, changed, strict=True):
        (key,) = c
        assert p.transformation.name == TUNE and p.transformation.params == {"set": f"{key}={p.genome[key]}"}
        assert p.description == f"tune: {key} {seed.genome[key]}->{p.genome[key]}"
    # told what was tried (its own and a structural single-knob edge), it never repeats one
    structural = [c.transformation for c in synth.propose(ProposalRequest(SPEC, "linear_softmax", count=20,
                                                                          parent=parent))
                  if c.transformation.name in LAUNCH_KNOBS][:2]
    tried = tuple(p.transformation for p in first) + tuple(structural)
    more = synth.propose(ProposalRequest(SPEC, "linear_softmax", count=8, parent=parent, tune=True, tried=tried))
    seen = {tuple(sorted(p.genome.items())) for p in first}
    for p in more:
        _launch_only(p.genome, seed.genome)
        assert tuple(sorted(p.genome.items())) not in seen
        seen.add(tuple(sorted(p.genome.items())))
    skipped = {(f"{t.params['group']}.{t.name}", t.params["value"]) for t in structural}
    assert not any(set(p.genome.items()) & skipped for p in more)


def test_the_sweep_ends_and_pairs_follow_single_knobs() -> None:
    synth, seed = OfflineSynthesizer(), _seed()
    from ke_synthesizer.offline.frontend.capture import capture
    from ke_synthesizer.offline.graph import build_plan
    from ke_synthesizer.offline.space import knobs

    plan = build_plan(capture(SPEC, "linear_softmax"), dict(seed.genome))
    changes = list(sweep(launch_knobs(knobs(plan, dict(seed.genome))), seed.genome))
    singles = [c for c in changes if len(c) == 1]
    assert changes[:len(singles)] == singles and all(len(c) == 2 for c in changes[len(singles):])
    assert len({tuple(sorted(c.items())) for c in changes}) == len(changes)  # no configuration twice
    parent = ParentInfo("r1-1", seed.source, seed.transformation, seed.genome)
    tried: tuple[Any, ...] = ()
    total = 0
    for _ in range(200):
        got = synth.propose(ProposalRequest(SPEC, "linear_softmax", count=64, parent=parent, tune=True, tried=tried))
        if not got:
            break
        total += len(got)
        tried += tuple(p.transformation for p in got)
    else:
        raise AssertionError("the sweep never ran out")
    assert len(singles) < total <= len(changes)


# -- the stage's decisions, as pure functions -------------------------------------------------

def _node(nid: str, fitness: float) -> pb.Node:
    return pb.Node(node_id=nid, evaluated=True, status=pb.EVALUATION_STATUS_CORRECT, fitness=fitness,
                   fitness_low=fitness, fitness_high=fitness)


def test_elites_take_turns_and_wait_for_their_requests() -> None:
    st = SearchState(session_id="s", budget=20, max_inflight=4)
    st.requests = {"r1": RequestRecord("", 3), "r2": RequestRecord("r1-1", 1)}
    st.generated = st.evaluated = ["r1-1", "r1-2", "r1-3", "r2-1"]
    nodes = [_node("r1-1", 1.0), _node("r1-2", 3.0), _node("r1-3", 2.0), _node("r2-1", 0.5)]
    assert tune.elites(st, nodes, 2) == ["r1-2", "r1-3"]
    ask, wanted = tune.requests(st, nodes, 2, 3)
    assert ask is tune.Ask.ASKED and wanted == [("r1-2", 2), ("r1-3", 1)]
    st.requests["r3"], st.requests["r4"] = RequestRecord("r1-2", 2, tune=True), RequestRecord("r1-3", 1, tune=True)
    # both elites' requests are out: wait, never ask past them
    assert tune.requests(st, nodes, 2, 3) == (tune.Ask.WAIT, [])
    st.generated = st.generated + ["r4-1"]  # r1-3's came back: its turn, the other still out
    assert tune.requests(st, nodes + [_node("r4-1", 9.0)], 2, 2) == (tune.Ask.ASKED, [("r1-3", 2)])
    # a tuned candidate never joins the elite it was tuned from
    assert tune.elites(st, nodes + [_node("r4-1", 9.0)], 2) == ["r1-2", "r1-3"]
    st.generated += ["r3-1", "r3-2"]
    st.evaluated = list(st.generated)
    st.tune_exhausted = ["r1-2", "r1-3"]
    assert tune.requests(st, nodes, 2, 2) == (tune.Ask.NONE, [])


@pytest.mark.parametrize(("budget", "share", "seeds", "reserved"),
                         [(8, 0.25, 0, 2), (3, 0.25, 0, 0), (10, 0.0, 0, 0), (10, 0.99, 0, 9), (10, 0.5, 7, 3)])
def test_the_stage_reserves_the_floor_of_its_share_but_never_the_draft(budget: int, share: float, seeds: int,
                                                                        reserved: int) -> None:
    st = SearchState(session_id="s", budget=budget, max_inflight=1)
    assert tune.Stage(share, 2).budget(st, seeds) == reserved


# -- whole sessions ----------------------------------------------------------------------------

async def _session(budget: int, share: float | None, strategy: str = "greedy", max_inflight: int = 1,
                   elite: int | None = None) -> tuple[SessionResult, Recording, SourceJudge]:
    synth, judge = Recording(), SourceJudge()
    result = await run_session(SPEC, "linear_softmax", synthesizer=synth, judge=judge, budget=budget,
                               strategy=strategy, max_inflight=max_inflight, tune_share=share, tune_elite=elite)
    return result, synth, judge


def _check_stage(result: SessionResult, budget: int, share: float, elite: int,
                 inflight: int = 1) -> list[CandidateRecord]:
    """What every session with a stage must show: exactly the budget judged, the stage's
    candidates after every structural one, each a launch-only neighbour of an elite (with
    candidates in flight, of one that was an elite when asked: a structural candidate
    still out then may have displaced it since)."""
    assert result.session.status == pb.SESSION_STATUS_COMPLETED
    assert len(result.candidates) == result.session.evaluated == budget
    tuned = _tuned(result)
    structural = [c for c in result.candidates if c not in tuned]
    assert len(tuned) == int(budget * share)
    assert min(_request_no(c.node.node_id) for c in tuned) > max(_request_no(c.node.node_id) for c in structural)
    by_id = {c.node.node_id: c for c in result.candidates}
    ranked = sorted(structural, key=lambda c: (c.node.fitness, -c.node.depth, c.node.node_id), reverse=True)
    elites = {c.node.node_id for c in ranked[:elite + inflight - 1]}
    for c in tuned:
        assert c.node.parent_id in elites
        _launch_only(c.proposal.genome, by_id[c.node.parent_id].proposal.genome)
        assert c.proposal.description.startswith("tune: ")
    configs = [(c.node.parent_id, c.node.transformation.params["set"]) for c in tuned]
    assert len(set(configs)) == len(configs)
    assert result.summary["tuning"]["ran"] and set(result.summary["tuning"]["elites"]) <= elites
    assert result.summary["tuning"]["candidates"] == sorted(c.node.node_id for c in tuned)
    best = max(result.candidates, key=lambda c: c.verdict.speedup)
    assert result.session.best_speedup == pytest.approx(best.verdict.speedup)  # the best of all is the result
    return tuned


async def test_the_stage_runs_after_the_structural_share_and_spends_the_budget_exactly() -> None:
    result, synth, judge = await _session(budget=12, share=0.5, max_inflight=3)
    tuned = _check_stage(result, 12, 0.5, 2, inflight=3)
    assert len({c.node.parent_id for c in tuned}) >= 2  # the elites took turns
    assert len(judge.evaluated) == 12
    asked = [r for r in synth.requests if r.tune]
    assert asked and all(r.parent is not None for r in asked)
    assert result.summary["options"]["tune_share"] == 0.5 and result.summary["options"]["tune_elite"] == 2
    assert result.lineage and any(n["transformation"]["name"] == TUNE for n in result.lineage["nodes"])


async def test_a_share_of_zero_turns_the_stage_off() -> None:
    result, synth, _ = await _session(budget=8, share=0.0)
    assert len(result.candidates) == 8 and not _tuned(result)
    assert not any(r.tune for r in synth.requests)
    assert result.summary["tuning"] == {"ran": False, "elites": [], "candidates": [], "best": "", "best_fitness": 0.0}


@pytest.mark.parametrize("name", STRATEGY_NAMES)
async def test_every_strategy_hands_over_to_the_stage(name: str) -> None:
    result, _, _ = await _session(budget=8, share=0.25, strategy=name, elite=1)
    _check_stage(result, 8, 0.25, 1)
    assert result.session.strategy == name


# -- the stage after a restart -----------------------------------------------------------------

async def test_a_resumed_session_does_not_ask_the_stage_again() -> None:
    """The process "dies" after committing its first tuning request and before publishing
    it; the resume publishes it once, and nothing of the stage is asked twice."""
    bus, store, subjects = MemoryBus(redeliver_delay_s=0.01), MemoryStore(), Subjects("ke")
    synth, judge = Recording(), SourceJudge()
    search = SearchService(bus, store, subjects)
    gw = GatewayService(bus, store, subjects, JudgeValidator(judge), SearchSettings(), "sessions/{session_id}/", "cpu")
    real = search._publish_outbox
    lost: list[str] = []

    async def dies_before_publishing_the_stage(session: Any, st: SearchState, nodes: Any, revision: int) -> None:
        if not lost and any(st.requests[r].tune for r in st.outbox_requests):
            lost.extend(st.outbox_requests)
            return
        await real(session, st, nodes, revision)

    search._publish_outbox = dies_before_publishing_the_stage  # type: ignore[method-assign]
    await search.subscribe()
    await SynthesizerService(bus, store, subjects, synth).subscribe()
    await EvaluatorService(bus, store, subjects, judge, "cpu").subscribe()
    session = await gw.start_session(spb.StartSessionRequest(spec=make_spec("linear_softmax", SPEC), budget=6,
                                                             max_inflight=1, tune_share=0.5))
    sid = session.session_id
    for _ in range(500):
        if lost:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.2)
    assert lost and not any(r.tune for r in synth.requests)  # nothing of the stage came without the resume

    await gw.resume(sid)

    async def follow() -> None:
        async for _env in gw.watch(sid):
            pass

    await asyncio.wait_for(follow(), 30)
    final = await gw.get_session(sid)
    assert final.status == pb.SESSION_STATUS_COMPLETED and final.evaluated == 6 and len(judge.evaluated) == 6
    entry = await bus.kv_get(Keys.search_state(sid))
    assert entry is not None
    st = SearchState.from_json(entry.value)
    stage = [rid for rid, r in st.requests.items() if r.tune]
    assert stage[0] == lost[0]  # the lost request was published again, not asked anew
    handled = [r.request_id for r in synth.requests if r.tune]
    assert sorted(set(handled)) == sorted(stage) and len(handled) == len(stage)  # each asked of it once
    nodes = [n for n in await search.nodes(sid) if request_of(n.node_id) in stage]
    assert len({(n.parent_id, n.transformation.params["set"]) for n in nodes}) == len(nodes)
    # a neighbour may be a twin of an earlier candidate (the elite's own parent): free, not judged
    assert len([n for n in nodes if n.evaluated and not n.duplicate_of]) == 3
    await bus.close()


@dataclass
class Sparse:
    """One seed, no structural children at all, and two launch neighbours per parent: the
    strategy stalls at once, and the stage runs out before the budget does."""

    name: str = "sparse"
    requests: list[ProposalRequest] = field(default_factory=list)

    def propose(self, request: ProposalRequest) -> list[Proposal]:
        self.requests.append(request)
        if request.parent is None:
            return [] if request.tried else [_module("seed", "seed")]
        if not request.tune:
            return []
        left = [v for v in ("a", "b") if v not in {t.params.get("set") for t in request.tried}]
        return [_module(f"{request.parent.candidate_id}/{v}", "tune", v) for v in left][:request.count]


def _module(tag: str, edge: str, value: str = "") -> Proposal:
    src = (f"TAG = {tag!r}\nimport torch\n\n\nclass ModelNew(torch.nn.Module):\n"
           "    def forward(self, x):\n        return x\n")
    return Proposal(source=src, transformation=Transformation(edge, {"set": value} if value else {}))


async def test_a_stalled_strategy_hands_over_early_and_an_exhausted_stage_hands_back() -> None:
    synth = Sparse()
    result = await run_session(SPEC, "linear_softmax", synthesizer=synth, judge=SourceJudge(), budget=8,
                               tune_share=0.25)
    # the stage began after one evaluation, long before its share (the last 2 of 8) was due
    assert [(r.parent.candidate_id if r.parent else "", r.tune) for r in synth.requests][:2] == \
        [("", False), ("r1-1", False)]
    assert any(r.tune for r in synth.requests[2:4])
    tuned = _tuned(result)
    assert {c.node.parent_id for c in tuned} == {"r1-1"} and len(tuned) == 2
    # out of neighbours, the structural search had the rest, and found nothing either
    assert any(r.parent is not None and r.parent.candidate_id in {c.node.node_id for c in tuned} and not r.tune
               for r in synth.requests)
    assert result.session.end_reason == "search space exhausted" and result.session.evaluated == 3


# -- the options ----------------------------------------------------------------------------

def test_the_gateway_applies_the_stage_defaults_and_takes_an_explicit_zero(tmp_path: Any) -> None:
    from ke_gateway.checks import check_start
    from kernelevolve.config import load_settings
    from kernelevolve.errors import InvalidArgumentError

    cfg = tmp_path / "ke.yaml"
    cfg.write_text("search:\n  session:\n    tune_share: 0.4\n")
    settings = load_settings(cfg, env={"KE_SEARCH_SESSION_TUNE_ELITE": "3"})
    spec = make_spec("toy", SPEC)

    def options(**kw: Any) -> tuple[float, int]:
        o = check_start(spb.StartSessionRequest(spec=spec, budget=8, **kw), settings.search, "cpu").options
        return o.tune_share, o.tune_elite

    assert options() == (0.4, 3)
    assert options(tune_share=0.0, tune_elite=1) == (0.0, 1)  # 0 turns the stage off, not "default"
    assert SearchSettings().session.tune_share == 0.25 and SearchSettings().session.tune_elite == 2
    for bad in ({"tune_share": -0.1}, {"tune_share": 1.0}, {"tune_elite": 0}):
        with pytest.raises(InvalidArgumentError, match=next(iter(bad))):
            options(**bad)


def test_optimize_takes_and_checks_the_tuning_flags(capsys: pytest.CaptureFixture[str], tmp_path: Any) -> None:
    from ke_cli.main import _parser, main

    args = _parser().parse_args(["optimize", "x.py", "--tune-share", "0", "--tune-elite", "3"])
    assert (args.tune_share, args.tune_elite) == (0.0, 3)
    unset = _parser().parse_args(["optimize", "x.py"])
    assert (unset.tune_share, unset.tune_elite) == (None, None)  # the configuration's defaults
    spec = tmp_path / "toy.py"
    spec.write_text(SPEC)
    for flags, message in ((["--tune-share", "1.5"], "--tune-share must be a fraction"),
                           (["--tune-elite", "0"], "--tune-elite must be at least 1")):
        with pytest.raises(SystemExit) as exc:
            main(["optimize", str(spec), "--out", str(tmp_path / "run"), *flags])
        assert exc.value.code != 0 and message in capsys.readouterr().err


def test_offline_and_llm_send_an_offline_candidates_tuning_to_the_compiler() -> None:
    from ke_synthesizer.composite import Hybrid

    class Named:
        def __init__(self, name: str) -> None:
            self.name, self.seen = name, 0

        def propose(self, request: ProposalRequest) -> list[Proposal]:
            self.seen += 1
            return []

    offline, llm = Named("offline"), Named("llm")
    hybrid = Hybrid(offline, llm)  # type: ignore[arg-type]
    compiled = ParentInfo("r1-1", "", Transformation("seed"), {"g0.BLOCK_SIZE": "1024"})
    written = ParentInfo("r2-1", "", Transformation("llm_expansion"), {"llm_model": "model-a"})
    hybrid.propose(ProposalRequest(SPEC, "s", parent=compiled, tune=True))
    assert (offline.seen, llm.seen) == (1, 0)
    hybrid.propose(ProposalRequest(SPEC, "s", parent=written, tune=True))  # the LLM's own kernel: the LLM tunes it
    hybrid.propose(ProposalRequest(SPEC, "s", parent=compiled))  # structural expansion: the LLM, as before
    assert (offline.seen, llm.seen) == (1, 2)


def test_skills_from_one_knob_tunings_weigh_that_knob_and_lead_the_sweep() -> None:
    from ke_synthesizer.offline.skills import skill_gains
    from kernelevolve.ports.knowledge import SkillHint
    from tests.unit.knowledge_fakes import FakeKnowledge

    def hint(name: str, params: dict[str, str], gain_low: float) -> SkillHint:
        return SkillHint(f"sk-{len(params)}-{gain_low}", name, params, "matmul", "nvidia",
                         gain_low + 0.1, gain_low, gain_low + 0.2, "", "active")

    fake = FakeKnowledge(skills=[hint("tune", {"set": "g1.BLOCK_N=256"}, 1.4),
                                 hint("tune", {"set": "g0.BLOCK_M=32,g0.num_warps=8"}, 1.9),  # two knobs: no weight
                                 hint("num_warps", {"group": "g0", "value": "2"}, 1.2)])
    gains = skill_gains(fake, SPEC, "nvidia")
    assert gains == {("BLOCK_N", "256"): pytest.approx(1.4), ("num_warps", "2"): pytest.approx(1.2)}
    seed = _seed()
    synth = OfflineSynthesizer(knowledge=fake)
    parent = ParentInfo("r1-1", seed.source, seed.transformation, seed.genome)
    first = synth.propose(ProposalRequest(SPEC, "linear_softmax", count=3, parent=parent, tune=True,
                                          hardware_kind="nvidia"))
    changes = [p.transformation.params["set"] for p in first]
    assert changes[0].endswith(".BLOCK_N=256") and changes[1].endswith(".num_warps=2")
