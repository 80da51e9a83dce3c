"""The agent loop end to end: a scripted external agent answers the `agent` synthesizer's
requests and the session finds a correct kernel, over gRPC on the embedded stack, over the
CLI against a running `kernelevolve optimize --synthesizer agent` (another process), and
over gRPC against the distributed cluster."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from ke_cli.client import KernelEvolveClient
from ke_cli.embedded import start_embedded
from kernelevolve.config import load_settings
from kernelevolve.errors import ConflictError, InvalidArgumentError, NotFoundError
from kernelevolve.spec import load_spec_file
from kernelevolve.v1 import common_pb2 as pb
from tests.agent.scripted import answer
from tests.e2e.cluster import Cluster

pytestmark = pytest.mark.e2e

SPEC = Path(__file__).parent / "specs" / "clamp_scale.py"
CLI = [sys.executable, "-m", "ke_cli.main"]
FAST = {"KE_KNOWLEDGE_EMBEDDER": "hash", "KE_EVALUATOR_CORRECTNESS_TRIALS": "2", "KE_AGENT_POLL_S": "0.05"}


async def _scripted_agent(client: KernelEvolveClient, session_id: str, done: asyncio.Event) -> list[str]:
    """Take each of the session's requests and answer it, until the session ends."""
    answered = []
    while not done.is_set():
        try:
            rec = await client.agent_next(session_id, agent="scripted-agent", wait_s=1.0)
        except NotFoundError:
            continue
        assert "ModelNew" in rec.prompt and "clamp" in rec.prompt and "Tensor(shape=(7, 333)" in rec.prompt
        assert rec.spec.source == SPEC.read_text()
        if rec.parent_id:  # the LLM's expansion prompt: the parent with its verdict and timings
            assert rec.parent_source.strip() in rec.prompt and "status: correct" in rec.prompt, rec.prompt
            assert "candidate median" in rec.prompt and "reference median" in rec.prompt, rec.prompt
        await client.agent_submit(rec.request_id, answer(rec.parent_source), agent="scripted-agent")
        answered.append(rec.request_id)
    return answered


async def _run_session(client: KernelEvolveClient, budget: int) -> tuple[pb.Session, list[str]]:
    session = await client.start_session(load_spec_file(SPEC), budget=budget, max_inflight=1)
    done = asyncio.Event()
    agent = asyncio.create_task(_scripted_agent(client, session.session_id, done))
    try:
        async for _ in client.watch(session.session_id):
            pass
    finally:
        done.set()
    answered = await asyncio.wait_for(agent, 30)
    return await client.get_session(session.session_id), answered


async def _check_best(client: KernelEvolveClient, final: pb.Session) -> None:
    assert final.status == pb.SESSION_STATUS_COMPLETED and final.best_candidate_id, final
    best = await client.get_candidate(final.session_id, final.best_candidate_id)
    assert best.node.status == pb.EVALUATION_STATUS_CORRECT
    assert best.candidate.transformation.name == "agent" and best.candidate.synthesizer == "agent"
    assert "written by scripted-agent" in best.candidate.description
    assert "_clamp_scale" in best.source


async def test_embedded_agent_loop_over_grpc_with_refusals(tmp_path: Path) -> None:
    settings = load_settings(env={**FAST, "KE_SYNTHESIZER_KIND": "agent"})
    async with AsyncExitStack() as stack:
        handles = await start_embedded(settings, tmp_path, stack)
        client = KernelEvolveClient(handles.gateway.target)
        stack.push_async_callback(client.close)
        await client.wait_ready()

        with pytest.raises(NotFoundError, match="refused: unknown request"):
            await client.agent_submit("nosuch.r1-1.1", answer(""))
        final, answered = await _run_session(client, budget=2)
        await _check_best(client, final)
        assert final.evaluated == 2 and len(answered) == 2
        with pytest.raises(ConflictError, match="already answered"):
            await client.agent_submit(answered[0], answer(""))


