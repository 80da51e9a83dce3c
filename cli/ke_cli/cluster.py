"""``kernelevolve up`` / ``down``: a local multi-process cluster on loopback.

One nats-server (JetStream, token-protected) and every service as its own process
(``python -m ke_<service>``), N evaluators sharing one work queue, a folder object
store and Qdrant local mode inside the state folder. Everything binds 127.0.0.1.
Every gRPC server requires the cluster's bearer token (health checks excepted), which
is generated at ``up`` and kept in ``<state>/token`` (mode 0600) so that the CLI on the
same machine picks it up by itself; nats-server requires the same token.

``<state>/cluster.json`` records each process's pid and start time; ``down`` stops
exactly those processes (SIGTERM, then SIGKILL of the process group after a grace
period), never anything found by name.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kernelevolve.bus.nats_server import find_nats_server
from kernelevolve.config import Settings
from kernelevolve.errors import ConfigError, KernelEvolveError

log = logging.getLogger(__name__)

STATE_FILE = "cluster.json"
TOKEN_FILE = "token"
SERVICES = ("knowledge", "synthesizer", "search")  # started after the evaluators, before the gateway


class ClusterError(KernelEvolveError):
    """The local cluster could not be started or stopped."""


def default_state_dir(settings: Settings, env: dict[str, str] | None = None) -> Path:
    if settings.cluster.state_dir:
        return Path(settings.cluster.state_dir).expanduser()
    env = dict(os.environ if env is None else env)
    base = Path(env["XDG_STATE_HOME"]) if env.get("XDG_STATE_HOME") else Path.home() / ".local" / "state"
    return base / "kernelevolve" / "cluster"


@dataclass
class Proc:
    name: str
    pid: int
    start_time: str  # /proc/<pid>/stat field 22: tells a reused pid from ours
    log: str
    grpc_port: int = 0
    metrics_port: int = 0


@dataclass
class ClusterState:
    gateway: str
    nats_url_no_token: str
    token_file: str
    processes: list[Proc] = field(default_factory=list)
    started_at: float = 0.0

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def load(cls, path: Path) -> ClusterState:
        data = json.loads(path.read_text())
        procs = [Proc(**p) for p in data.pop("processes")]
        return cls(processes=procs, **data)


def _start_time(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces; fields after its closing parenthesis are fixed.
    return stat.rsplit(")", 1)[1].split()[19]


def is_ours(proc: Proc) -> bool:
    """True while the recorded process is alive (same pid, same start time, not a zombie)."""
    try:
        stat = Path(f"/proc/{proc.pid}/stat").read_text()
    except OSError:
        return False
    fields = stat.rsplit(")", 1)[1].split()
    return fields[0] != "Z" and fields[19] == proc.start_time


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spawn(name: str, argv: list[str], env: dict[str, str], logs: Path) -> tuple[subprocess.Popen[bytes], Proc]:
    log_path = logs / f"{name}.log"
    with open(log_path, "ab") as out:
        # Own session: the cluster outlives this command and a Ctrl-C in this terminal.
        p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                             start_new_session=True, close_fds=True)
    started = _start_time(p.pid) or ""
    return p, Proc(name=name, pid=p.pid, start_time=started, log=str(log_path))


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def _start_nats(state: Path, token: str, logs: Path) -> tuple[subprocess.Popen[bytes], Proc, str]:
    ports_dir = state / "nats-ports"
    ports_dir.mkdir(exist_ok=True)
    for old in ports_dir.glob("*.ports"):
        old.unlink()
    conf = state / "nats.conf"
    # The token goes in a private file, not on the command line where `ps` would show it.
    _write_private(conf, "\n".join([
        "listen: 127.0.0.1:-1",
        "jetstream { store_dir: " + json.dumps(str(state / "nats")) + " }",
        "authorization { token: " + json.dumps(token) + " }",
        "ports_file_dir: " + json.dumps(str(ports_dir)),
        "",
    ]))
    p, proc = _spawn("nats", [find_nats_server(), "-c", str(conf), "-l", str(logs / "nats-server.log")], {
        "PATH": os.environ.get("PATH", "")}, logs)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if p.poll() is not None:
            raise ClusterError(f"nats-server exited with code {p.returncode}; see {logs / 'nats-server.log'}")
        ports = ports_dir / f"nats-server_{p.pid}.ports"
        if ports.is_file():
            try:
                url = json.loads(ports.read_text())["nats"][0]
                return p, proc, url
            except (ValueError, KeyError, IndexError):
                pass
        time.sleep(0.05)
    raise ClusterError("nats-server did not report its port within 20 s")


def _health_ok(port: int) -> bool:
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        try:
            resp = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""), timeout=2)
        except grpc.RpcError:
            return False
    return bool(resp.status == health_pb2.HealthCheckResponse.SERVING)


def _tail(path: str, chars: int = 1500) -> str:
    try:
        return Path(path).read_text(errors="replace")[-chars:]
    except OSError:
        return ""


def up(settings: Settings, state: Path, evaluators: int = 1, ready_timeout_s: float = 300.0,
       config_path: str | None = None) -> ClusterState:
    """Start the cluster and wait until every gRPC server answers its health check.

    ``config_path``: the YAML file every service reads too (the cluster's own wiring,
    set through the environment, wins over it)."""
    if evaluators < 1:
        raise ConfigError("--evaluators must be at least 1")
    state_file = state / STATE_FILE
    if state_file.is_file():
        old = ClusterState.load(state_file)
        if any(is_ours(p) for p in old.processes):
            raise ClusterError(f"a local cluster is already running (gateway {old.gateway}); "
                               "stop it with `kernelevolve down`")
        state_file.unlink()
    state.mkdir(parents=True, exist_ok=True)
    os.chmod(state, 0o700)
    logs = state / "logs"
    logs.mkdir(exist_ok=True)
    token = secrets.token_urlsafe(32)
    _write_private(state / TOKEN_FILE, token + "\n")

    popens: list[subprocess.Popen[bytes]] = []
    procs: list[Proc] = []

    def record(pair: tuple[subprocess.Popen[bytes], Proc]) -> Proc:
        popens.append(pair[0])
        procs.append(pair[1])
        return pair[1]

    try:
        p, nats_proc, nats_url = _start_nats(state, token, logs)
        popens.append(p)
        procs.append(nats_proc)
        host_port = nats_url.split("://", 1)[1]
        base_env = {k: v for k, v in os.environ.items() if not k.startswith("KE_") or k in _PASSED_THROUGH}
        base_env.update({
            "KE_BUS_URL": f"nats://{token}@{host_port}",
            "KE_STORE_KIND": "folder",
            "KE_STORE_ROOT": str(state / "store"),
            "KE_KNOWLEDGE_PATH": str(state / "knowledge"),
            "KE_KNOWLEDGE_URL": "",
            "KE_AUTH_TOKENS": token,
            "KE_GRPC_HOST": "127.0.0.1",
            "KE_METRICS_ENABLED": "true",
            "KE_LOG_FORMAT": "json",
        })
        if config_path:
            base_env["KE_CONFIG"] = str(Path(config_path).resolve())
        eval_ports = [_free_port() for _ in range(evaluators)]
        for i, port in enumerate(eval_ports):
            metrics_port = _free_port()
            env = dict(base_env, KE_GRPC_EVALUATOR_PORT=str(port), KE_METRICS_PORT=str(metrics_port))
            proc = record(_spawn(f"evaluator-{i}", [sys.executable, "-m", "ke_evaluator"], env, logs))
            proc.grpc_port, proc.metrics_port = port, metrics_port
        for svc in (*SERVICES, "gateway"):
            port, metrics_port = _free_port(), _free_port()
            if svc == "knowledge":  # the search service and the gateway (started later) read it
                base_env["KE_LEARNING_KNOWLEDGE_TARGET"] = f"127.0.0.1:{port}"
            env = dict(base_env, KE_METRICS_PORT=str(metrics_port),
                       KE_GRPC_EVALUATOR_TARGET=f"127.0.0.1:{eval_ports[0]}")
            env[f"KE_GRPC_{svc.upper()}_PORT"] = str(port)
            proc = record(_spawn(svc, [sys.executable, "-m", f"ke_{svc}"], env, logs))
            proc.grpc_port, proc.metrics_port = port, metrics_port
        gateway = next(p for p in procs if p.name == "gateway")
        cluster = ClusterState(gateway=f"127.0.0.1:{gateway.grpc_port}", nats_url_no_token=nats_url,
                               token_file=str(state / TOKEN_FILE), processes=procs, started_at=time.time())
        # Recorded before waiting: a `down` from another terminal can stop a start that hangs.
        _write_private(state_file, cluster.to_json())
        _wait_ready(popens, procs, ready_timeout_s)
        log.info("local cluster up", extra={"gateway": cluster.gateway, "evaluators": evaluators})
        return cluster
    except BaseException:
        _stop(procs, grace_s=10)
        state_file.unlink(missing_ok=True)
        raise


# Variables a user may set for the services (model, device, limits); the cluster's own
# wiring (bus, store, ports, tokens) always wins over the caller's environment.
_PASSED_THROUGH = {
    "KE_CONFIG", "KE_KNOWLEDGE_EMBEDDER", "KE_EVALUATOR_HARDWARE_KIND", "KE_EVALUATOR_COMPILE_TIMEOUT_S",
    "KE_EVALUATOR_RUN_TIMEOUT_S", "KE_EVALUATOR_CORRECTNESS_TRIALS", "KE_EVALUATOR_PARALLEL_WORKERS",
    "KE_SEARCH_DEFAULT_BUDGET", "KE_SEARCH_MAX_INFLIGHT", "KE_SEARCH_FINALISTS", "KE_LOG_LEVEL",
    "KE_SYNTHESIZER_KIND",
    "KE_AGENT_TIMEOUT_S", "KE_AGENT_MAX_OFFERS", "KE_AGENT_POLL_S", "KE_AGENT_CONCURRENCY", "KE_AGENT_MAX_WAIT_S",
}


def _wait_ready(popens: list[subprocess.Popen[bytes]], procs: list[Proc], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    pending = [i for i, p in enumerate(procs) if p.grpc_port]
    while pending:
        for i, p in enumerate(popens):
            if p.poll() is not None:
                raise ClusterError(f"{procs[i].name} exited with code {p.returncode} during start-up:\n"
                                   f"{_tail(procs[i].log)}")
        pending = [i for i in pending if not _health_ok(procs[i].grpc_port)]
        if pending and time.monotonic() > deadline:
            names = ", ".join(procs[i].name for i in pending)
            raise ClusterError(f"not ready after {timeout_s:.0f} s: {names} (logs in {Path(procs[0].log).parent})")
        if pending:
            time.sleep(0.5)


def _stop(procs: list[Proc], grace_s: float = 30.0) -> list[str]:
    """SIGTERM every live recorded process (services before nats-server), then SIGKILL the
    process group of any still running after ``grace_s``. Returns the names stopped."""
    stopped: list[str] = []
    order = [p for p in procs if p.name != "nats"] + [p for p in procs if p.name == "nats"]
    for group in ([p for p in order if p.name != "nats"], [p for p in order if p.name == "nats"]):
        live = [p for p in group if is_ours(p)]
        for p in live:
            try:
                os.kill(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            stopped.append(p.name)
        deadline = time.monotonic() + grace_s
        while any(is_ours(p) for p in live) and time.monotonic() < deadline:
            _reap(live)
            time.sleep(0.1)
        for p in live:
            # The group also holds an evaluator's sandboxed workers; none may outlive it.
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        _reap(live)
    return stopped


def _reap(procs: list[Proc]) -> None:
    """Collect those of ``procs`` that exited and are our own children (when `up` and `down`
    run in one process: tests, a failed start), so that they do not linger as zombies."""
    for p in procs:
        try:
            os.waitpid(p.pid, os.WNOHANG)
        except ChildProcessError:  # not our child (the usual case: `up` ran in another process)
            pass


def down(state: Path, grace_s: float = 30.0) -> list[str]:
    """Stop the cluster recorded in ``state``; returns the names of processes stopped."""
    state_file = state / STATE_FILE
    if not state_file.is_file():
        return []
    cluster = ClusterState.load(state_file)
    stopped = _stop(cluster.processes, grace_s)
    state_file.unlink(missing_ok=True)
    (state / TOKEN_FILE).unlink(missing_ok=True)
    (state / "nats.conf").unlink(missing_ok=True)  # holds the token too
    log.info("local cluster down", extra={"stopped": len(stopped)})
    return stopped


def running(state: Path) -> ClusterState | None:
    """The cluster recorded in ``state`` if its gateway process is still alive."""
    state_file = state / STATE_FILE
    if not state_file.is_file():
        return None
    try:
        cluster = ClusterState.load(state_file)
    except (OSError, ValueError, TypeError, KeyError):
        return None
    gateway = [p for p in cluster.processes if p.name == "gateway"]
    return cluster if gateway and is_ours(gateway[0]) else None


def describe(cluster: ClusterState, state: Path) -> dict[str, Any]:
    return {
        "gateway": cluster.gateway,
        "state_dir": str(state),
        "token_file": cluster.token_file,
        "nats": cluster.nats_url_no_token,
        "processes": {p.name: {"pid": p.pid, "grpc": f"127.0.0.1:{p.grpc_port}" if p.grpc_port else None,
                               "metrics": f"http://127.0.0.1:{p.metrics_port}/metrics" if p.metrics_port else None,
                               "log": p.log} for p in cluster.processes},
    }
