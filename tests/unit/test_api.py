"""The Python API's plumbing without a session (a real one runs in tests/e2e/test_report_export.py)."""

from __future__ import annotations

import importlib.util
import types
from pathlib import Path

import pytest

import kernelevolve
from ke_cli.api import OptimizeResult, _result, _spec_path
from kernelevolve.errors import InvalidArgumentError, InvalidSpecError
from tests.conftest import EXAMPLES


def test_spec_from_path_or_module(tmp_path: Path) -> None:
    path = EXAMPLES / "softmax_rows.py"
    assert _spec_path(str(path), tmp_path) == path
    spec = importlib.util.spec_from_file_location("softmax_rows_spec", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert _spec_path(mod, tmp_path) == path
    with pytest.raises(InvalidSpecError, match="cannot read the source"):
        _spec_path(types.ModuleType("made_up"), tmp_path)
    with pytest.raises(InvalidSpecError, match="does not exist"):
        _spec_path(tmp_path / "nope.py", tmp_path)


def test_bad_budget_is_refused_before_anything_starts() -> None:
    with pytest.raises(InvalidArgumentError, match="budget"):
        kernelevolve.optimize(EXAMPLES / "softmax_rows.py", budget=0)


def test_result_from_summary(tmp_path: Path) -> None:
    (tmp_path / "candidates").mkdir()
    (tmp_path / "candidates" / "r1-1.py").write_text("class ModelNew: ...\n")
    r = _result({"session_id": "s", "status": "completed", "run_dir": str(tmp_path), "hardware": "cpu",
                 "interpreted": True, "report": str(tmp_path / "report.html"),
                 "best": {"candidate_id": "r1-1", "status": "correct", "speedup": 1.25, "device": "cpu"}})
    assert isinstance(r, OptimizeResult) and r.ok and r.speedup == 1.25 and r.best_source == "class ModelNew: ...\n"
    none = _result({"session_id": "s", "status": "completed", "run_dir": str(tmp_path), "best": None})
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