async def test_an_unanswered_request_is_re_offered_then_abandoned_and_the_session_ends(tmp_path: Path) -> None:
    settings = load_settings(env={**FAST, "KE_SYNTHESIZER_KIND": "agent", "KE_AGENT_TIMEOUT_S": "3",
                                  "KE_AGENT_MAX_OFFERS": "2"})
    async with AsyncExitStack() as stack:
        handles = await start_embedded(settings, tmp_path, stack)
        client = KernelEvolveClient(handles.gateway.target)
        stack.push_async_callback(client.close)
        await client.wait_ready()
        # Nobody answers this session: each offer times out (3 s), is re-offered once, then
        # the node is abandoned and the session still ends, the exhausted event naming why.
        lonely = await client.start_session(load_spec_file(SPEC), budget=1)
        taken = await client.agent_next(lonely.session_id, agent="too-slow", wait_s=10.0)
        with pytest.raises(InvalidArgumentError, match="defining ModelNew"):
            await client.agent_submit(taken.request_id, "x = 1\n")
        await asyncio.sleep(3.3)
        with pytest.raises(ConflictError, match="expired"):
            await client.agent_submit(taken.request_id, answer(""))
        async with asyncio.timeout(60):
            events = [env async for env in client.watch(lonely.session_id)]
        reasons = [e.candidate_request_exhausted.reason for e in events
                   if e.WhichOneof("payload") == "candidate_request_exhausted"]
        assert reasons and "after 2 offer(s) of 3s each: node abandoned" in reasons[0], reasons
        ended = await client.get_session(lonely.session_id)
        assert ended.status == pb.SESSION_STATUS_COMPLETED and not ended.best_candidate_id
        with pytest.raises(NotFoundError):
            await client.agent_next(lonely.session_id)

        # A cancelled session's requests are given up: no one is offered dead work.
        dropped = await client.start_session(load_spec_file(SPEC), budget=1)
        held = await client.agent_next(dropped.session_id, agent="late", wait_s=10.0)
        await client.cancel(dropped.session_id)
        async with asyncio.timeout(60):
            async for _ in client.watch(dropped.session_id):
                pass
        await asyncio.sleep(2.5)  # the waiting synthesizer looks at its session every 2 s
        with pytest.raises(ConflictError, match=f"session {dropped.session_id} ended"):
            await client.agent_submit(held.request_id, answer(""))


