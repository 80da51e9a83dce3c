"""The signal KEDA scales the evaluator pools on, read from a real nats-server the way
KEDA's nats-jetstream scaler reads it (the monitoring endpoint's /jsz), with the
stream, consumer and account names taken from components/keda/scaledobjects.yaml:
candidates waiting while a pool is at zero show as pending (scale up from zero), and
the count returns to zero once an evaluator has judged them (scale back to zero)."""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kernelevolve.bus.envelope import envelope
from kernelevolve.bus.jetstream import JetStreamBus
from kernelevolve.bus.nats_server import find_nats_server
from kernelevolve.bus.subjects import Subjects
from kernelevolve.config import BusSettings
from kernelevolve.v1 import common_pb2 as pb
from kernelevolve.v1 import events_pb2 as ev

pytestmark = pytest.mark.integration

SCALED_OBJECTS = Path(__file__).resolve().parents[2] / "deploy" / "k8s" / "components" / "keda" / "scaledobjects.yaml"


@pytest.fixture
def nats_with_monitoring(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """nats-server with JetStream and its HTTP monitoring port, both on free loopback ports."""
    ports_dir = Path(tempfile.mkdtemp(prefix="ke-nats-ports-"))
    proc = subprocess.Popen([find_nats_server(), "-a", "127.0.0.1", "-p", "-1", "-m", "-1", "-js",
                             "-sd", str(tmp_path / "js"), "--ports_file_dir", str(ports_dir)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        ports_file = ports_dir / f"nats-server_{proc.pid}.ports"
        deadline = time.monotonic() + 15
        while not ports_file.is_file() and time.monotonic() < deadline:
            time.sleep(0.05)
        ports = json.loads(ports_file.read_text())
        yield ports["nats"][0], ports["monitoring"][0]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _triggers(deployment: str) -> list[dict[str, str]]:
    for doc in yaml.safe_load_all(SCALED_OBJECTS.read_text()):
        if doc and doc["spec"]["scaleTargetRef"]["name"] == deployment:
            return [t["metadata"] for t in doc["spec"]["triggers"]]
    raise AssertionError(f"no ScaledObject for {deployment}")


def _pending(monitoring: str, md: dict[str, str]) -> int:
    """What the scaler reads: /jsz for the account, then the stream's consumer's num_pending."""
    url = f"{monitoring}/jsz?acc={urllib.request.quote(md['account'])}&consumers=true&config=true"
    with urllib.request.urlopen(url, timeout=10) as resp:  # noqa: S310 (loopback)
        jsz: dict[str, Any] = json.loads(resp.read())
    for account in jsz.get("account_details", []):
        if account["name"] != md["account"]:
            continue
        for stream in account.get("stream_detail", []):
            if stream["name"] != md["stream"]:
                continue
            for consumer in stream.get("consumer_detail", []):
                if consumer["name"] == md["consumer"]:
                    return int(consumer["num_pending"])
    raise AssertionError(f"consumer {md['consumer']} not found in {md['stream']}")


async def test_pending_candidates_are_the_scaling_signal(nats_with_monitoring: tuple[str, str]) -> None:
    url, monitoring = nats_with_monitoring
    settings = BusSettings(url=url)
    subjects = Subjects(settings.subject_prefix)
    (cand_md,) = [md for md in _triggers("evaluator-cpu") if not md["consumer"].endswith("-retime")]
    bus = await JetStreamBus.connect(settings)
    try:
        judged: list[str] = []

        async def evaluator(env: ev.Envelope) -> None:
            judged.append(env.candidate_generated.candidate.candidate_id)

        # An evaluator of the pool ran once (the durable consumer exists), then the pool went to zero.
        (gpu_md,) = [md for md in _triggers("evaluator-nvidia") if not md["consumer"].endswith("-retime")]
        sub = await bus.consume(subjects.candidate(hardware="cpu"), cand_md["consumer"], evaluator)
        await sub.stop()
        gpu_sub = await bus.consume(subjects.candidate(hardware="nvidia"), gpu_md["consumer"], evaluator)
        await gpu_sub.stop()
        assert _pending(monitoring, cand_md) == 0  # nothing waits: KEDA keeps the pool at zero
        for i in range(5):
            cand = pb.Candidate(candidate_id=f"c{i}", session_id="s1")
            await bus.publish(subjects.candidate("s1", "cpu"), envelope(
                "s1", candidate_generated=ev.CandidateGenerated(candidate=cand)), dedup_id=f"gen-s1-c{i}")
        # The GPU pool's queue is another consumer: CPU candidates do not wake it.
        assert _pending(monitoring, gpu_md) == 0
        pending = _pending(monitoring, cand_md)
        assert pending == 5 > int(cand_md["activationLagThreshold"])  # activation: back up from zero
        assert math.ceil(pending / int(cand_md["lagThreshold"])) == 3  # pods KEDA asks for
        # Evaluators are back: they drain the queue and the signal returns to zero.
        sub = await bus.consume(subjects.candidate(hardware="cpu"), cand_md["consumer"], evaluator)
        deadline = time.monotonic() + 10
        while (len(judged) < 5 or _pending(monitoring, cand_md) > 0) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        await sub.stop()
        assert sorted(judged) == [f"c{i}" for i in range(5)]
        assert _pending(monitoring, cand_md) == 0
    finally:
        await bus.close()
