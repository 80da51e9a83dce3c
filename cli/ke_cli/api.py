"""The Python API, re-exported lazily as ``kernelevolve.optimize`` / ``kernelevolve.evaluate``.

    import kernelevolve
    result = kernelevolve.optimize("examples/ops/softmax_rows.py", budget=8)
    print(result.speedup, result.verdict, result.report_path)
    open("my_kernel.py", "w").write(result.best_source)

    verdict = kernelevolve.evaluate("examples/ops/softmax_rows.py", "my_kernel.py")
    print(verdict.status, verdict.reason, verdict.speedup)

``optimize`` runs the same session as ``kernelevolve optimize`` (the embedded stack, or a
gateway), quietly, and returns an ``OptimizeResult`` read back from the run folder;
``evaluate`` judges one candidate in the evaluator's sandbox and returns its ``Verdict``.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import io
import json
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from kernelevolve.errors import InvalidArgumentError, InvalidSpecError


@dataclass
class OptimizeResult:
    session_id: str
    status: str  # "completed", "cancelled", "failed"
    run_dir: Path
    report_path: Path | None
    best_candidate_id: str | None
    best_source: str | None  # the best kernel: a module defining ModelNew, drop-in for Model
    verdict: str | None  # "correct" when a kernel was found
    speedup: float  # vs eager PyTorch on `device` (0.0 when none)
    device: str
    interpreted: bool  # True: CPU interpreter timings, which say nothing about GPU speed
    summary: dict[str, Any] = field(default_factory=dict)
    error: str | None = None  # why a failed session failed

    @property
    def ok(self) -> bool:
        return self.verdict == "correct"

    def export(self, fmt: str = "torch-library", name: str | None = None, out: str | Path | None = None) -> Path:
        """``kernelevolve export`` of this run: returns the export folder."""
        from ke_cli.export import export_run

        return export_run(self.run_dir, fmt, name, out).out_dir


def _spec_path(spec: str | Path | ModuleType, tmp: Path) -> Path:
    if isinstance(spec, ModuleType):
        file = getattr(spec, "__file__", None)
        if file and Path(file).is_file():
            return Path(file)
        try:
            source = inspect.getsource(spec)
        except (OSError, TypeError) as exc:
            raise InvalidSpecError(f"cannot read the source of module {spec.__name__}") from exc
        path = tmp / f"{spec.__name__.rsplit('.', 1)[-1]}.py"
        path.write_text(source)
        return path
    path = Path(spec)
    if not path.is_file():
        raise InvalidSpecError(f"spec file {path} does not exist")
    return path


def _run_coro(coro: Any) -> Any:
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
    return box["value"]


def optimize(spec: str | Path | ModuleType, budget: int = 8, strategy: str = "", synthesizer: str = "",
             hardware: str = "", *, out: str | Path | None = None, gateway: str = "", timeout: float = 3600.0,
             max_inflight: int = 0, config: str | None = None, verbose: bool = False) -> OptimizeResult:
    """Search for a faster verified kernel for ``spec`` (a spec file path or an imported spec module).

    budget: candidates to evaluate; strategy: search strategy ("greedy"); synthesizer: synthesizer
    kind ("offline"); hardware: evaluator hardware kind ("cpu", "nvidia"; default auto); out: run
    folder (default runs/<session-id>); gateway: "host:port" of a running gateway instead of the
    embedded stack. Raises InvalidSpecError / InvalidArgumentError on bad input.
    """
    from ke_cli import main as cli
    from kernelevolve import logging as ke_logging
    from kernelevolve.config import load_settings

    if budget < 1:
        raise InvalidArgumentError("budget must be at least 1")
    overrides: dict[str, Any] = {}
    if synthesizer:
        overrides["synthesizer"] = {"kind": synthesizer}
    if hardware:
        overrides["evaluator"] = {"hardware_kind": hardware}
    settings = load_settings(config, overrides=overrides or None)
    ke_logging.configure("console", "INFO" if verbose else "WARNING")
    with tempfile.TemporaryDirectory(prefix="ke-spec-") as tmp:
        spec_path = _spec_path(spec, Path(tmp))
        argv = ["optimize", str(spec_path), "--budget", str(budget), "--json", "--timeout", str(timeout)]
        if strategy:
            argv += ["--strategy", strategy]
        if out is not None:
            argv += ["--out", str(out)]
        if gateway:
            argv += ["--gateway", gateway]
        if max_inflight:
            argv += ["--max-inflight", str(max_inflight)]
        args = cli._parser().parse_args(argv)
        buf = io.StringIO()
        try:
            with contextlib.redirect_stdout(buf):
                _run_coro(_session(cli, args, settings))
        except cli.UsageError as exc:
            raise InvalidArgumentError(str(exc)) from exc
    summary = json.loads(buf.getvalue() or "{}")
    return _result(summary)


async def _session(cli: Any, args: Any, settings: Any) -> int:
    """The command's session; off the main thread (a notebook's loop is running) without its
    SIGINT/SIGTERM handlers, which only the main thread may install."""
    if threading.current_thread() is threading.main_thread():
        return int(await cli._optimize(args, settings))
    task = asyncio.current_task()
    assert task is not None
    return int(await cli._optimize_session(args, settings, cli._Stop(task)))


def _result(summary: dict[str, Any]) -> OptimizeResult:
    run_dir = Path(summary["run_dir"])
    best = summary.get("best") or {}
    source = None
    if best:
        kernel = run_dir / "best_kernel.py"
        cand = run_dir / "candidates" / f"{best['candidate_id']}.py"
        source = (cand if cand.is_file() else kernel).read_text(encoding="utf-8")
    report = summary.get("report")
    return OptimizeResult(
        session_id=summary["session_id"], status=summary.get("status", ""), run_dir=run_dir,
        report_path=Path(report) if report else None, best_candidate_id=best.get("candidate_id"),
        best_source=source, verdict=best.get("status"), speedup=float(best.get("speedup") or 0.0),
        device=best.get("device") or summary.get("hardware", ""), interpreted=bool(summary.get("interpreted")),
        summary=summary, error=summary.get("error") or None)


def evaluate(spec: str | Path | ModuleType, candidate: str | Path, *, trials: int | None = None,
             config: str | None = None) -> Any:
    """Judge one candidate (a file path, or the source text of a module defining ModelNew) against
    ``spec``; returns the evaluator's ``Verdict`` (``status``, ``reason``, ``speedup``, ``is_correct``,
    ``to_dict()``). Raises InvalidSpecError when the spec's reference cannot be run,
    ResourceLimitError when it runs out of memory inside the evaluator's limits."""
    from ke_evaluator.judge import EvalOptions, Judge
    from kernelevolve.config import load_settings
    from kernelevolve.spec import load_spec_file

    settings = load_settings(config)
    ev = settings.evaluator
    with tempfile.TemporaryDirectory(prefix="ke-spec-") as tmp:
        spec_pb = load_spec_file(_spec_path(spec, Path(tmp)))
    if isinstance(candidate, Path) or (isinstance(candidate, str) and "\n" not in candidate
                                        and candidate.endswith(".py")):
        cpath = Path(candidate)
        if not cpath.is_file():
            raise InvalidArgumentError(f"candidate file {cpath} does not exist")
        source, cid = cpath.read_text(encoding="utf-8"), cpath.stem
    else:
        source, cid = str(candidate), "candidate"
    opts = EvalOptions(
        device="auto" if ev.hardware_kind == "auto" else ("cuda" if ev.hardware_kind == "nvidia" else "cpu"),
        correctness_trials=trials or ev.correctness_trials,
        compile_timeout_s=ev.compile_timeout_s, run_timeout_s=ev.run_timeout_s)
    with Judge(opts) as judge:
        judge.validate_spec(spec_pb.source, spec_pb.name).raise_if_failed(spec_pb.name)
        return judge.evaluate(spec_pb.source, source, cid)
