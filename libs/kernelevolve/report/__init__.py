"""The session report: one self-contained HTML file (no network, no CDN) drawn from a run
folder or from the same keys in an object store.

    run = load_run_folder("runs/<session>")      # or await load_from_store(get, prefix, sid)
    html = render_html(run)
    path = write_report("runs/<session>")         # runs/<session>/report.html
"""

from __future__ import annotations

from pathlib import Path

from kernelevolve.report.data import RunData, load_from_store, load_run_folder
from kernelevolve.report.html import CPU_NOTE, render_html

REPORT_NAME = "report.html"

__all__ = ["CPU_NOTE", "REPORT_NAME", "RunData", "load_from_store", "load_run_folder", "render_html",
           "write_report"]


def write_report(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Render the report of a run folder into ``out`` (default ``<run_dir>/report.html``)."""
    run = load_run_folder(run_dir)
    path = Path(out) if out is not None else Path(run_dir) / REPORT_NAME
    path.write_text(render_html(run), encoding="utf-8")
    return path
