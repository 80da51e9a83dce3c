"""``kernelevolve resume`` and ``kernelevolve sessions list|show|cancel``.

    kernelevolve resume RUN_DIR [--budget N] [--json]
    kernelevolve sessions list [--root DIR] [--gateway HOST:PORT] [--json]
    kernelevolve sessions show ID|RUN_DIR [--gateway HOST:PORT] [--json]
    kernelevolve sessions cancel ID|RUN_DIR [--gateway HOST:PORT] [--json]

A run folder (``runstate``) finds its session; the session's progress is durable on its
bus (embedded: ``RUN_DIR/.nats``), so ``resume`` restarts the embedded services on it,
asks the gateway to ``ResumeSession`` and follows the session to its end like ``optimize``.

Exit codes of ``resume``: those of ``optimize`` (0 a correct kernel, 1 none / failed, 2 bad
input, e.g. not a run folder), also 0 with "nothing to resume" for a session that already
ended, and 3 when a live process is driving the session now (its pid is in ``RUN_DIR/.lock``).

``sessions cancel RUN_DIR`` of a session being optimised by another process sends that
process SIGTERM, which stops it the way Ctrl-C does (cancel, summary, best kernel so far),
and waits for it to end; a stopped (killed) session is cancelled on its own bus.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ke_cli import runstate
from ke_cli.client import KernelEvolveClient
from kernelevolve.config import Settings
from kernelevolve.errors import ConflictError, InvalidArgumentError, NotFoundError
from kernelevolve.v1 import common_pb2 as pb

RUNNING_ELSEWHERE = 3
# How long ``sessions cancel`` waits for a signalled process to write its summary and exit.
_CANCEL_WAIT_S = 120.0


@dataclass(frozen=True)
class Follow:
    """What ``optimize`` follows a session with (``ke_cli.main`` passes its own)."""

    follow: Callable[..., Awaitable[int]]  # (args, client, session, run_dir, budget, stop) -> exit code
    make_stop: Callable[[asyncio.Task[Any]], Any]  # the SIGINT/SIGTERM handler object


def add_session_commands(sub: Any) -> None:
    r = sub.add_parser("resume", help="continue a stopped (e.g. killed) session from its run folder")
    r.add_argument("run_dir", type=Path)
    r.add_argument("--budget", type=int, default=None, help="new evaluation budget (default: the session's)")
    r.add_argument("--json", action="store_true", help="print one JSON object instead of progress")
    r.add_argument("--quiet", action="store_true", help="no progress, only the final summary")
    r.add_argument("--timeout", type=float, default=3600.0, help="seconds before the session is cancelled")
    r.add_argument("--token", default="", help="bearer token for a gateway session (default: $KE_CLIENT_TOKEN)")

    s = sub.add_parser("sessions", help="list, show or cancel sessions (run folders, or a gateway's)")
    ssub = s.add_subparsers(dest="sessions_command", required=True)
    ls = ssub.add_parser("list", help="sessions in run folders under --root and/or on a gateway")
    ls.add_argument("--root", type=Path, default=None, help="folder holding run folders (default runs/)")
    ls.add_argument("--gateway", default="", help="list a gateway's sessions (default: the local cluster's, "
                    "if one is up)")
    ls.add_argument("--token", default="")
    ls.add_argument("--json", action="store_true")
    for name, text in (("show", "one session: status, budget, candidates"),
                       ("cancel", "stop a running or stopped session; it ends as cancelled")):
        c = ssub.add_parser(name, help=text)
        c.add_argument("target", help="a run folder, or a session id (runs/<id>, or on --gateway)")
        c.add_argument("--gateway", default="")
        c.add_argument("--token", default="")
        c.add_argument("--json", action="store_true")


def run_session_command(args: argparse.Namespace, settings: Settings, hooks: Follow) -> int:
    try:
        if args.command == "resume":
            return asyncio.run(_with_signals(lambda stop: _resume(args, settings, hooks, stop), hooks))
        if args.sessions_command == "list":
            return _print(args, asyncio.run(_list(args, settings)), _list_text)
        if args.sessions_command == "show":
            return _print(args, asyncio.run(_show(args, settings)), _show_text)
        return _print(args, asyncio.run(_cancel(args, settings, hooks)), _show_text)
    except ConflictError as exc:
        sys.stderr.write(f"kernelevolve: {exc}\n")
        return RUNNING_ELSEWHERE


async def _with_signals(body: Callable[[Any], Awaitable[int]], hooks: Follow) -> int:
    """SIGINT/SIGTERM stop a resumed session as they stop ``optimize`` (see ``main._Stop``)."""
    task = asyncio.current_task()
    assert task is not None
    stop = hooks.make_stop(task)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.on_signal, sig)
    try:
        return await body(stop)
    except asyncio.CancelledError:
        if not stop.signum:
            raise
        task.uncancel()
        sys.stderr.write(f"kernelevolve: {signal.Signals(stop.signum).name}: stopped\n")
        return int(stop.exit_code)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def _client(settings: Settings, gateway: str, token: str, target: str | None = None) -> KernelEvolveClient:
    from ke_cli.credentials import client_options

    creds = client_options(settings, gateway, token=token)
    return KernelEvolveClient(target or gateway, **creds.kwargs())  # type: ignore[arg-type]


async def _open(settings: Settings, run_dir: Path, record: runstate.RunRecord, token: str,
                stack: AsyncExitStack) -> KernelEvolveClient:
    """A client of the session's gateway: the recorded one, or the embedded stack restarted
    on the run folder's bus."""
    target = record.gateway
    if record.embedded:
        if not (run_dir / ".nats").is_dir():
            raise InvalidArgumentError(f"{run_dir} holds no bus state (.nats/): nothing to resume from")
        from ke_cli.embedded import start_embedded

        handles = await start_embedded(settings, run_dir, stack)
        target = handles.gateway.target
    client = _client(settings, record.gateway, token, target)
    stack.push_async_callback(client.close)
    await client.wait_ready()
    return client


