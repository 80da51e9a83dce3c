"""Knowledge that outlives a run, end to end: documents added and searched with the CLI,
skills listed, shown and retired with ``--json``, on the user-level folder and through
the gateway; and the full path of a skill (evaluation event on NATS -> knowledge
service -> Qdrant local folder -> retrieved by the next session)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from contextlib import AsyncExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ke_knowledge.base import KnowledgeBase
from ke_knowledge.convert import measurement_from_result
from ke_knowledge.distill import SkillContext, distill_skill
from kernelevolve.bus.envelope import envelope
from kernelevolve.bus.nats_server import NatsServer
from kernelevolve.bus.subjects import Keys, Subjects
from kernelevolve.config import Settings, default_knowledge_dir
from kernelevolve.knowledge_client import GrpcKnowledgeReader
from kernelevolve.runtime import connect_bus
from kernelevolve.spec import make_spec
from kernelevolve.v1 import common_pb2 as pb
from kernelevolve.v1 import events_pb2 as ev
from kernelevolve.vector import HashEmbedder, QdrantIndex
from tests.knowledge.gpu_results import gpu_result

pytestmark = pytest.mark.e2e

CLI = [sys.executable, "-m", "ke_cli.main"]
TOKEN = "knowledge-test-token"
NOTES = """# MI300X notes

## Wavefronts
Wavefronts have 64 lanes on CDNA3; num_warps counts wavefronts in Triton on AMD.

## LDS
Each compute unit has 64 KB of LDS; tiles times stages must fit in it.
"""
SPEC = ("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
        "        return torch.nn.functional.gelu(x) * 2\ndef get_inputs():\n    return [torch.randn(37, 41)]\n"
        "def get_init_inputs():\n    return []\n")


async def _cli(*args: str, cwd: Path, expect: int = 0) -> Any:
    env = dict(os.environ, KE_KNOWLEDGE_EMBEDDER="hash")
    proc = await asyncio.create_subprocess_exec(*CLI, *args, cwd=cwd, env=env, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 180)
    assert proc.returncode == expect, err.decode()
    return json.loads(out) if expect == 0 and "--json" in args else err.decode()


async def _seed_skill(folder: Path) -> str:
    parent, child = measurement_from_result(gpu_result("p", 2.0)), measurement_from_result(gpu_result("c", 1.0))
    skill = distill_skill("s0", "c", SkillContext("gelu", "pointwise", "medium", "", "nvidia"), "BLOCK_SIZE",
                          {"group": "g0", "value": "4096"}, parent, child)
    assert skill is not None
    kb = KnowledgeBase(QdrantIndex(path=folder, shared=True), HashEmbedder(), "kernelevolve")
    await kb.start()
    await kb.add_skill(skill)
    return skill.skill_id


def _main(capsys: pytest.CaptureFixture[str], *args: str, expect: int = 0) -> Any:
    """The command in this process (``ke_cli.main.main``): the same code path without a
    process start per call; the gateway test below runs it as a subprocess."""
    from ke_cli.main import main

    with pytest.raises(SystemExit) as stop:
        main(list(args))
    out = capsys.readouterr()
    assert stop.value.code == expect, out.err
    return json.loads(out.out) if expect == 0 and "--json" in args else out.err


def test_knowledge_and_skills_commands_on_the_user_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KE_KNOWLEDGE_EMBEDDER", "hash")
    notes = tmp_path / "mi300_notes.md"
    notes.write_text(NOTES)
    skill_id = asyncio.run(_seed_skill(default_knowledge_dir(os.environ)))
    added = _main(capsys, "knowledge", "add", str(notes), "--hardware", "amd", "--json")
    assert added["added"] == 2 and len(added["doc_ids"]) == 2  # one chunk per section
    found = _main(capsys, "knowledge", "search", "LDS per compute unit tiles stages", "--hardware", "amd", "--json")
    top = found["results"][0]
    assert top["doc_id"] in added["doc_ids"] and "LDS" in top["title"] and top["hardware_kind"] == "amd"
    assert all(r["hardware_kind"] in ("amd", "") for r in found["results"])
    listed = _main(capsys, "skills", "list", "--hardware", "nvidia", "--json")
    assert [s["skill_id"] for s in listed["skills"]] == [skill_id]
    shown = _main(capsys, "skills", "show", skill_id, "--json")["skill"]
    assert shown["detail"]["transformation"]["name"] == "BLOCK_SIZE" and shown["detail"]["gain_low"] > 1
    retired = _main(capsys, "skills", "retire", skill_id, "--reason", "slower on odd shapes", "--json")["skill"]
    assert retired["detail"]["status"] == "retired" and retired["detail"]["status_reason"] == "slower on odd shapes"
    assert _main(capsys, "skills", "list", "--json")["skills"] == []
    assert len(_main(capsys, "skills", "list", "--all", "--json")["skills"]) == 1
    assert "no skill" in _main(capsys, "skills", "show", "skill-missing", expect=1)
    assert "Added 2 document(s) from 1 file(s)." in _plain_add(capsys, notes)


def _plain_add(capsys: pytest.CaptureFixture[str], notes: Path) -> str:
    from ke_cli.main import main

    with pytest.raises(SystemExit):
        main(["knowledge", "add", str(notes), "--hardware", "amd"])
    return capsys.readouterr().out


async def _stack(settings: Settings, stack: AsyncExitStack) -> tuple[str, str, Any]:
    """The knowledge service and the gateway on a real NATS, as a deployment runs them."""
    from ke_gateway import app as gateway_app
    from ke_gateway.validator import Validation
    from ke_knowledge import app as knowledge_app

    class NoSpecs:  # these tests start no session: nothing is validated
        async def validate(self, spec: pb.OperatorSpec, timeout_s: float | None = None) -> Validation:
            return Validation(False, "no evaluator in this test")

    knowledge = await knowledge_app.start(settings, stack, port=0)
    gateway = await gateway_app.start(settings, stack, port=0, validator=NoSpecs(), knowledge_target=knowledge.target)
    return knowledge.target, gateway.target, await connect_bus(settings.bus, "test", stack)


async def _inject_step(bus: Any, sid: str) -> None:
    """A session's parent and child evaluations, published where the evaluator publishes them."""
    subjects = Subjects("ke")
    session = pb.Session(session_id=sid, spec=make_spec("gelu_double", SPEC), hardware=pb.HardwareTarget(kind="nvidia"))
    await bus.kv_put(Keys.session(sid), session.SerializeToString())
    step = pb.Transformation(name="BLOCK_SIZE", params={"group": "g0", "value": "4096"})
    for cand in (pb.Candidate(candidate_id="r0-0", session_id=sid, genome={"g0.BLOCK_SIZE": "1024"}),
                 pb.Candidate(candidate_id="r1-0", session_id=sid, parent_id="r0-0", transformation=step,
                              genome={"g0.BLOCK_SIZE": "4096"})):
        await bus.kv_put(Keys.candidate(sid, cand.candidate_id), cand.SerializeToString())
    for result in (gpu_result("r0-0", 0.40), gpu_result("r1-0", 0.25)):
        await bus.publish(subjects.evaluation(sid), envelope(sid, evaluation_completed=ev.EvaluationCompleted(
            session_id=sid, result=result)))


