"""What a session report is drawn from: the run folder's files (or the same keys in an
object store), gathered into one plain structure. No torch, no services: the CLI, the
Python API and the gateway all use it."""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_ID = re.compile(r"^[A-Za-z0-9_.-]+$")


@dataclass
class RunData:
    session_id: str
    spec_name: str
    spec_source: str = ""
    summary: dict[str, Any] = field(default_factory=dict)
    nodes: list[dict[str, Any]] = field(default_factory=list)  # lineage.json "nodes", evaluation order
    sources: dict[str, str] = field(default_factory=dict)
    reports: dict[str, dict[str, Any]] = field(default_factory=dict)
    retimes: dict[str, dict[str, Any]] = field(default_factory=dict)
    times: dict[str, float] = field(default_factory=dict)  # candidate id -> epoch seconds its report was written
    run_dir: str = ""
    judged_shapes: dict[str, Any] = field(default_factory=dict)  # judged_shapes.json: a spec judged shrunk

    @property
    def interpreted(self) -> bool:
        return any(bool(r.get("interpreted")) for r in self.reports.values())

    @property
    def best_id(self) -> str:
        return str(self.summary.get("best_candidate_id") or "")

    def node(self, cid: str) -> dict[str, Any] | None:
        return next((n for n in self.nodes if n.get("node_id") == cid), None)


def _json(data: bytes | None) -> dict[str, Any]:
    if not data:
        return {}
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _finish(run: RunData, lineage: dict[str, Any]) -> RunData:
    run.nodes = [n for n in lineage.get("nodes", []) if isinstance(n, dict) and _ID.match(str(n.get("node_id", "")))]
    if run.times:  # evaluation order when known, else the lineage's order
        order = {n["node_id"]: i for i, n in enumerate(run.nodes)}
        run.nodes.sort(key=lambda n: (run.times.get(n["node_id"], float("inf")), order[n["node_id"]]))
    return run


def load_run_folder(run_dir: str | Path) -> RunData:
    """Read a run folder written by ``kernelevolve optimize`` (or exported through the API)."""
    root = Path(run_dir)
    if not (root / "lineage.json").is_file() and not (root / "summary.json").is_file():
        raise FileNotFoundError(f"{root} is not a run folder (no lineage.json or summary.json)")

    def read(name: str) -> bytes | None:
        p = root / name
        return p.read_bytes() if p.is_file() else None

    summary = _json(read("summary.json"))
    lineage = _json(read("lineage.json"))
    run = RunData(session_id=str(summary.get("session_id") or lineage.get("session_id") or root.name),
                  spec_name=str(summary.get("spec") or lineage.get("spec") or ""),
                  spec_source=(read("spec.py") or b"").decode("utf-8", "replace"),
                  summary=summary, run_dir=str(root), judged_shapes=_json(read("judged_shapes.json")))
    for n in lineage.get("nodes", []):
        cid = str(n.get("node_id", "")) if isinstance(n, dict) else ""
        if not _ID.match(cid):
            continue
        src = read(f"candidates/{cid}.py")
        if src is not None:
            run.sources[cid] = src.decode("utf-8", "replace")
        rp = root / "reports" / f"{cid}.json"
        if rp.is_file():
            run.reports[cid] = _json(rp.read_bytes())
            run.times[cid] = rp.stat().st_mtime
        rt = read(f"retimes/{cid}.json")
        if rt is not None:
            run.retimes[cid] = _json(rt)
    return _finish(run, lineage)


async def load_from_store(get: Callable[[str], Awaitable[bytes | None]], prefix: str, session_id: str,
                          summary: dict[str, Any] | None = None) -> RunData:
    """The same, from an object store: ``get(key)`` returns the bytes or None when absent."""
    stored_summary = _json(await get(f"{prefix}summary.json"))
    summary = {**(summary or {}), **stored_summary}
    lineage = _json(await get(f"{prefix}lineage.json"))
    run = RunData(session_id=session_id, spec_name=str(summary.get("spec") or lineage.get("spec") or ""),
                  spec_source=((await get(f"{prefix}spec.py")) or b"").decode("utf-8", "replace"),
                  summary=summary)
    for n in lineage.get("nodes", []):
        cid = str(n.get("node_id", "")) if isinstance(n, dict) else ""
        if not _ID.match(cid):
            continue
        src = await get(f"{prefix}candidates/{cid}.py")
        if src is not None:
            run.sources[cid] = src.decode("utf-8", "replace")
        rep = await get(f"{prefix}reports/{cid}.json")
        if rep is not None:
            run.reports[cid] = _json(rep)
        rt = await get(f"{prefix}retimes/{cid}.json")
        if rt is not None:
            run.retimes[cid] = _json(rt)
    return _finish(run, lineage)
