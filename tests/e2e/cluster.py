"""A local cluster for fault tests: one nats-server (fixed port, data kept across restarts)
and every service as its own process (``python -m ke_<service>``), each started, killed
and restarted by handle. Logs are JSON lines appended per incarnation, so a test can wait
for a service to reach a point (``wait_log``) before it injects a fault there."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelevolve.bus.nats_server import NatsServer

SERVICES = ("evaluator", "knowledge", "synthesizer", "search", "gateway")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Faults:
    """What a test injected, by kind, for the report."""

    counts: dict[str, int] = field(default_factory=dict)

    def add(self, kind: str) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1

    @property
    def total(self) -> int:
        return sum(self.counts.values())


class Cluster:
    def __init__(self, root: Path, env: dict[str, str] | None = None) -> None:
        self.root = root
        self.logs = root / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.store_root = root / "store"
        self.nats = NatsServer(root / "nats")
        self.ports = {svc: free_port() for svc in SERVICES}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.faults = Faults()
        self._extra_env = env or {}
        self.env: dict[str, str] = {}

    @property
    def gateway(self) -> str:
        return f"127.0.0.1:{self.ports['gateway']}"

    def start(self) -> Cluster:
        self.nats.start()
        self.env = dict(
            os.environ,
            KE_BUS_URL=self.nats.url,
            KE_STORE_KIND="folder",
            KE_STORE_ROOT=str(self.store_root),
            KE_KNOWLEDGE_PATH=str(self.root / "qdrant"),
            KE_KNOWLEDGE_EMBEDDER="hash",
            KE_EVALUATOR_CORRECTNESS_TRIALS="2",
            KE_EVALUATOR_HARDWARE_KIND="cpu",
            # A killed service's message comes back after this; a live one heartbeats.
            KE_EVALUATOR_ACK_WAIT_S="3",
            KE_BUS_ACK_WAIT_S="3",
            KE_GRPC_EVALUATOR_TARGET=f"127.0.0.1:{self.ports['evaluator']}",
            KE_LOG_FORMAT="json",
            KE_LOG_LEVEL="INFO",
            **{f"KE_GRPC_{svc.upper()}_PORT": str(port) for svc, port in self.ports.items()},
            **self._extra_env,
        )
        for svc in SERVICES:
            self.spawn(svc)
        return self

    def spawn(self, svc: str) -> None:
        with open(self.logs / f"{svc}.log", "ab") as log_file:
            self.procs[svc] = subprocess.Popen([sys.executable, "-m", f"ke_{svc}"], env=self.env, stdout=log_file,
                                               stderr=subprocess.STDOUT, start_new_session=True)

    def kill(self, svc: str) -> None:
        """SIGKILL the service's process group: no clean-up, no acknowledgement, no goodbye."""
        proc = self.procs[svc]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        self.faults.add(f"sigkill_{svc}")

    def restart(self, svc: str) -> None:
        self.spawn(svc)

    def count_log(self, svc: str, event: str, **fields: object) -> int:
        return sum(1 for rec in self.log_records(svc)
                   if rec.get("event") == event and all(rec.get(k) == v for k, v in fields.items()))

    async def fresh_process(self, svc: str, timeout_s: float = 120.0) -> None:
        """Stop the service cleanly and start a new process, back when it says it is ready:
        its next piece of work is a cold one (imports, caches), which takes long enough to
        be interrupted. Not a fault."""
        proc = self.procs[svc]
        ready = self.count_log(svc, "service ready")
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        self.spawn(svc)
        deadline = time.monotonic() + timeout_s
        while self.count_log(svc, "service ready") <= ready:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{svc} did not come back")
            await asyncio.sleep(0.05)

    def restart_nats(self) -> None:
        self.nats.restart()
        self.faults.add("restart_nats")

    def log_records(self, svc: str) -> list[dict[str, Any]]:
        out = []
        path = self.logs / f"{svc}.log"
        if not path.is_file():
            return out
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue
        return out

    async def wait_log(self, svc: str, event: str, timeout_s: float = 120.0, poll_s: float = 0.05,
                       **fields: object) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for rec in self.log_records(svc):
                if rec.get("event") == event and all(rec.get(k) == v for k, v in fields.items()):
                    return rec
            await asyncio.sleep(poll_s)
        raise TimeoutError(f"{svc} never logged {event!r} {fields}; tail: "
                           f"{(self.logs / f'{svc}.log').read_text(errors='replace')[-1500:]}")

    def stop(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        self.nats.stop()