# -- resume --------------------------------------------------------------------------------


async def _resume(args: argparse.Namespace, settings: Settings, hooks: Follow, stop: Any) -> int:
    run_dir: Path = args.run_dir
    record = runstate.read_record(run_dir)
    if args.budget is not None and args.budget < 1:
        raise InvalidArgumentError("--budget must be at least 1")
    summary = runstate.read_summary(run_dir)
    if summary is not None and runstate.holder(run_dir) is None:
        return _already_ended(args, run_dir, summary)
    with runstate.hold(run_dir):  # ConflictError (exit 3) while another process drives it
        async with AsyncExitStack() as stack:
            client = await _open(settings, run_dir, record, args.token, stack)
            try:
                session = await client.resume(record.session_id, budget=args.budget or 0)
            except NotFoundError as exc:
                raise InvalidArgumentError(f"session {record.session_id} never started (stopped before the "
                                           "gateway accepted it): nothing to resume; run optimize again") from exc
            args.gateway = record.gateway  # _follow exports a gateway session's folder at the end
            return int(await hooks.follow(args, client, session, run_dir, session.budget, stop))


def _already_ended(args: argparse.Namespace, run_dir: Path, summary: dict[str, Any]) -> int:
    from ke_cli.commands import write_session_report

    report = run_dir / "report.html"
    # Killed after the summary and before the report: the report is all that is missing.
    path = str(report) if report.is_file() else write_session_report(run_dir)
    out = {"session_id": summary.get("session_id", ""), "status": runstate.run_status(run_dir),
           "run_dir": str(run_dir), "resumed": False, "message": "nothing to resume: the session already ended",
           "evaluated": summary.get("evaluated"), "budget": summary.get("budget"),
           "best_candidate_id": summary.get("best_candidate_id") or None,
           "best_speedup": summary.get("best_speedup"), "report": path}
    if args.json:
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
    else:
        sys.stdout.write(f"Session {out['session_id']} already ended ({out['status']}): nothing to resume.\n"
                         f"Run folder: {run_dir}\n")
    return 0


