"""The ``knowledge`` and ``skills`` commands (``ke_cli.main`` registers them).

    kernelevolve knowledge add PATH... --hardware NAME [--kind doc|pattern|guidance] [--op-family F] [--json]
    kernelevolve knowledge search QUERY [--hardware NAME] [--op-family F] [--level L] [--limit N] [--json]
    kernelevolve skills list [--hardware NAME] [--op-family F] [--all] [--json]
    kernelevolve skills show SKILL_ID [--json]
    kernelevolve skills retire SKILL_ID [--reason TEXT] [--json]

Without ``--gateway`` they work on the user-level knowledge folder that embedded sessions
share (``knowledge.path``, default $XDG_DATA_HOME/kernelevolve/knowledge); with it, on
the deployment's knowledge service through the gateway's ``Knowledge`` API. Both paths
speak the same messages: locally the knowledge service's own servicer answers them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToDict

from kernelevolve.config import Settings, default_knowledge_dir
from kernelevolve.errors import InvalidArgumentError
from kernelevolve.op_family import check_op_family
from kernelevolve.v1 import common_pb2 as pb
from kernelevolve.v1 import services_pb2 as spb

COMMANDS = ("knowledge", "skills")


def _remote_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gateway", default="", help="a running gateway (host:port) instead of the local folder")
    p.add_argument("--token", default="", help="bearer token for --gateway (default: $KE_CLIENT_TOKEN)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def add_commands(sub: Any) -> None:
    k = sub.add_parser("knowledge", help="add documents to, or search, the knowledge base")
    ksub = k.add_subparsers(dest="knowledge_command", required=True)
    add = ksub.add_parser("add", help="add markdown, text or YAML files (long ones are chunked)")
    add.add_argument("paths", nargs="+", type=Path)
    add.add_argument("--hardware", required=True, help='hardware kind the documents are about ("any" for all)')
    add.add_argument("--kind", choices=("doc", "pattern", "guidance"), default="doc",
                     help="doc: hardware notes (default), pattern: op-family patterns, guidance: general rules")
    add.add_argument("--op-family", default="", help="op family the documents are about (default any)")
    _remote_args(add)
    search = ksub.add_parser("search", help="documents nearest in meaning to a query")
    search.add_argument("query")
    search.add_argument("--hardware", default="", help="this hardware kind's documents and generic ones")
    search.add_argument("--op-family", default="", help="this op family's documents and generic ones")
    search.add_argument("--level", choices=("guidance", "hardware", "op_pattern", "skill"), default=None)
    search.add_argument("--limit", type=int, default=5)
    _remote_args(search)

    s = sub.add_parser("skills", help="skills distilled from measured improvements")
    ssub = s.add_subparsers(dest="skills_command", required=True)
    ls = ssub.add_parser("list", help="skills, best measured gain first")
    ls.add_argument("--hardware", default="")
    ls.add_argument("--op-family", default="")
    ls.add_argument("--all", action="store_true", help="retired skills too")
    _remote_args(ls)
    show = ssub.add_parser("show", help="one skill in full")
    show.add_argument("skill_id")
    _remote_args(show)
    ret = ssub.add_parser("retire", help="retire a skill by hand (it stays, marked, with the reason)")
    ret.add_argument("skill_id")
    ret.add_argument("--reason", default="retired by hand")
    _remote_args(ret)


@asynccontextmanager
async def _knowledge_api(args: argparse.Namespace, settings: Settings) -> AsyncIterator[Any]:
    """Something with the ``Knowledge`` RPCs as ``await api.Method(request)``."""
    if args.gateway:
        import grpc

        from kernelevolve.grpc_guard import bearer_metadata
        from kernelevolve.v1 import services_pb2_grpc as sgrpc

        token = args.token or settings.client.token or os.environ.get("KE_CLIENT_TOKEN", "")
        async with grpc.aio.insecure_channel(args.gateway) as channel:
            yield _Remote(sgrpc.KnowledgeStub(channel), bearer_metadata(token))
        return
    from ke_knowledge import app as knowledge_app

    path = settings.knowledge.path or str(default_knowledge_dir(os.environ))
    local = replace(settings, knowledge=replace(settings.knowledge, path=path, url=""))
    async with AsyncExitStack() as stack:
        yield _Local(await knowledge_app.open_local(local, stack))


class _Remote:
    def __init__(self, stub: Any, metadata: Any) -> None:
        self._stub, self._metadata = stub, metadata

    def __getattr__(self, method: str) -> Any:
        from ke_cli.client import _mapped

        async def call(request: Any) -> Any:
            import grpc

            try:
                return await getattr(self._stub, method)(request, metadata=self._metadata, timeout=120)
            except grpc.aio.AioRpcError as exc:
                raise _mapped(exc) from exc

        return call


class _Local:
    """The servicer only translates, so calling it in-process is the local API; it never
    reads its context."""

    def __init__(self, servicer: Any) -> None:
        self._servicer = servicer

    def __getattr__(self, method: str) -> Any:
        async def call(request: Any) -> Any:
            return await getattr(self._servicer, method)(request, None)

        return call


def _skill_dict(s: pb.Skill) -> dict[str, Any]:
    return MessageToDict(s, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)


def _write(args: argparse.Namespace, data: dict[str, Any], lines: list[str]) -> None:
    sys.stdout.write(json.dumps(data, indent=2) + "\n" if args.json else "".join(f"{ln}\n" for ln in lines))


async def _run(args: argparse.Namespace, settings: Settings) -> int:
    from ke_knowledge.app import documents_from_files

    if getattr(args, "op_family", ""):
        check_op_family(args.op_family)
    if args.command == "knowledge" and args.knowledge_command == "add":
        hardware = "" if args.hardware in ("any", "") else args.hardware
        docs = documents_from_files(args.paths, hardware_kind=hardware, kind=args.kind, op_family=args.op_family)
        async with _knowledge_api(args, settings) as api:
            resp = await api.AddDocuments(spb.AddDocumentsRequest(documents=docs))
        _write(args, {"added": resp.added, "doc_ids": [d.doc_id for d in docs]},
               [f"Added {resp.added} document(s) from {len(args.paths)} file(s)."])
        return 0
    if args.command == "knowledge":
        from kernelevolve.knowledge_client import doc_from_scored, level_value

        if args.limit <= 0:
            raise InvalidArgumentError("--limit must be positive")
        req = spb.SearchKnowledgeRequest(query=args.query, limit=args.limit, hardware_kind=args.hardware,
                                         op_family=args.op_family,
                                         level=level_value(args.level) if args.level else 0)  # type: ignore[arg-type]
        async with _knowledge_api(args, settings) as api:
            resp = await api.Search(req)
        hits = [doc_from_scored(h) for h in resp.results]
        data = {"results": [{"doc_id": h.doc_id, "level": h.level, "title": h.title, "text": h.text,
                             "score": h.score, "hardware_kind": h.hardware_kind, "op_family": h.op_family,
                             "tags": list(h.tags)} for h in hits]}
        _write(args, data, [f"{h.score:.3f}  [{h.level}{'/' + h.hardware_kind if h.hardware_kind else ''}] "
                            f"{h.title}  ({h.doc_id})" for h in hits] or ["No documents found."])
        return 0 if hits else 1
    async with _knowledge_api(args, settings) as api:
        if args.skills_command == "list":
            resp = await api.ListSkills(spb.ListSkillsRequest(hardware_kind=args.hardware, op_family=args.op_family,
                                                              include_retired=args.all))
            skills = list(resp.skills)
            _write(args, {"skills": [_skill_dict(s) for s in skills]},
                   [f"{s.skill_id}  {s.detail.status:<8} gain {s.detail.gain:.2f}x "
                    f"[{s.detail.gain_low:.2f}-{s.detail.gain_high:.2f}]  {s.detail.precision or 'strict':<7}  "
                    f"{s.title}" for s in skills]
                   or ["No skills yet (skills come only from CI-separated wins timed on a GPU)."])
            return 0
        if args.skills_command == "show":
            skill = await api.GetSkill(spb.SkillRef(skill_id=args.skill_id))
        else:
            skill = await api.RetireSkill(spb.RetireSkillRequest(skill_id=args.skill_id, reason=args.reason))
    d = skill.detail
    _write(args, {"skill": _skill_dict(skill)}, [
        f"{skill.skill_id}: {skill.title}", skill.text,
        f"status: {d.status}{f' ({d.status_reason})' if d.status_reason else ''}",
        f"context: op family {d.op_family or '-'}, shape class {d.shape_class or '-'}, dtype {d.dtype or '-'}",
        f"gain: {d.gain:.3f}x [{d.gain_low:.3f}-{d.gain_high:.3f}], confirmed {d.confirmations}x, "
        f"failed {d.failures}x",
        f"before: {d.before or '-'}", f"after: {d.after or '-'}",
        "provenance: " + ", ".join(f"{k}={v}" for k, v in sorted(d.provenance.items()))])
    return 0


def run(args: argparse.Namespace, settings: Settings) -> int:
    return asyncio.run(_run(args, settings))
