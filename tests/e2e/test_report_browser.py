"""The report of a small run folder (five candidates: correct, failed to compile, wrong,
one with hostile text in its traceback), written by ``write_report`` and rendered and
clicked in headless Chromium with the network blocked. In the default run, so CI renders a
report every time; a real session's report is checked the same way in the slow
test_report_export.py (a budget-2 CPU session before the browser took 107 s here, too long
for the default run)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernelevolve.report import write_report
from tests.e2e.report_browser import check_report, chromium
from tests.unit.test_report import run_dir  # noqa: F401 - the run-folder fixture

pytestmark = pytest.mark.e2e


def test_report_renders_and_clicks_in_chromium(run_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    chromium()
    assert write_report(run_dir) == run_dir / "report.html"
    check_report(run_dir, tmp_path / "profile")
    assert os.listdir(tmp_path / "profile")  # the browser used the empty profile it was given
