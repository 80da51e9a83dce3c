"""The CLI package's engine for the Python API (``kernelevolve.api``): a session is the
``kernelevolve optimize`` command's (the embedded stack, or a gateway), run quietly; the
judge is the evaluator's sandboxed one; an export is ``kernelevolve export``.

The package declares ``ENGINE`` as the entry point ``default`` of the group
``kernelevolve.engine``: that is how ``kernelevolve.optimize`` finds it without the
library importing the CLI.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import threading
from collections.abc import Coroutine, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

from kernelevolve.config import EvaluatorSettings, Settings
from kernelevolve.errors import InvalidArgumentError
from kernelevolve.ports.engine import OptimizeRequest
from kernelevolve.ports.judge import JudgePort

T = TypeVar("T")


def _run_coro(coro: Coroutine[Any, Any, T]) -> T:
    """asyncio.run, also from inside a running loop (a notebook): then in a helper thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
            box["error"] = exc

    t = threading.Thread(target=target, name="kernelevolve-optimize")
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


class CliEngine:
    """``kernelevolve.ports.engine.Engine`` by the CLI's own commands."""

    def optimize(self, request: OptimizeRequest) -> Mapping[str, Any]:
        from ke_cli import main as cli

        argv = ["optimize", str(request.spec), "--budget", str(request.budget), "--json",
                "--timeout", str(request.timeout_s)]
        if request.strategy:
            argv += ["--strategy", request.strategy]
        if request.out is not None:
            argv += ["--out", str(request.out)]
        if request.gateway:
            argv += ["--gateway", request.gateway]
        if request.max_inflight:
            argv += ["--max-inflight", str(request.max_inflight)]
        args = cli._parser().parse_args(argv)
        buf = io.StringIO()
        try:
            with contextlib.redirect_stdout(buf):
                _run_coro(_session(args, request.settings))
        except cli.UsageError as exc:
            raise InvalidArgumentError(str(exc)) from exc
        summary: dict[str, Any] = json.loads(buf.getvalue() or "{}")
        return summary

    @contextlib.contextmanager
    def judge(self, settings: EvaluatorSettings) -> Iterator[JudgePort]:
        from ke_evaluator.judge import Judge, options_from_settings

        with Judge(options_from_settings(settings)) as judge:
            yield judge

    def export(self, run_dir: Path, fmt: str, name: str | None, out: Path | None) -> Path:
        from ke_cli.export import export_run

        return export_run(run_dir, fmt, name, out).out_dir


async def _session(args: argparse.Namespace, settings: Settings) -> int:
    """The command's session; off the main thread (a notebook's loop is running) without its
    SIGINT/SIGTERM handlers, which only the main thread may install."""
    from ke_cli import main as cli

    if threading.current_thread() is threading.main_thread():
        return int(await cli._optimize(args, settings))
    task = asyncio.current_task()
    assert task is not None
    return int(await cli._optimize_session(args, settings, cli._Stop(task)))


ENGINE = CliEngine()
