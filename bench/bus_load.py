"""Load test of the bus path (CPU, loopback): CandidateGenerated → evaluator work queue →
EvaluationCompleted, with a stub evaluation step.

A real nats-server (JetStream, file storage), a folder object store, and N evaluator
processes, each the real evaluator service built by its composition root
(``ke_evaluator.app.start``) with one override: a judge that answers at once. So every
candidate goes through what a real one does except the judging (session lookup, source
read, report write, verdict publish with its de-duplication id, ack after both). The
driver plays the synthesizer and the search service: it publishes CandidateGenerated
events (at most ``--window`` unanswered at a time, so latency measures the pipeline, not
a backlog of our own making) and reads EvaluationCompleted from its own durable consumer,
``--consume-concurrency`` at a time (default 64: a batched fetch, as the evaluators and the
synthesizer consume).

Measured: throughput (candidates per second from the first publish to the last verdict),
latency from each CandidateGenerated publish to its EvaluationCompleted (p50, p99, max),
the resident memory (VmRSS) of nats-server, each evaluator and the driver before and
after, and the checks: every candidate answered exactly once, one report per candidate.

    python bench/bus_load.py --candidates 10000 --evaluators 2 --out bench/results/bus_load_cpu.json
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

SPEC_SOURCE = ("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
               "def get_inputs():\n    return [torch.randn(4)]\ndef get_init_inputs():\n    return []\n")


class InstantJudge:
    """The stub evaluation step: every candidate is correct at once, speedup 1 (after
    ``delay_s``, which the fault mode uses so that a killed evaluator is surely mid-work)."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s

    def validate_spec(self, spec_source: str, spec_name: str) -> Any:
        from kernelevolve.ports.verdict import SpecCheck

        return SpecCheck(ok=True)

    def evaluate(self, spec_source: str, candidate_source: str, candidate_id: str = "",
                 fresh_worker: bool = False) -> Any:
        from kernelevolve.ports.verdict import Verdict

        if self.delay_s:
            time.sleep(self.delay_s)
        return Verdict(status="correct", reason="stub evaluation step (load test)", candidate_id=candidate_id,
                       speedup=1.0)


# -- evaluator child process -------------------------------------------------------------


async def _serve_evaluator() -> None:
    from ke_evaluator.app import start
    from kernelevolve import logging as ke_logging
    from kernelevolve.config import load_settings

    settings = load_settings()
    ke_logging.configure("json", settings.log_level)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    async with AsyncExitStack() as stack:
        await start(settings, stack, judge=InstantJudge(float(os.environ.get("BUS_LOAD_JUDGE_DELAY_S", "0"))),
                    port=0)
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        await stop.wait()


# -- driver ------------------------------------------------------------------------------


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def _log_events(path: Path) -> dict[str, set[tuple[str, str]]]:
    """(session, candidate) pairs an evaluator logged as started and as finished."""
    out: dict[str, set[tuple[str, str]]] = {"evaluating": set(), "evaluated": set()}
    for line in path.read_text(errors="replace").splitlines():
        if not line.startswith("{"):
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("event") in out:
            out[rec["event"]].add((rec.get("session_id", ""), rec.get("candidate_id", "")))
    return out


def _percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def machine() -> dict[str, Any]:
    from importlib.metadata import version

    from kernelevolve.bus.nats_server import find_nats_server

    model = ""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as fh:
        for line in fh:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    nats_version = subprocess.run([find_nats_server(), "--version"], capture_output=True, text=True).stdout.strip()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=REPO).stdout.strip()
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpu_cores": os.cpu_count(),
        "cpu_model": model,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "nats_server": nats_version,
        "nats_py": version("nats-py"),
        "protobuf": version("protobuf"),
        "grpcio": version("grpcio"),
        "commit": commit,
    }