async def _acli(*args: str, env: dict[str, str], cwd: Path) -> tuple[int, dict[str, object]]:
    proc = await asyncio.create_subprocess_exec(*CLI, *args, cwd=cwd, env=env, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert out.strip(), err.decode()[-2000:]
    return proc.returncode or 0, json.loads(out)


async def test_cli_agent_commands_answer_an_embedded_session(tmp_path: Path) -> None:
    """`agent next/submit --json` against a running embedded stack's gateway: exit codes,
    refusals and an accepted answer that becomes the session's correct best kernel."""
    settings = load_settings(env={**FAST, "KE_SYNTHESIZER_KIND": "agent"})
    env = dict(os.environ, **FAST, XDG_STATE_HOME=str(tmp_path / "state"))
    async with AsyncExitStack() as stack:
        handles = await start_embedded(settings, tmp_path / "run", stack)
        gw = ["--gateway", handles.gateway.target, "--json"]
        client = KernelEvolveClient(handles.gateway.target)
        stack.push_async_callback(client.close)
        await client.wait_ready()

        session = await client.start_session(load_spec_file(SPEC), budget=1, max_inflight=1)
        code, req = await _acli("agent", "next", "--session", session.session_id, "--wait", "20", "--as", "me",
                                "--dir", "req", *gw, env=env, cwd=tmp_path)
        # (exit 3 with nothing pending, and refusals of unknown ids: the slow CLI test below)
        assert code == 0 and req["session_id"] == session.session_id and req["parent"] is None
        assert (tmp_path / "req" / "spec.py").read_text() == SPEC.read_text()
        bad = tmp_path / "bad.py"
        bad.write_text("import torch\n")
        code, doc = await _acli("agent", "submit", "--request", str(req["request_id"]), str(bad), *gw,
                                env=env, cwd=tmp_path)
        assert code == 2 and doc["status"] == "bad_input" and "ModelNew" in str(doc["error"])
        good = tmp_path / "good.py"
        good.write_text(answer(""))
        code, doc = await _acli("agent", "submit", "--request", str(req["request_id"]), str(good), *gw,
                                env=env, cwd=tmp_path)
        assert code == 0 and doc["status"] == "accepted" and doc["candidate_id"] == req["candidate_id"]
        async with asyncio.timeout(240):
            async for _ in client.watch(session.session_id):
                pass
        final = await client.get_session(session.session_id)
        assert final.best_candidate_id == req["candidate_id"]
        best = await client.get_candidate(session.session_id, final.best_candidate_id)
        assert best.node.status == pb.EVALUATION_STATUS_CORRECT and "written by me" in best.candidate.description


def _cli(args: list[str], env: dict[str, str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_cli_agent_answers_a_running_embedded_optimize(tmp_path: Path) -> None:
    env = dict(os.environ, **FAST, XDG_STATE_HOME=str(tmp_path / "state"))
    # Nothing running yet: a clear answer and exit code 3.
    none = _cli(["agent", "next", "--json"], env, tmp_path)
    assert none.returncode == 3 and json.loads(none.stdout)["status"] == "none_pending"

    optimize = subprocess.Popen([*CLI, "optimize", str(SPEC), "--synthesizer", "agent", "--budget", "2",
                                 "--max-inflight", "1", "--json", "--out", "run", "--timeout", "400"],
                                cwd=tmp_path, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    answered: list[dict[str, object]] = []
    errors: list[str] = []

    def scripted_agent() -> None:
        try:
            answer_all()
        except Exception as exc:  # noqa: BLE001 - reported by the test, and the session stopped
            errors.append(repr(exc))
        if errors:
            optimize.terminate()

    def answer_all() -> None:
        while optimize.poll() is None:
            nxt = _cli(["agent", "next", "--json", "--wait", "5", "--as", "cli-agent", "--dir", "req"], env, tmp_path)
            if nxt.returncode == 3:
                time.sleep(0.5)
                continue
            if nxt.returncode != 0:
                try:  # a wait cut short by the session's end (the gateway stopping) is no error
                    optimize.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    errors.append(nxt.stderr + nxt.stdout)
                return
            req = json.loads(nxt.stdout)
            parent = Path(req["files"]["parent"]).read_text() if req["parent"] else ""
            assert Path(req["files"]["prompt"]).read_text() == req["prompt"]
            cand = tmp_path / f"{req['candidate_id']}.py"
            cand.write_text(answer(parent))
            sub = _cli(["agent", "submit", "--request", req["request_id"], str(cand), "--json", "--as", "cli-agent"],
                       env, tmp_path)
            if sub.returncode != 0:
                errors.append(sub.stderr + sub.stdout)
                return
            answered.append(json.loads(sub.stdout))
            again = _cli(["agent", "submit", "--request", req["request_id"], str(cand), "--json"], env, tmp_path)
            if again.returncode != 1 or json.loads(again.stdout)["status"] != "refused":
                errors.append(f"a second answer was not refused: {again.stdout} {again.stderr}")

    agent = threading.Thread(target=scripted_agent)
    agent.start()
    out, err = optimize.communicate(timeout=540)
    agent.join(timeout=120)
    assert not errors, errors
    assert optimize.returncode == 0, err[-3000:]
    summary = json.loads(out)
    assert summary["best"]["transformation"] == "agent" and summary["evaluated"] == 2
    assert len(answered) == 2 and {a["status"] for a in answered} == {"accepted"}
    assert "_clamp_scale" in (tmp_path / "run" / "best_kernel.py").read_text()
    assert not list((tmp_path / "state" / "kernelevolve" / "embedded").glob("*.json"))  # unregistered at exit


@pytest.mark.integration
async def test_distributed_agent_loop_over_grpc(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, env={"KE_SYNTHESIZER_KIND": "agent", "KE_AGENT_POLL_S": "0.05"}).start()
    try:
        async with KernelEvolveClient(cluster.gateway) as client:
            await client.wait_ready(timeout_s=120)
            # StartSession validates the spec on the evaluator: wait until it serves too
            await cluster.wait_log("evaluator", "service ready")
            final, answered = await _run_session(client, budget=2)
            await _check_best(client, final)
            assert len(answered) == 2
    finally:
        cluster.stop()


async def test_agent_rpcs_need_the_token_like_every_gateway_call(tmp_path: Path) -> None:
    from ke_cli.client import AuthenticationError

    settings = load_settings(env={**FAST, "KE_SYNTHESIZER_KIND": "agent", "KE_AUTH_TOKENS": "sekret"})
    async with AsyncExitStack() as stack:
        handles = await start_embedded(settings, tmp_path, stack)
        async with KernelEvolveClient(handles.gateway.target) as anonymous:
            with pytest.raises(AuthenticationError):
                await anonymous.agent_next()
            with pytest.raises(AuthenticationError):
                await anonymous.agent_submit("s.r1-1.1", answer(""))
        async with KernelEvolveClient(handles.gateway.target, token="sekret") as client:
            with pytest.raises(NotFoundError, match="no agent request pending"):
                await client.agent_next()


@pytest.mark.slow
@pytest.mark.integration
def test_cli_agent_finds_the_local_cluster_and_its_token(tmp_path: Path) -> None:
    """`kernelevolve up` with the agent synthesizer: `agent next/submit` with no --gateway ask
    the local cluster's gateway with the cluster's own token."""
    env = dict(os.environ, **FAST, KE_CLUSTER_STATE_DIR=str(tmp_path / "cluster"), KE_CLIENT_TOKEN="",
               KE_SYNTHESIZER_KIND="agent", XDG_STATE_HOME=str(tmp_path / "xdg"))
    up = _cli(["up", "--json"], env, tmp_path, timeout=400)
    assert up.returncode == 0, up.stderr
    gateway = json.loads(up.stdout)["gateway"]
    try:
        optimize = subprocess.Popen([*CLI, "optimize", str(SPEC), "--gateway", gateway, "--budget", "1", "--json",
                                     "--out", "run", "--timeout", "300"], cwd=tmp_path, env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 240
            while time.monotonic() < deadline:
                nxt = _cli(["agent", "next", "--json", "--wait", "5"], env, tmp_path)
                if nxt.returncode == 0:
                    break
                assert nxt.returncode == 3, nxt.stdout + nxt.stderr
            req = json.loads(nxt.stdout)
            cand = tmp_path / "cand.py"
            cand.write_text(answer(""))
            sub = _cli(["agent", "submit", "--request", req["request_id"], str(cand), "--json"], env, tmp_path)
            assert sub.returncode == 0 and json.loads(sub.stdout)["status"] == "accepted", sub.stdout + sub.stderr
            out, err = optimize.communicate(timeout=300)
        finally:
            if optimize.poll() is None:
                optimize.kill()
        assert optimize.returncode == 0, err[-2000:]
        assert json.loads(out)["best"]["candidate_id"] == req["candidate_id"]
    finally:
        _cli(["down"], env, tmp_path, timeout=120)
