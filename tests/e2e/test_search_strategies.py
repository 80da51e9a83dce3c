"""Every search strategy through the real services in distributed mode: five processes
on one nats-server (module-scoped cluster), the real offline synthesizer and evaluator,
driven through the gateway. All sessions run at once, with small budgets, so the whole
module costs about one session's time. Plus the search options over gRPC: bad values
are refused with errors naming them, and a time limit ends a session with its best."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from ke_cli.client import KernelEvolveClient
from kernelevolve.errors import InvalidArgumentError
from kernelevolve.ports.strategy import STRATEGY_NAMES
from kernelevolve.spec import load_spec_file
from kernelevolve.v1 import common_pb2 as pb
from tests.conftest import EXAMPLES
from tests.e2e.cluster import Cluster

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.slow]

SPEC = "silu_clamp_mul.py"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    # One re-timing per session: the finalist; enough to show the reported best is re-timed.
    c = Cluster(tmp_path_factory.mktemp("strategies"),
                env={"KE_EVALUATOR_PARALLEL_WORKERS": "2", "KE_SEARCH_MAX_RETIMES": "1"}).start()
    try:
        yield c
    finally:
        c.stop()


async def _run(client: KernelEvolveClient, strategy: str, **options: object) -> tuple[pb.Session, list[str]]:
    spec = load_spec_file(EXAMPLES / SPEC)
    session = await client.start_session(spec, budget=3, strategy=strategy, max_inflight=2, **options)  # type: ignore[arg-type]
    events = [env.WhichOneof("payload") or "" async for env in client.watch(session.session_id)]
    return await client.get_session(session.session_id), events


async def test_every_strategy_ends_with_a_retimed_verified_best(cluster: Cluster) -> None:
    async with KernelEvolveClient(cluster.gateway) as client:
        await client.wait_ready(timeout_s=120)
        runs = await asyncio.wait_for(asyncio.gather(*(_run(client, s, seeds=2) for s in STRATEGY_NAMES)), 540)
        for strategy, (final, events) in zip(STRATEGY_NAMES, runs, strict=True):
            assert final.status == pb.SESSION_STATUS_COMPLETED, (strategy, final.error)
            assert final.evaluated == 3 and final.end_reason in ("budget", "search space exhausted"), strategy
            best = await client.get_candidate(final.session_id, final.best_candidate_id)
            assert best.node.status == pb.EVALUATION_STATUS_CORRECT and best.node.retimed, strategy
            assert "candidate_retimed" in events and final.seeds == 2
            nodes = await client.list_candidates(final.session_id)
            seeds = [n for n in nodes if not n.parent_id]
            assert len(seeds) >= min(2, len(nodes)), strategy  # the draft phase came first


async def test_search_options_are_validated_with_clear_errors(cluster: Cluster) -> None:
    spec = load_spec_file(EXAMPLES / SPEC)
    async with KernelEvolveClient(cluster.gateway) as client:
        await client.wait_ready(timeout_s=120)
        for options, words in (({"baseline": "jit"}, "baseline"), ({"plateau": -1}, "plateau"),
                               ({"target_roofline": 1.5}, "target_roofline"), ({"seeds": 9}, "seeds"),
                               ({"time_limit_s": -2.0}, "time_limit_s")):
            with pytest.raises(InvalidArgumentError, match=words):
                await client.start_session(spec, budget=3, **options)  # type: ignore[arg-type]


async def test_time_limit_ends_a_distributed_session_with_a_retimed_best(cluster: Cluster, tmp_path: Path) -> None:
    async with KernelEvolveClient(cluster.gateway) as client:
        await client.wait_ready(timeout_s=120)
        final, _events = await _run(client, "greedy", time_limit_s=1.0)
        assert final.status == pb.SESSION_STATUS_COMPLETED and final.end_reason == "time limit of 1 s"
        if final.best_candidate_id:  # a first evaluation may take longer than the limit on 2 cores
            best = await client.get_candidate(final.session_id, final.best_candidate_id)
            assert best.node.retimed
        summary = json.loads((cluster.store_root / "sessions" / final.session_id / "summary.json").read_text())
        assert summary["end_reason"] == "time limit of 1 s"