async def run_load(candidates: int, evaluators: int, sessions: int, window: int, parallel: int,
                   workdir: Path, *, kill_after: int = 0, ack_wait_s: float = 60.0,
                   consume_concurrency: int = 64) -> dict[str, Any]:
    """``kill_after`` > 0 (a fault test): once that many verdicts are in, SIGKILL the first
    evaluator while it is judging (the stub then takes 200 ms per candidate); what it held
    must reach the others after ``ack_wait_s`` and be finished there, once.
    ``consume_concurrency``: verdicts the driver's consumer handles at once (its fetch batch)."""
    from kernelevolve.bus.envelope import envelope
    from kernelevolve.bus.jetstream import JetStreamBus
    from kernelevolve.bus.nats_server import NatsServer
    from kernelevolve.bus.subjects import Keys, Subjects
    from kernelevolve.config import load_settings
    from kernelevolve.spec import make_spec
    from kernelevolve.store import FolderStore
    from kernelevolve.v1 import common_pb2 as pb
    from kernelevolve.v1 import events_pb2 as ev

    subjects = Subjects("ke")
    store_root = workdir / "store"
    procs: list[subprocess.Popen[bytes]] = []
    server = NatsServer(workdir / "nats").start()
    try:
        env = dict(os.environ, KE_BUS_URL=server.url, KE_STORE_KIND="folder", KE_STORE_ROOT=str(store_root),
                   KE_EVALUATOR_HARDWARE_KIND="cpu", KE_EVALUATOR_PARALLEL_WORKERS=str(parallel),
                   KE_EVALUATOR_ACK_WAIT_S=str(ack_wait_s),
                   BUS_LOAD_JUDGE_DELAY_S="0.2" if kill_after else "0",
                   # In the fault mode the evaluators log each candidate they start and finish,
                   # which tells what the killed one was holding and who finished it.
                   KE_LOG_LEVEL="INFO" if kill_after else "WARNING", KE_LOG_FORMAT="json",
                   PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
        for i in range(evaluators):
            log_file = open(workdir / f"evaluator-{i}.log", "wb")  # noqa: SIM115 - closed with the process
            procs.append(subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--serve-evaluator"],
                                          env=env, stdout=subprocess.PIPE, stderr=log_file))
            log_file.close()
        for p in procs:
            assert p.stdout is not None
            line = await asyncio.to_thread(p.stdout.readline)
            if line.strip() != b"ready":
                raise RuntimeError(f"evaluator {p.pid} did not start: {line!r}")

        settings = load_settings(env={"KE_BUS_URL": server.url})
        bus = await JetStreamBus.connect(settings.bus, name="load-driver")
        store = FolderStore(str(store_root))
        spec = make_spec("identity", SPEC_SOURCE)
        sids = [f"load{i:04d}" for i in range(sessions)]
        for sid in sids:
            session = pb.Session(session_id=sid, spec=spec, artifact_prefix=f"sessions/{sid}/",
                                 status=pb.SESSION_STATUS_RUNNING)
            await bus.kv_put(Keys.session(sid), session.SerializeToString())
        plan = [(sids[i % sessions], f"r1-{i // sessions + 1}") for i in range(candidates)]
        for sid, cid in plan:
            await store.put(f"sessions/{sid}/candidates/{cid}.py", b"# stub candidate\n", "text/x-python")

        sent: dict[tuple[str, str], float] = {}
        latency: dict[tuple[str, str], float] = {}
        received: dict[tuple[str, str], int] = {}
        done = asyncio.Event()
        room = asyncio.Semaphore(window)
        killed: list[int] = []

        async def on_result(e: ev.Envelope) -> None:
            key = (e.session_id, e.evaluation_completed.result.candidate_id)
            received[key] = received.get(key, 0) + 1
            if received[key] == 1:
                latency[key] = time.perf_counter() - sent[key]
                room.release()
            if len(latency) == candidates:
                done.set()

        rss_before = {"nats-server": rss_kib(server.pid or 0), "driver": rss_kib(os.getpid()),
                      **{f"evaluator-{i}": rss_kib(p.pid) for i, p in enumerate(procs)}}
        async def kill_mid_evaluation() -> None:
            """Once ``kill_after`` verdicts are in, SIGKILL evaluator 0 while its log shows a
            candidate started and not finished (the stub's 200 ms leave ample time)."""
            while len(latency) < kill_after:
                await asyncio.sleep(0.01)
            while True:
                seen = _log_events(workdir / "evaluator-0.log")
                if seen["evaluating"] - seen["evaluated"]:
                    os.kill(procs[0].pid, signal.SIGKILL)
                    killed.append(procs[0].pid)
                    return
                await asyncio.sleep(0.01)

        await bus.consume(subjects.evaluation(), "load-driver", on_result, concurrency=consume_concurrency)
        killer = asyncio.create_task(kill_mid_evaluation()) if kill_after else None
        t0 = time.perf_counter()
        for sid, cid in plan:
            await room.acquire()
            cand = pb.Candidate(candidate_id=cid, session_id=sid, source_key=f"sessions/{sid}/candidates/{cid}.py")
            gen = ev.CandidateGenerated(candidate=cand, hardware=pb.HardwareTarget(kind="cpu"), request_id="r1")
            sent[(sid, cid)] = time.perf_counter()
            await bus.publish(subjects.candidate(sid, "cpu"), envelope(sid, candidate_generated=gen),
                              dedup_id=f"gen-{sid}-{cid}")
        await asyncio.wait_for(done.wait(), timeout=max(120.0, candidates / 20))
        elapsed = time.perf_counter() - t0
        if killer is not None:
            await asyncio.wait_for(killer, 10)
        await asyncio.sleep(2.0)  # late duplicates would arrive now
        rss_after = {"nats-server": rss_kib(server.pid or 0), "driver": rss_kib(os.getpid()),
                     **{f"evaluator-{i}": rss_kib(p.pid) for i, p in enumerate(procs) if p.pid not in killed}}
        await bus.close()
        await store.close()
        reports = sum(1 for _ in store_root.glob("sessions/*/reports/*.json"))
        takeover: dict[str, int] = {}
        if kill_after:
            logs = [_log_events(workdir / f"evaluator-{i}.log") for i in range(evaluators)]
            held = logs[0]["evaluating"] - logs[0]["evaluated"]
            finished_elsewhere = set().union(*(lg["evaluated"] for lg in logs[1:]))
            takeover = {"held_by_killed": len(held), "finished_by_others": len(held & finished_elsewhere)}
        lat_ms = [v * 1000 for v in latency.values()]
        return {
            "candidates": candidates,
            "driver_consume_concurrency": consume_concurrency,
            "sessions": sessions,
            "evaluators": evaluators,
            "evaluator_parallel": parallel,
            "window": window,
            "elapsed_s": round(elapsed, 3),
            "throughput_per_s": round(candidates / elapsed, 1),
            "latency_ms": {"p50": round(statistics.median(lat_ms), 2), "p99": round(_percentile(lat_ms, 0.99), 2),
                           "max": round(max(lat_ms), 2), "mean": round(statistics.fmean(lat_ms), 2)},
            "answered": len(latency),
            "lost": candidates - len(latency),
            "doubled": sum(1 for n in received.values() if n > 1),
            "reports": reports,
            "evaluators_killed": len(killed),
            **({"takeover": takeover} if kill_after else {}),
            "rss_kib_before": rss_before,
            "rss_kib_after": rss_after,
        }
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            if p.stdout is not None:
                p.stdout.close()
        server.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--candidates", type=int, default=10000)
    ap.add_argument("--evaluators", type=int, default=2, help="evaluator processes sharing the work queue")
    ap.add_argument("--sessions", type=int, default=100, help="sessions the candidates are spread over")
    ap.add_argument("--window", type=int, default=256, help="most candidates published and not yet answered")
    ap.add_argument("--parallel", type=int, default=8, help="candidates each evaluator takes at once")
    ap.add_argument("--kill-after", type=int, default=0,
                    help="SIGKILL one evaluator after this many verdicts (fault test; 0: none)")
    ap.add_argument("--consume-concurrency", type=int, default=64,
                    help="verdicts the driver's consumer takes at once (its fetch batch)")
    ap.add_argument("--ack-wait", type=float, default=60.0, help="evaluator ack_wait_s (redelivery after a kill)")
    ap.add_argument("--out", type=Path, help="write the result JSON here")
    ap.add_argument("--serve-evaluator", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve_evaluator:
        asyncio.run(_serve_evaluator())
        return
    with tempfile.TemporaryDirectory(prefix="ke-load-") as tmp:
        result = asyncio.run(run_load(args.candidates, args.evaluators, args.sessions, args.window, args.parallel,
                                      Path(tmp), kill_after=args.kill_after, ack_wait_s=args.ack_wait,
                                      consume_concurrency=args.consume_concurrency))
    result = {"machine": machine(), **result}
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    sys.stdout.write(text + "\n")


if __name__ == "__main__":
    main()
