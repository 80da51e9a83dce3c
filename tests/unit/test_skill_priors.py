"""Skills bias a search: MCTS expansion and island choice (ke_search.priors) and the
offline synthesizer's transformation order (ke_synthesizer.offline.skills), all read
through the knowledge port."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from ke_search.priors import NO_PRIORS, SkillPriors
from ke_search.service import SearchService
from ke_search.strategy import MCTS, Islands, make_strategy
from ke_synthesizer.offline.skills import skill_gains
from ke_synthesizer.offline.space import Knob, skill_weighted
from kernelevolve.bus.memory import MemoryBus
from kernelevolve.bus.subjects import Subjects
from kernelevolve.errors import NotFoundError
from kernelevolve.ports.knowledge import SkillHint
from kernelevolve.ports.strategy import ROOT
from kernelevolve.spec import make_spec
from kernelevolve.store import MemoryStore
from kernelevolve.v1 import common_pb2 as pb
from tests.unit.knowledge_fakes import FakeKnowledge

SOFTMAX = "import torch\ndef f(x):\n    return torch.softmax(x, dim=-1)\n"


def _hint(name: str, value: str, gain_low: float, status: str = "active", family: str = "reduction") -> SkillHint:
    return SkillHint(f"sk-{name}-{value}", name, {"group": "g0", "value": value}, family, "nvidia",
                     gain_low + 0.1, gain_low, gain_low + 0.2, "", status)


def _node(nid: str, parent: str, name: str, value: str, fitness: float = 1.0) -> pb.Node:
    return pb.Node(node_id=nid, parent_id=parent, evaluated=True, status=pb.EVALUATION_STATUS_CORRECT,
                   fitness=fitness, transformation=pb.Transformation(name=name, params={"group": "g0", "value": value}))


def test_bonus_is_relative_log_gain_demoted_half_retired_none() -> None:
    priors = SkillPriors([_hint("num_warps", "8", 1.44), _hint("BLOCK_SIZE", "2048", 1.2),
                          _hint("fusion", "none", 1.44, "demoted"), _hint("impl", "lib", 3.0, "retired")])
    t = pb.Transformation
    assert priors.bonus(t(name="num_warps", params={"group": "g0", "value": "8"})) == pytest.approx(1.0)
    assert priors.bonus(t(name="BLOCK_SIZE", params={"group": "g0", "value": "2048"})) == pytest.approx(0.5)
    assert priors.bonus(t(name="fusion", params={"group": "g0", "value": "none"})) == pytest.approx(0.5)
    assert priors.bonus(t(name="num_warps", params={"group": "g0", "value": "4"})) == 0.0
    assert priors.bonus(t(name="impl", params={"group": "g0", "value": "lib"})) == 0.0
    assert not NO_PRIORS and len(priors) == 3


def test_mcts_expands_the_child_a_skill_backs_among_equals() -> None:
    nodes = [_node("r0-0", ROOT, "num_warps", "4"), _node("r0-1", ROOT, "num_warps", "8")]
    assert MCTS().select_parent(nodes, set()) == "r0-0"  # no priors: the first of equals
    priors = SkillPriors([_hint("num_warps", "8", 1.3)])
    assert MCTS(priors=priors).select_parent(nodes, set()) == "r0-1"
    assert make_strategy("mcts", priors).select_parent(nodes, set()) == "r0-1"


def test_islands_prefer_the_backed_member_among_equally_fit() -> None:
    seeds = [_node(f"r0-{i}", ROOT, "seed", str(i)) for i in range(2)]
    kids = [_node("r1-0", "r0-0", "num_warps", "4", 2.0), _node("r1-1", "r0-0", "num_warps", "8", 2.0)]
    nodes = seeds + kids
    plain = Islands(islands=2).select_parent(nodes, {ROOT})
    backed = Islands(islands=2, priors=SkillPriors([_hint("num_warps", "4", 1.3)])).select_parent(nodes, {ROOT})
    assert plain == "r1-1" and backed == "r1-0"  # without priors the larger id wins a tie


def test_synthesizer_orders_transformations_by_skill_gain() -> None:
    fake = FakeKnowledge(skills=[_hint("num_warps", "8", 1.3), _hint("BLOCK_SIZE", "2048", 1.6),
                                 _hint("num_warps", "2", 1.5, "demoted"), _hint("BLOCK_SIZE", "64", 1.9,
                                                                                 family="matmul")])
    gains = skill_gains(fake, SOFTMAX, "nvidia")
    assert gains == {("num_warps", "8"): pytest.approx(1.3), ("BLOCK_SIZE", "2048"): pytest.approx(1.6),
                     ("num_warps", "2"): pytest.approx(1.25)}
    warps = Knob("g0.num_warps", "num_warps", "g0", ("4", "2", "8"))
    block = Knob("g0.BLOCK_SIZE", "BLOCK_SIZE", "g0", ("1024", "2048", "64"))
    edges = [(warps, "2"), (block, "64"), (warps, "8"), (block, "2048")]
    assert skill_weighted(edges, gains) == [(block, "2048"), (warps, "8"), (warps, "2"), (block, "64")]
    assert skill_weighted(edges, {}) == edges


@dataclass
class _Failing:
    name = "failing"

    def skills(self, **kw: object) -> list[SkillHint]:
        from kernelevolve.errors import IndexUnavailable

        raise IndexUnavailable("knowledge service down")


async def test_search_service_reads_priors_through_the_port_at_session_start() -> None:
    fake = FakeKnowledge(skills=[_hint("num_warps", "8", 1.3)])
    service = SearchService(MemoryBus(), MemoryStore(), Subjects("ke"), knowledge=fake, prior_skills=5)
    session = pb.Session(session_id="s1", spec=make_spec("softmax", SOFTMAX), hardware=pb.HardwareTarget(kind="nvidia"))
    await service._load_priors(session)
    assert len(service._priors["s1"]) == 1 and fake.calls == 1
    down = SearchService(MemoryBus(), MemoryStore(), Subjects("ke"), knowledge=_Failing(),  # type: ignore[arg-type]
                         prior_skills=5)
    await down._load_priors(session)  # a search without priors is still a search
    assert not down._priors["s1"]


def test_offline_synthesizer_seeds_and_expands_skill_backed_transformations_first() -> None:
    from ke_synthesizer.offline import OfflineSynthesizer
    from kernelevolve.ports.synthesis import ParentInfo, ProposalRequest, Transformation
    from tests.conftest import EXAMPLES

    source = (EXAMPLES / "softmax_rows.py").read_text()
    fake = FakeKnowledge(skills=[_hint("num_warps", "2", 1.3)])  # softmax: the "reduction" family
    synth = OfflineSynthesizer(knowledge=fake)
    assert ("g0.num_warps", ["4", "1", "2", "8"]) in synth.space(source, "softmax_rows")
    seeds = synth.propose(ProposalRequest(source, "softmax_rows", count=2, hardware_kind="nvidia"))
    assert [s.transformation.params["variant"] for s in seeds] == ["default", "g0.num_warps=2"]
    parent = ParentInfo("r0-0", seeds[0].source, Transformation("seed", {"variant": "default"}), seeds[0].genome)
    (child,) = synth.propose(ProposalRequest(source, "softmax_rows", count=1, parent=parent, hardware_kind="nvidia"))
    assert (child.transformation.name, child.transformation.params["value"]) == ("num_warps", "2")
    assert fake.calls == 2


async def test_a_restarted_search_service_reads_priors_again_on_the_next_evaluation() -> None:
    from kernelevolve.bus.subjects import Keys
    from kernelevolve.v1 import events_pb2 as ev

    bus = MemoryBus()
    session = pb.Session(session_id="s1", spec=make_spec("softmax", SOFTMAX), hardware=pb.HardwareTarget(kind="nvidia"))
    await bus.kv_put(Keys.session("s1"), session.SerializeToString())
    fake = FakeKnowledge(skills=[_hint("num_warps", "8", 1.3)])
    service = SearchService(bus, MemoryStore(), Subjects("ke"), knowledge=fake, prior_skills=5)
    msg = ev.EvaluationCompleted(session_id="s1", result=pb.EvaluationResult(candidate_id="r0-0"))
    with pytest.raises(NotFoundError):  # no such candidate: only the priors matter here
        await service._on_evaluation(msg)
    assert len(service._priors["s1"]) == 1
    await bus.close()
