"""A candidate that crashes, hangs or is wrong is a verdict, never a crashed session."""

from __future__ import annotations

from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest

from ke_cli.client import KernelEvolveClient
from ke_cli.embedded import start_embedded
from kernelevolve.config import load_settings
from kernelevolve.ports.synthesis import Proposal, ProposalRequest, Transformation
from kernelevolve.spec import load_spec_file
from kernelevolve.v1 import common_pb2 as pb
from tests.conftest import EXAMPLES

pytestmark = pytest.mark.e2e

GOOD = (Path(__file__).parent / "candidates" / "relu_scale_add_wrong_scale.py").read_text().replace("* 2.4", "* 2.5")
SEGFAULT = (Path(__file__).parent / "candidates" / "relu_scale_add_oob_segfault.py").read_text()
CTYPES = GOOD.replace("x = x.contiguous()", "import ctypes\n        ctypes.string_at(0)")
HANG = GOOD.replace("x = x.contiguous()", "while True:\n            pass")
SYNTAX = "class ModelNew(:\n"
RAISES = GOOD.replace("x = x.contiguous()", "raise RuntimeError('kernel launch failed on purpose')")


@dataclass
class Scripted:
    """Hands out a fixed list of sources, in order, one per requested candidate."""

    sources: list[tuple[str, str]]
    name: str = "scripted"

    def propose(self, request: ProposalRequest) -> list[Proposal]:
        out = []
        while self.sources and len(out) < request.count:
            label, src = self.sources.pop(0)
            out.append(Proposal(source=src, transformation=Transformation("scripted", {"case": label})))
        return out


async def test_crash_hang_and_errors_are_verdicts(tmp_path: Path) -> None:
    settings = load_settings(env={"KE_KNOWLEDGE_EMBEDDER": "hash", "KE_EVALUATOR_CORRECTNESS_TRIALS": "2",
                                  "KE_EVALUATOR_COMPILE_TIMEOUT_S": "60", "KE_EVALUATOR_RUN_TIMEOUT_S": "8"})
    script = Scripted([("segfault", SEGFAULT), ("hang", HANG), ("syntax", SYNTAX), ("raises", RAISES),
                       ("ctypes", CTYPES), ("good", GOOD)])
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    async with AsyncExitStack() as stack:
        handles = await start_embedded(settings, run_dir, stack, synthesizer=script)
        async with KernelEvolveClient(handles.gateway.target) as client:
            await client.wait_ready()
            session = await client.start_session(load_spec_file(EXAMPLES / "relu_scale_add.py"), budget=6,
                                                 max_inflight=1)
            async for _ in client.watch(session.session_id):
                pass
            final = await client.get_session(session.session_id)
            nodes = {n.transformation.params["case"]: n for n in await client.list_candidates(session.session_id)}
    assert final.status == pb.SESSION_STATUS_COMPLETED and final.evaluated == 6
    name = pb.EvaluationStatus.Name
    assert name(nodes["segfault"].status) == "EVALUATION_STATUS_CRASHED"
    assert name(nodes["hang"].status) == "EVALUATION_STATUS_TIMEOUT"
    assert name(nodes["syntax"].status) == "EVALUATION_STATUS_COMPILE_ERROR"
    assert name(nodes["raises"].status) == "EVALUATION_STATUS_RUNTIME_ERROR"
    assert "failed on purpose" in nodes["raises"].reason
    assert name(nodes["ctypes"].status) == "EVALUATION_STATUS_REJECTED"  # static policy, never run
    # The worker that crashed or hung was replaced: the last candidate is judged normally.
    assert name(nodes["good"].status) == "EVALUATION_STATUS_CORRECT"
    assert final.best_candidate_id == nodes["good"].node_id
    assert all(nodes[c].buggy for c in ("segfault", "hang", "syntax", "raises"))
    assert not nodes["ctypes"].buggy
