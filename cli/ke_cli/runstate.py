"""What a run folder says about its session, beside the session's own durable state.

    RUN_DIR/session.json   who the session is: id, spec, budget, where it runs (embedded or
                           a gateway); written when ``optimize`` starts, read by ``resume``
                           and ``sessions``
    RUN_DIR/.lock          the pid of the ``kernelevolve`` process driving the session now;
                           present only while one is (a SIGKILLed one leaves it behind, and
                           a dead pid does not hold it)
    RUN_DIR/summary.json   written when the session ends: its presence means finished
    RUN_DIR/.nats/         the embedded bus's JetStream data: the search tree, the events

The session's progress itself (candidates, evaluations, re-timings, budget) lives on the
bus, not here: these files only find it and keep two processes from driving it at once.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kernelevolve.errors import ConflictError, InvalidArgumentError
from kernelevolve.orphans import pid_alive

SESSION_FILE = "session.json"
LOCK_FILE = ".lock"
SUMMARY_FILE = "summary.json"


@dataclass
class RunRecord:
    session_id: str
    spec: str  # the spec file as given
    spec_name: str
    budget: int
    strategy: str = ""
    max_inflight: int = 0
    gateway: str = ""  # "" = the embedded stack, with its bus in RUN_DIR/.nats
    created_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat())

    @property
    def embedded(self) -> bool:
        return not self.gateway


def write_record(run_dir: Path, record: RunRecord) -> None:
    tmp = run_dir / f".{SESSION_FILE}.tmp"
    tmp.write_text(json.dumps(asdict(record), indent=2))
    tmp.replace(run_dir / SESSION_FILE)  # atomic: a kill never leaves half a record


def read_record(run_dir: Path) -> RunRecord:
    """The run folder's record; InvalidArgumentError when ``run_dir`` is not a run folder."""
    path = run_dir / SESSION_FILE
    if not run_dir.is_dir() or not path.is_file():
        raise InvalidArgumentError(f"{run_dir} is not a run folder (no {SESSION_FILE}; "
                                   "`kernelevolve optimize --out DIR` makes one)")
    try:
        raw = json.loads(path.read_text())
        return RunRecord(**{k: v for k, v in raw.items() if k in RunRecord.__dataclass_fields__})
    except (ValueError, TypeError) as exc:
        raise InvalidArgumentError(f"{path} is unreadable: {exc}") from exc


def read_summary(run_dir: Path) -> dict[str, Any] | None:
    path = run_dir / SUMMARY_FILE
    if not path.is_file():
        return None
    try:
        summary = json.loads(path.read_text())
    except ValueError:
        return None  # half-written by a killed writer: not finished as far as we know
    return summary if isinstance(summary, dict) else None


def holder(run_dir: Path) -> int | None:
    """The pid of the live process driving this run folder's session, or None."""
    try:
        pid = int((run_dir / LOCK_FILE).read_text().strip() or "0")
    except (OSError, ValueError):
        return None
    return pid if pid_alive(pid) else None


@contextlib.contextmanager
def hold(run_dir: Path) -> Iterator[None]:
    """Mark this process as the one driving the session in ``run_dir``; ConflictError when a
    live process already is. A lock left by a dead process is taken over."""
    path = run_dir / LOCK_FILE
    for _attempt in range(3):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            pid = holder(run_dir)
            if pid is not None:
                raise ConflictError(f"the session in {run_dir} is running now (pid {pid}); "
                                    f"stop it with `kernelevolve sessions cancel {run_dir}`") from None
            with contextlib.suppress(FileNotFoundError):
                path.unlink()  # stale: its process died
            continue
        with os.fdopen(fd, "w") as f:
            f.write(str(os.getpid()))
        break
    else:
        raise ConflictError(f"could not take the lock {path}")
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            if path.read_text().strip() == str(os.getpid()):
                path.unlink()


def run_status(run_dir: Path) -> str:
    """``running`` (a live process drives it), the finished status from summary.json
    (``completed``, ``cancelled``, ``failed``), or ``stopped`` (resumable)."""
    if holder(run_dir) is not None:
        return "running"
    summary = read_summary(run_dir)
    if summary is not None:
        return str(summary.get("status", "completed")).removeprefix("SESSION_STATUS_").lower()
    return "stopped"