async def test_skill_outlives_its_session_and_the_gateway_serves_knowledge(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    async def cli(*args: str) -> Any:  # in a worker thread: this loop serves the gateway meanwhile
        return await asyncio.to_thread(_main, capsys, *args)

    folder = tmp_path / "shared-knowledge"
    base = Settings()
    settings = replace(base, knowledge=replace(base.knowledge, path=str(folder), embedder="hash"),
                       auth=replace(base.auth, tokens=TOKEN))
    server = NatsServer(tmp_path / "nats").start()
    try:
        settings = replace(settings, bus=replace(settings.bus, url=server.url))
        async with AsyncExitStack() as stack:  # the first session: it distils a skill
            k_target, _, bus = await _stack(settings, stack)
            await _inject_step(bus, "s1")
            reader = GrpcKnowledgeReader(k_target, token=TOKEN)
            for _ in range(100):
                hints = await asyncio.to_thread(reader.skills, hardware_kind="nvidia", op_family="pointwise")
                if hints:
                    break
                await asyncio.sleep(0.1)
            reader.close()
            assert [h.transformation for h in hints] == ["BLOCK_SIZE"]
        async with AsyncExitStack() as stack:  # the next session, new processes' worth of services
            k_target, gw_target, _ = await _stack(settings, stack)
            reader = GrpcKnowledgeReader(k_target, token=TOKEN)
            (hint,) = await asyncio.to_thread(reader.skills, hardware_kind="nvidia", op_family="pointwise")
            reader.close()
            assert hint.params == {"group": "g0", "value": "4096"} and hint.gain == pytest.approx(1.6)
            # the next session's search service reads it as a prior (through the port, over gRPC)
            from ke_search import app as search_app

            search = await search_app.start(settings, stack, port=0, knowledge_target=k_target)
            nxt = pb.Session(session_id="s2", spec=make_spec("gelu_double", SPEC),
                             hardware=pb.HardwareTarget(kind="nvidia"))
            await search.service._load_priors(nxt)
            assert search.service._priors["s2"].bonus(pb.Transformation(name="BLOCK_SIZE", params=hint.params)) == 1.0
            gw = ["--gateway", gw_target, "--token", TOKEN, "--json"]
            listed = await cli("skills", "list", *gw)
            assert [s["skill_id"] for s in listed["skills"]] == [hint.skill_id]
            assert listed["skills"][0]["detail"]["provenance"]["session"] == "s1"
            shown = (await cli("skills", "show", hint.skill_id, *gw))["skill"]
            assert shown["detail"]["before"] == "g0.BLOCK_SIZE=1024"
            notes = tmp_path / "notes.md"
            notes.write_text(NOTES)
            assert (await cli("knowledge", "add", str(notes), "--hardware", "amd", *gw))["added"] == 2
            found = await cli("knowledge", "search", "wavefronts 64 lanes", "--hardware", "amd", *gw)
            assert "Wavefronts" in found["results"][0]["title"]
            retired = (await cli("skills", "retire", hint.skill_id, *gw))["skill"]
            assert retired["detail"]["status"] == "retired"
            # as a user runs it, a process: a wrong token is refused by the gateway's guard
            refused = await _cli("skills", "list", "--gateway", gw_target, "--token", "wrong", cwd=tmp_path, expect=1)
            assert "refused" in refused
    finally:
        server.stop()
