"""``kernelevolve agent next/submit``: answer the agent synthesizer's requests from outside.

    kernelevolve agent next [--session ID] [--wait S] [--dir DIR] [--as NAME] [--gateway HOST:PORT] [--json]
    kernelevolve agent submit --request ID FILE [--as NAME] [--gateway HOST:PORT] [--json]

Which gateway is asked, first found: ``--gateway`` → the embedded stack of a running
``kernelevolve optimize --synthesizer agent`` (it records its loopback gateway in
``$XDG_STATE_HOME/kernelevolve/embedded/<session>.json`` while it runs; ``--session`` picks
one, else the newest) → the local cluster of ``kernelevolve up``.

Exit codes: 0 a request handed out / an answer accepted; 1 an answer refused (unknown,
expired or already answered request) or a gateway that cannot be reached; 2 bad input
(the file is not a module defining ``ModelNew``); 3 no request pending (or no running
session to ask).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ke_cli.client import KernelEvolveClient
from ke_cli.cluster import default_state_dir, running
from ke_cli.credentials import client_options
from kernelevolve.agent_ledger import state_name
from kernelevolve.config import Settings
from kernelevolve.errors import ConflictError, InvalidArgumentError, KernelEvolveError, NotFoundError
from kernelevolve.orphans import pid_alive
from kernelevolve.v1 import services_pb2 as spb

NONE_PENDING = 3


class NothingPending(KernelEvolveError):
    """No request is pending, or no running session or gateway to ask."""


# -- where a running embedded session can be reached ------------------------------------------


@dataclass(frozen=True)
class EmbeddedEntry:
    session_id: str
    gateway: str
    pid: int
    run_dir: str
    started_at: float


def registry_dir(env: dict[str, str] | None = None) -> Path:
    env = dict(os.environ if env is None else env)
    base = Path(env["XDG_STATE_HOME"]) if env.get("XDG_STATE_HOME") else Path.home() / ".local" / "state"
    return base / "kernelevolve" / "embedded"


def register_embedded(session_id: str, gateway: str, run_dir: Path) -> Callable[[], None]:
    """Record this process's embedded gateway for ``kernelevolve agent``; returns the clean-up."""
    folder = registry_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{session_id}.json"
    entry = EmbeddedEntry(session_id, gateway, os.getpid(), str(run_dir), time.time())
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(entry)))
    os.chmod(tmp, 0o600)
    tmp.replace(path)
    return lambda: path.unlink(missing_ok=True)


