"""The Python API, also re-exported as ``kernelevolve.optimize`` / ``kernelevolve.evaluate``.

    import kernelevolve
    result = kernelevolve.optimize("examples/ops/softmax_rows.py", budget=8)
    print(result.speedup, result.verdict, result.report_path)
    open("my_kernel.py", "w").write(result.best_source)

    verdict = kernelevolve.evaluate("examples/ops/softmax_rows.py", "my_kernel.py")
    print(verdict.status, verdict.reason, verdict.speedup)

``optimize`` runs the same session as ``kernelevolve optimize`` (the embedded stack, or a
gateway), quietly, and returns an ``OptimizeResult`` read back from the run folder;
``evaluate`` judges one candidate in the evaluator's sandbox and returns its ``Verdict``.

This module checks the input, loads the settings and reads the results; the sessions
and the judge come from an engine (``kernelevolve.ports.engine.Engine``). The installed
one is the CLI package's, found through its entry point, so the library never imports
the CLI; ``use(engine)`` puts another in its place (a test's double, an application
that brings its own stack).
"""

from __future__ import annotations

import inspect
import logging
import tempfile
import threading
from dataclasses import dataclass, field, replace
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import Any

from kernelevolve import logging as ke_logging
from kernelevolve.config import load_settings
from kernelevolve.errors import ConfigError, InvalidArgumentError, InvalidSpecError
from kernelevolve.ports.engine import ENGINE_GROUP, Engine, OptimizeRequest
from kernelevolve.ports.verdict import Verdict
from kernelevolve.precision import check_name
from kernelevolve.spec import load_spec_file

__all__ = ["Engine", "OptimizeRequest", "OptimizeResult", "evaluate", "optimize", "use"]

log = logging.getLogger(__name__)

_lock = threading.Lock()
_engine: Engine | None = None


def use(engine: Engine | None) -> Engine | None:
    """Make ``engine`` the one ``optimize``, ``evaluate`` and ``export`` use (``None``: the
    installed one again, found on next use); returns the one it replaces."""
    global _engine
    with _lock:
        previous, _engine = _engine, engine
    return previous


def current_engine() -> Engine:
    """The engine in use: the one given to ``use``, else the installed one (entry point
    ``default`` of the group ``kernelevolve.engine``, which the CLI package declares)."""
    global _engine
    with _lock:
        if _engine is None:
            found = {ep.name: ep for ep in entry_points(group=ENGINE_GROUP)}
            if "default" not in found:
                raise ConfigError(f"no KernelEvolve engine is installed (entry point 'default' of the group "
                                  f"{ENGINE_GROUP!r}): install the package (pip install -e .), or pass one to "
                                  "kernelevolve.api.use()")
            _engine = found["default"].load()
            log.debug("engine loaded", extra={"engine": found["default"].value})
        assert _engine is not None
        return _engine


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
        return current_engine().export(self.run_dir, fmt, name, Path(out) if out is not None else None)


def spec_path(spec: str | Path | ModuleType, tmp: Path) -> Path:
    """The file of a spec given as a path or as an imported module (whose source is written
    into ``tmp`` when the module has no file of its own)."""
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


def optimize(spec: str | Path | ModuleType, budget: int = 8, strategy: str = "", synthesizer: str = "",
             hardware: str = "", *, out: str | Path | None = None, gateway: str = "", timeout: float = 3600.0,
             max_inflight: int = 0, config: str | None = None, verbose: bool = False,
             precision: str = "") -> OptimizeResult:
    """Search for a faster verified kernel for ``spec`` (a spec file path or an imported spec module).

    budget: candidates to evaluate; strategy: search strategy ("greedy"); synthesizer: synthesizer
    kind ("offline"); hardware: evaluator hardware kind ("cpu", "nvidia"; default auto); out: run
    folder (default runs/<session-id>); gateway: "host:port" of a running gateway instead of the
    embedded stack; precision: the contract ("default", "strict", "tf32"; ``kernelevolve.precision``).
    Raises InvalidSpecError / InvalidArgumentError on bad input.
    """
    if budget < 1:
        raise InvalidArgumentError("budget must be at least 1")
    overrides: dict[str, Any] = {}
    if precision:
        overrides["search"] = {"session": {"precision": check_name(precision)}}
    if synthesizer:
        overrides["synthesizer"] = {"kind": synthesizer}
    if hardware:
        overrides["evaluator"] = {"hardware_kind": hardware}
    settings = load_settings(config, overrides=overrides or None)
    ke_logging.configure("console", "INFO" if verbose else "WARNING")
    engine = current_engine()
    with tempfile.TemporaryDirectory(prefix="ke-spec-") as tmp:
        request = OptimizeRequest(spec=spec_path(spec, Path(tmp)), budget=budget, settings=settings,
                                  strategy=strategy, out=Path(out) if out is not None else None, gateway=gateway,
                                  timeout_s=timeout, max_inflight=max_inflight)
        summary = dict(engine.optimize(request))
    return result_of(summary)


def result_of(summary: dict[str, Any]) -> OptimizeResult:
    """The ``OptimizeResult`` of a run's summary, with the best kernel's source read from the run folder."""
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
             config: str | None = None, precision: str = "") -> Verdict:
    """Judge one candidate (a file path, or the source text of a module defining ModelNew) against
    ``spec``; returns the evaluator's ``Verdict`` (``status``, ``reason``, ``speedup``, ``is_correct``,
    ``to_dict()``). Raises InvalidSpecError when the spec's reference cannot be run,
    ResourceLimitError when it runs out of memory inside the evaluator's limits. ``precision``:
    the contract the verdict is reached under (default: ``evaluator.precision``)."""
    ev = load_settings(config).evaluator
    if trials:
        ev = replace(ev, correctness_trials=trials)
    if precision:
        ev = replace(ev, precision=check_name(precision))
    with tempfile.TemporaryDirectory(prefix="ke-spec-") as tmp:
        spec_pb = load_spec_file(spec_path(spec, Path(tmp)))
    if isinstance(candidate, Path) or ("\n" not in candidate and candidate.endswith(".py")):
        cpath = Path(candidate)
        if not cpath.is_file():
            raise InvalidArgumentError(f"candidate file {cpath} does not exist")
        source, cid = cpath.read_text(encoding="utf-8"), cpath.stem
    else:
        source, cid = candidate, "candidate"
    with current_engine().judge(ev) as judge:
        judge.validate_spec(spec_pb.source, spec_pb.name).raise_if_failed(spec_pb.name)
        return judge.evaluate(spec_pb.source, source, cid)
