"""The engine port: what the Python API (``kernelevolve.api``) asks of whatever runs
sessions and judges candidates. The library holds the API and no stack; the CLI package
is the real engine (``ke_cli.api.CliEngine``: the embedded stack or a gateway, the
sandboxed Judge) and registers it under the entry-point group ``ENGINE_GROUP``; a test
or an embedding application may hand the API another with ``kernelevolve.api.use``."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from kernelevolve.ports.judge import JudgePort

if TYPE_CHECKING:  # typing only: the sandboxed worker imports the ports without the config's YAML
    from kernelevolve.config import EvaluatorSettings, Settings

# Where the installed engine is found (``[project.entry-points."kernelevolve.engine"]``).
ENGINE_GROUP = "kernelevolve.engine"


@dataclass(frozen=True)
class OptimizeRequest:
    """One ``optimize`` call, its input already checked and its settings already loaded."""

    spec: Path  # the spec file
    budget: int
    settings: Settings  # the configuration with the call's synthesizer and hardware applied
    strategy: str = ""  # "" = the configured default
    out: Path | None = None  # the run folder (None: runs/<session-id>)
    gateway: str = ""  # "host:port" of a running gateway instead of an embedded stack
    timeout_s: float = 3600.0
    max_inflight: int = 0  # 0 = the configured default


class Engine(Protocol):
    def optimize(self, request: OptimizeRequest) -> Mapping[str, Any]:
        """Run one session to its end, quietly; returns its summary as ``kernelevolve
        optimize --json`` prints it (``session_id``, ``status``, ``run_dir``, ``report``,
        ``best``, ``hardware``, ``interpreted``, ``error``). Bad input raises
        InvalidSpecError or InvalidArgumentError before anything is created."""
        ...

    def judge(self, settings: EvaluatorSettings) -> AbstractContextManager[JudgePort]:
        """A judge configured by ``settings``, closed when the context ends."""
        ...

    def export(self, run_dir: Path, fmt: str, name: str | None, out: Path | None) -> Path:
        """``kernelevolve export`` of a run folder; returns the export folder."""
        ...