def live_embedded() -> list[EmbeddedEntry]:
    """Running embedded sessions, newest first (records of dead processes are removed)."""
    out = []
    for path in registry_dir().glob("*.json"):
        try:
            entry = EmbeddedEntry(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            continue
        if pid_alive(entry.pid):
            out.append(entry)
        else:
            path.unlink(missing_ok=True)  # a SIGKILLed optimize left it behind
    return sorted(out, key=lambda e: -e.started_at)


def resolve_gateway(settings: Settings, gateway: str, session_id: str) -> tuple[str, bool]:
    """(target, embedded?) of the gateway to ask."""
    if gateway:
        return gateway, False
    entries = live_embedded()
    if session_id:
        entries = [e for e in entries if e.session_id == session_id]
    if entries:
        return entries[0].gateway, True
    cluster = running(default_state_dir(settings))
    if cluster is not None:
        return cluster.gateway, False
    where = f"session {session_id}" if session_id else "session"
    raise NothingPending(f"no running {where} to answer: start `kernelevolve optimize SPEC --synthesizer agent`, "
                         "or name a gateway with --gateway HOST:PORT")


# -- commands ---------------------------------------------------------------------------


def add_agent_commands(sub: Any) -> None:
    a = sub.add_parser("agent", help="answer the agent synthesizer's requests (an external agent or a person)")
    asub = a.add_subparsers(dest="agent_command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--as", dest="agent", default="", help="who answers (shown in the candidate's description)")
        p.add_argument("--gateway", default="", help="gateway host:port (default: a running embedded session, "
                       "else the local cluster)")
        p.add_argument("--token", default="", help="bearer token for the gateway (default: $KE_CLIENT_TOKEN)")
        p.add_argument("--tls", action="store_true", help="connect over TLS")
        p.add_argument("--tls-ca", default="", help="CA certificate (PEM) of the gateway")
        p.add_argument("--json", action="store_true", help="print one JSON object")

    n = asub.add_parser("next", help="take the next open request: prompt, spec and parent")
    n.add_argument("--session", default="", help="only this session's requests")
    n.add_argument("--wait", type=float, default=0.0, help="seconds to wait for a request to open")
    n.add_argument("--dir", type=Path, default=None, help="also write prompt.md, spec.py (and parent.py) here")
    common(n)

    s = asub.add_parser("submit", help="answer a request with a module defining ModelNew")
    s.add_argument("--request", required=True, help="the request id `agent next` printed")
    s.add_argument("file", type=Path, help="the candidate: a whole module defining ModelNew (torch + triton)")
    common(s)


def run_agent_command(args: argparse.Namespace, settings: Settings) -> int:
    try:
        if args.agent_command == "next":
            return asyncio.run(_next(args, settings))
        return asyncio.run(_submit(args, settings))
    except NothingPending as exc:
        return _error(args, "none_pending", str(exc), NONE_PENDING)
    except InvalidArgumentError as exc:
        return _error(args, "bad_input", str(exc), 2)
    except (NotFoundError, ConflictError) as exc:
        if args.agent_command == "next":
            return _error(args, "none_pending", str(exc), NONE_PENDING)
        return _error(args, "refused", str(exc), 1)
    except KernelEvolveError as exc:  # the gateway is unreachable or went away (its session ended)
        return _error(args, "error", f"gateway: {exc}", 1)


def _error(args: argparse.Namespace, status: str, message: str, code: int) -> int:
    if args.json:
        sys.stdout.write(json.dumps({"status": status, "error": message}) + "\n")
    else:
        sys.stderr.write(f"kernelevolve: {message}\n")
    return code


def _client(args: argparse.Namespace, settings: Settings, session_id: str) -> KernelEvolveClient:
    target, embedded = resolve_gateway(settings, args.gateway, session_id)
    creds = client_options(settings, "" if embedded else target, token=args.token, tls=args.tls, tls_ca=args.tls_ca)
    return KernelEvolveClient(target, **creds.kwargs())  # type: ignore[arg-type]


def request_document(rec: spb.AgentRequest) -> dict[str, Any]:
    return {
        "request_id": rec.request_id, "session_id": rec.session_id, "candidate_id": rec.slot_id,
        "state": state_name(rec.state), "offer": rec.offer, "max_offers": rec.max_offers,
        "deadline": rec.deadline, "expires_in_s": round(max(0.0, rec.deadline - time.time()), 1),
        "hardware": rec.hardware_kind, "prompt": rec.prompt,
        "spec": {"name": rec.spec.name, "source": rec.spec.source},
        "parent": {"candidate_id": rec.parent_id, "source": rec.parent_source} if rec.parent_id else None,
    }


def _write_files(folder: Path, rec: spb.AgentRequest) -> dict[str, str]:
    folder.mkdir(parents=True, exist_ok=True)
    files = {"prompt": folder / "prompt.md", "spec": folder / "spec.py"}
    files["prompt"].write_text(rec.prompt, encoding="utf-8")
    files["spec"].write_text(rec.spec.source, encoding="utf-8")
    if rec.parent_id:
        files["parent"] = folder / "parent.py"
        files["parent"].write_text(rec.parent_source, encoding="utf-8")
    return {k: str(v.resolve()) for k, v in files.items()}


async def _next(args: argparse.Namespace, settings: Settings) -> int:
    async with _client(args, settings, args.session) as client:
        rec = await client.agent_next(args.session, agent=args.agent, wait_s=max(0.0, args.wait))
    doc = request_document(rec)
    if args.dir is not None:
        doc["files"] = _write_files(args.dir, rec)
    if args.json:
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return 0
    out = sys.stdout
    out.write(f"Agent request {rec.request_id} (session {rec.session_id}, candidate {rec.slot_id}, "
              f"offer {rec.offer} of {rec.max_offers}); answer within {doc['expires_in_s']:.0f}s:\n")
    out.write(f"  kernelevolve agent submit --request {rec.request_id} FILE\n")
    for name, path in doc.get("files", {}).items():
        out.write(f"  {name}: {path}\n")
    out.write("\n" + rec.prompt)
    return 0


async def _submit(args: argparse.Namespace, settings: Settings) -> int:
    if not args.file.is_file():
        raise InvalidArgumentError(f"candidate file {args.file} does not exist")
    source = args.file.read_text(encoding="utf-8")
    session_id = args.request.split(".", 1)[0]
    async with _client(args, settings, session_id) as client:
        resp = await client.agent_submit(args.request, source, agent=args.agent)
    doc = {"status": "accepted", "request_id": resp.request_id, "session_id": resp.session_id,
           "candidate_id": resp.candidate_id}
    if args.json:
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        sys.stdout.write(f"Accepted: agent request {resp.request_id} becomes candidate {resp.candidate_id} "
                         f"of session {resp.session_id}; the evaluator judges it next.\n")
    return 0
