"""The Python API's plumbing, and the API on an engine double (a real session runs in
tests/e2e/test_report_export.py and tests/e2e/test_readme_api.py)."""

from __future__ import annotations

import contextlib
import importlib.util
import types
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

import kernelevolve
from kernelevolve import api
from kernelevolve.api import OptimizeRequest, OptimizeResult, result_of, spec_path
from kernelevolve.config import EvaluatorSettings
from kernelevolve.errors import ConfigError, InvalidArgumentError, InvalidSpecError
from kernelevolve.ports.judge import JudgePort
from tests.conftest import EXAMPLES
from tests.unit.fakes import FakeJudge


def test_spec_from_path_or_module(tmp_path: Path) -> None:
    path = EXAMPLES / "softmax_rows.py"
    assert spec_path(str(path), tmp_path) == path
    spec = importlib.util.spec_from_file_location("softmax_rows_spec", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert spec_path(mod, tmp_path) == path
    with pytest.raises(InvalidSpecError, match="cannot read the source"):
        spec_path(types.ModuleType("made_up"), tmp_path)
    with pytest.raises(InvalidSpecError, match="does not exist"):
        spec_path(tmp_path / "nope.py", tmp_path)


def test_bad_budget_is_refused_before_anything_starts() -> None:
    with pytest.raises(InvalidArgumentError, match="budget"):
        kernelevolve.optimize(EXAMPLES / "softmax_rows.py", budget=0)


def test_result_from_summary(tmp_path: Path) -> None:
    (tmp_path / "candidates").mkdir()
    (tmp_path / "candidates" / "r1-1.py").write_text("class ModelNew: ...\n")
    r = result_of({"session_id": "s", "status": "completed", "run_dir": str(tmp_path), "hardware": "cpu",
                 "interpreted": True, "report": str(tmp_path / "report.html"),
                 "best": {"candidate_id": "r1-1", "status": "correct", "speedup": 1.25, "device": "cpu"}})
    assert isinstance(r, OptimizeResult) and r.ok and r.speedup == 1.25 and r.best_source == "class ModelNew: ...\n"
    none = result_of({"session_id": "s", "status": "completed", "run_dir": str(tmp_path), "best": None})
    assert not none.ok and none.best_source is None and none.speedup == 0.0


def test_optimize_from_a_running_event_loop_reaches_the_session(tmp_path: Path) -> None:
    """From a notebook (a loop already running), the session runs in a helper thread, where
    signal handlers cannot be installed: bad input still comes back as the usual error."""
    import asyncio

    bad = tmp_path / "bad.py"
    bad.write_text("def broken(:\n")

    async def call() -> None:
        kernelevolve.optimize(bad, budget=1, out=tmp_path / "run")

    with pytest.raises(InvalidSpecError, match="does not parse"):
        asyncio.run(call())
    assert not (tmp_path / "run").exists()


class _Engine:
    """The engine port's double: sessions answered from a summary it writes, the judge a double."""

    def __init__(self, judge: FakeJudge) -> None:
        self.requests: list[OptimizeRequest] = []
        self.judges: list[EvaluatorSettings] = []
        self.exports: list[tuple[Path, str]] = []
        self._judge = judge

    def optimize(self, request: OptimizeRequest) -> Mapping[str, Any]:
        self.requests.append(request)
        run_dir = request.out or Path("runs") / "s-double"
        (run_dir / "candidates").mkdir(parents=True)
        (run_dir / "candidates" / "r1-0.py").write_text("# block=512\nclass ModelNew: ...\n")
        return {"session_id": "s-double", "status": "completed", "run_dir": str(run_dir), "hardware": "cpu",
                "interpreted": True, "best": {"candidate_id": "r1-0", "status": "correct", "speedup": 4.0}}

    @contextlib.contextmanager
    def judge(self, settings: EvaluatorSettings) -> Iterator[JudgePort]:
        self.judges.append(settings)
        yield self._judge

    def export(self, run_dir: Path, fmt: str, name: str | None, out: Path | None) -> Path:
        self.exports.append((run_dir, fmt))
        return run_dir / "export"


@pytest.fixture
def engine() -> Iterator[_Engine]:
    double = _Engine(FakeJudge())
    previous = api.use(double)
    yield double
    api.use(previous)


def test_the_api_runs_on_the_engine_it_is_given(engine: _Engine, tmp_path: Path) -> None:
    result = kernelevolve.optimize(EXAMPLES / "softmax_rows.py", budget=2, strategy="beam", synthesizer="llm",
                                   hardware="cpu", out=tmp_path / "run", max_inflight=3)
    (request,) = engine.requests
    assert (request.budget, request.strategy, request.max_inflight, request.out) == (2, "beam", 3, tmp_path / "run")
    assert request.settings.synthesizer.kind == "llm" and request.settings.evaluator.hardware_kind == "cpu"
    assert result.ok and result.speedup == 4.0 and result.best_source == "# block=512\nclass ModelNew: ...\n"
    assert result.export("module") == tmp_path / "run" / "export" and engine.exports == [(tmp_path / "run", "module")]
    verdict = kernelevolve.evaluate(EXAMPLES / "softmax_rows.py", "# block=256\nclass ModelNew: ...\n", trials=7)
    assert verdict.status == "correct" and verdict.speedup == 2.0 and engine.judges[0].correctness_trials == 7
    with pytest.raises(InvalidArgumentError, match="does not exist"):
        kernelevolve.evaluate(EXAMPLES / "softmax_rows.py", tmp_path / "missing.py")


@pytest.mark.parametrize("contract", ["strict", "tf32", "default"])
def test_the_api_passes_the_precision_contract(engine: _Engine, tmp_path: Path, contract: str) -> None:
    kernelevolve.optimize(EXAMPLES / "softmax_rows.py", budget=1, out=tmp_path / "run", precision=contract)
    assert engine.requests[0].settings.search.session.precision == contract
    kernelevolve.evaluate(EXAMPLES / "softmax_rows.py", "# block=256\nclass ModelNew: ...\n", precision=contract)
    assert engine.judges[0].precision == contract
    with pytest.raises(InvalidArgumentError, match="precision must be one of"):
        kernelevolve.evaluate(EXAMPLES / "softmax_rows.py", "# block=256\nclass ModelNew: ...\n", precision="ieee")


def test_the_installed_engine_is_the_clis(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found through the package's entry point (a stale install lacks it: reinstall the package)."""
    from ke_cli.api import ENGINE

    previous = api.use(None)
    try:
        assert api.current_engine() is ENGINE
        monkeypatch.setattr(api, "entry_points", lambda group: [])
        api.use(None)
        with pytest.raises(ConfigError, match="no KernelEvolve engine is installed"):
            api.current_engine()
    finally:
        api.use(previous)
