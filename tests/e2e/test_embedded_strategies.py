"""Every search strategy end to end on the embedded stack: the five services in one process
over a real nats-server (JetStream data in the run folder), the real offline synthesizer
and evaluator, driven through the embedded gateway as ``kernelevolve optimize`` drives it.
The sessions run at once with small budgets, so the module costs about one session's time."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from ke_cli.client import KernelEvolveClient
from ke_cli.embedded import start_embedded
from kernelevolve.config import load_settings
from kernelevolve.ports.strategy import STRATEGY_NAMES
from kernelevolve.spec import load_spec_file
from kernelevolve.v1 import common_pb2 as pb
from tests.conftest import EXAMPLES

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.slow]

SPEC = "silu_clamp_mul.py"


async def test_every_strategy_ends_with_a_retimed_verified_best_on_the_embedded_stack(tmp_path: Path) -> None:
    settings = load_settings(env={"KE_KNOWLEDGE_EMBEDDER": "hash", "KE_EVALUATOR_CORRECTNESS_TRIALS": "2",
                                  "KE_EVALUATOR_PARALLEL_WORKERS": "2", "KE_SEARCH_MAX_RETIMES": "1",
                                  "KE_KNOWLEDGE_PATH": str(tmp_path / "knowledge")})
    async with AsyncExitStack() as stack:
        handles = await start_embedded(settings, tmp_path / "run", stack)
        client = KernelEvolveClient(handles.gateway.target)
        stack.push_async_callback(client.close)
        await client.wait_ready()
        spec = load_spec_file(EXAMPLES / SPEC)

        async def run(strategy: str) -> pb.Session:
            session = await client.start_session(spec, budget=3, strategy=strategy, max_inflight=2, seeds=2)
            async for _ in client.watch(session.session_id):
                pass
            return await client.get_session(session.session_id)

        finals = await asyncio.wait_for(asyncio.gather(*(run(s) for s in STRATEGY_NAMES)), 540)
        for strategy, final in zip(STRATEGY_NAMES, finals, strict=True):
            assert final.status == pb.SESSION_STATUS_COMPLETED, (strategy, final.error)
            assert final.strategy == strategy and final.evaluated == 3, strategy
            best = await client.get_candidate(final.session_id, final.best_candidate_id)
            assert best.node.status == pb.EVALUATION_STATUS_CORRECT and best.node.retimed, strategy