# -- list / show / cancel -----------------------------------------------------------------------


def _folder_info(run_dir: Path) -> dict[str, Any]:
    summary = runstate.read_summary(run_dir) or {}
    try:
        record: runstate.RunRecord | None = runstate.read_record(run_dir)
    except InvalidArgumentError:
        record = None
    reports = run_dir / "reports"
    evaluated = summary.get("evaluated")
    if evaluated is None:  # not finished: every stored report is one completed evaluation
        evaluated = len(list(reports.glob("*.json"))) if reports.is_dir() else 0
    return {
        "session_id": summary.get("session_id") or (record.session_id if record else run_dir.name),
        "run_dir": str(run_dir),
        "status": runstate.run_status(run_dir),
        "spec": summary.get("spec") or (record.spec_name if record else ""),
        "budget": summary.get("budget") or (record.budget if record else 0),
        "evaluated": evaluated,
        "best_candidate_id": summary.get("best_candidate_id") or None,
        "best_speedup": summary.get("best_speedup"),
        "pid": runstate.holder(run_dir),
        "gateway": record.gateway if record else "",
        "resumable": runstate.run_status(run_dir) == "stopped",
    }


def _session_info(s: pb.Session, gateway: str) -> dict[str, Any]:
    created = (datetime.fromtimestamp(s.created_at.seconds, UTC).isoformat()
               if s.HasField("created_at") else None)
    return {
        "session_id": s.session_id, "gateway": gateway,
        "status": pb.SessionStatus.Name(s.status).removeprefix("SESSION_STATUS_").lower(),
        "spec": s.spec.name, "budget": s.budget, "generated": s.generated, "evaluated": s.evaluated,
        "best_candidate_id": s.best_candidate_id or None, "best_speedup": s.best_speedup,
        "hardware": s.hardware.kind, "resumes": s.resumes, "created_at": created, "error": s.error,
    }


def _local_gateway(settings: Settings) -> str:
    from ke_cli.cluster import default_state_dir, running

    cluster = running(default_state_dir(settings))
    return cluster.gateway if cluster is not None else ""


async def _list(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    gateway = args.gateway or ("" if args.root else _local_gateway(settings))
    if args.root is not None or not args.gateway:
        root = args.root or Path("runs")
        if args.root is not None and not root.is_dir():
            raise InvalidArgumentError(f"--root {root} is not a folder")
        if root.is_dir():
            for d in sorted(p for p in root.iterdir() if p.is_dir()):
                if (d / runstate.SESSION_FILE).is_file() or (d / runstate.SUMMARY_FILE).is_file():
                    rows.append(_folder_info(d))
    if gateway:
        async with _client(settings, gateway, args.token) as client:
            rows.extend(_session_info(s, gateway) for s in await client.list_sessions())
    return {"sessions": rows}


def _resolve(target: str) -> Path | None:
    for d in (Path(target), Path("runs") / target):
        if d.is_dir():
            return d
    return None


async def _show(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    run_dir = None if args.gateway else _resolve(args.target)
    if run_dir is not None:
        info = _folder_info(run_dir)
        info["candidates"] = _folder_candidates(run_dir)
        return info
    if not args.gateway:
        raise InvalidArgumentError(f"{args.target} is neither a run folder nor a session id under runs/ "
                                   "(use --gateway HOST:PORT for a gateway's session)")
    async with _client(settings, args.gateway, args.token) as client:
        info = _session_info(await client.get_session(args.target), args.gateway)
        info["candidates"] = [{"candidate_id": n.node_id, "parent_id": n.parent_id or None,
                               "status": pb.EvaluationStatus.Name(n.status).removeprefix("EVALUATION_STATUS_")
                               .lower() if n.evaluated else "pending", "fitness": n.fitness}
                              for n in await client.list_candidates(args.target)]
    return info


def _folder_candidates(run_dir: Path) -> list[dict[str, Any]]:
    out = []
    for path in sorted((run_dir / "candidates").glob("*.py")) if (run_dir / "candidates").is_dir() else []:
        cid = path.stem
        status, speedup = "pending", None
        report = run_dir / "reports" / f"{cid}.json"
        if report.is_file():
            try:
                verdict = json.loads(report.read_text())
                status, speedup = str(verdict.get("status", "")), verdict.get("speedup")
            except ValueError:
                status = "unreadable"
        out.append({"candidate_id": cid, "status": status, "speedup": speedup})
    return out


async def _cancel(args: argparse.Namespace, settings: Settings, hooks: Follow) -> dict[str, Any]:
    run_dir = None if args.gateway else _resolve(args.target)
    if run_dir is None:
        if not args.gateway:
            raise InvalidArgumentError(f"{args.target} is neither a run folder nor a session id under runs/")
        async with _client(settings, args.gateway, args.token) as client:
            info = _session_info(await client.cancel(args.target), args.gateway)
            info["cancel_requested"] = info["status"] == "running"
            return info
    status = runstate.run_status(run_dir)
    pid = runstate.holder(run_dir)
    if pid is not None:
        # The process driving it stops it the way Ctrl-C does, and writes its end files.
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + _CANCEL_WAIT_S
        while runstate.holder(run_dir) is not None and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        info = _folder_info(run_dir)
        info["cancel_requested"] = True
        info["signalled_pid"] = pid
        return info
    if status != "stopped":
        info = _folder_info(run_dir)
        info["cancel_requested"] = False
        info["message"] = "the session already ended"
        return info
    record = runstate.read_record(run_dir)
    with runstate.hold(run_dir):
        async with AsyncExitStack() as stack:
            client = await _open(settings, run_dir, record, args.token, stack)
            await client.cancel(record.session_id)
            await client.resume(record.session_id)  # publishes what a kill left owed, so it can end
            async for _env in client.watch(record.session_id):
                pass  # ends with SessionCompleted
            if record.gateway:
                await client.export(record.session_id, run_dir)
    from ke_cli.commands import write_session_report

    write_session_report(run_dir)
    info = _folder_info(run_dir)
    info["cancel_requested"] = True
    return info


# -- output ---------------------------------------------------------------------------------


def _print(args: argparse.Namespace, doc: dict[str, Any], text: Callable[[dict[str, Any]], str]) -> int:
    sys.stdout.write(json.dumps(doc, indent=2) + "\n" if args.json else text(doc))
    return 0


def _list_text(doc: dict[str, Any]) -> str:
    rows = doc["sessions"]
    if not rows:
        return "No sessions.\n"
    lines = [f"{'SESSION':<28} {'STATUS':<10} {'EVAL':>9} {'BEST':>8}  WHERE"]
    for r in rows:
        best = f"{r['best_speedup']:.3g}x" if r.get("best_candidate_id") and r.get("best_speedup") else "-"
        lines.append(f"{r['session_id']:<28} {r['status']:<10} {r['evaluated']:>4}/{r['budget']:<4} {best:>8}  "
                     f"{r.get('run_dir') or r.get('gateway')}")
    return "\n".join(lines) + "\n"


def _show_text(doc: dict[str, Any]) -> str:
    lines = [f"Session {doc['session_id']}: {doc['status']}, {doc['evaluated']} of {doc['budget']} evaluated"]
    if doc.get("best_candidate_id"):
        lines.append(f"  best: {doc['best_candidate_id']} ({doc.get('best_speedup') or 0:.3f}x)")
    if doc.get("run_dir"):
        lines.append(f"  run folder: {doc['run_dir']}")
    if doc.get("pid"):
        lines.append(f"  driven by pid {doc['pid']}")
    if doc.get("resumable"):
        lines.append(f"  stopped before its end: kernelevolve resume {doc['run_dir']}")
    if doc.get("message"):
        lines.append(f"  {doc['message']}")
    for c in doc.get("candidates", []):
        sp = f" {c['speedup']:.3f}x" if isinstance(c.get("speedup"), float) else ""
        lines.append(f"  {c['candidate_id']}: {c['status']}{sp}")
    return "\n".join(lines) + "\n"
