"""The session report on a synthetic run folder (no services, no torch), the store loader,
``config show`` masking and the export's refusals."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ke_cli.commands import masked
from ke_cli.export import export_run
from kernelevolve.config import load_settings
from kernelevolve.errors import InvalidArgumentError, NotFoundError
from kernelevolve.report import load_from_store, load_run_folder, render_html, write_report
from kernelevolve.store.memory import MemoryStore

SRC = "import torch\nimport triton\n\nBLOCK = {b}\n\nclass ModelNew(torch.nn.Module):\n    pass\n"


def _report(cid: str, status: str, speedup: float, interpreted: bool = True) -> dict[str, object]:
    rep: dict[str, object] = {"status": status, "reason": f"reason of {cid}", "candidate_id": cid,
                              "device": "cpu", "interpreted": interpreted,
                              "fingerprint": {"torch": "2.13.0+cpu", "triton": "3.7.1", "device": "cpu"}}
    if status == "correct":
        rep.update(speedup=speedup,
                   correctness={"trials": 6, "max_abs_error": 2e-7, "atol": 1e-4, "rtol": 1e-4,
                                "details": [{"set": "trial 0", "ok": True, "max_abs_error": 1e-7}]},
                   candidate_timing={"median_ms": 2.0 / speedup, "samples_ms": [2.0 / speedup, 2.2 / speedup]},
                   baseline_timing={"median_ms": 2.0, "samples_ms": [2.0, 2.1, 1.9]},
                   diagnosis={"bound": "memory", "roofline_fraction": 0.42, "achieved_gbps": 1000.0,
                              "kernels": [{"name": "k0", "launches": 1}], "notes": ["a note"]},
                   evidence={"library_share": {"library_calls": 2, "heavy_ops": 3}})
    else:
        rep["errors"] = "Traceback: boom </script><b>x</b>"
    return rep


NODES = [  # (id, parent, status, speedup)
    ("r1-1", "", "correct", 1.5),
    ("r1-2", "", "compile_error", 0.0),
    ("r2-1", "r1-1", "correct", 2.5),
    ("r2-2", "r1-1", "incorrect", 0.0),
    ("r3-1", "r2-1", "correct", 1.9),
]


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    for sub in ("candidates", "reports"):
        (run / sub).mkdir(parents=True)
    nodes = []
    for i, (cid, parent, status, sp) in enumerate(NODES):
        (run / "candidates" / f"{cid}.py").write_text(SRC.format(b=64 * (i + 1)))
        (run / "reports" / f"{cid}.json").write_text(json.dumps(_report(cid, status, sp)))
        nodes.append({"node_id": cid, "parent_id": parent, "transformation": {"name": "BLOCK", "params": {"v": "2"}},
                      "status": f"EVALUATION_STATUS_{status.upper()}", "fitness": sp, "evaluated": True,
                      "reason": f"reason of {cid}", "depth": parent.count("-")})
    (run / "lineage.json").write_text(json.dumps({"session_id": "s1", "spec": "toy", "nodes": nodes}))
    (run / "summary.json").write_text(json.dumps({"session_id": "s1", "spec": "toy", "budget": 5,
                                                  "status": "SESSION_STATUS_COMPLETED",
                                                  "best_candidate_id": "r2-1", "best_speedup": 2.5}))
    (run / "spec.py").write_text("class Model: pass\n")
    return run


def test_report_draws_every_candidate_curves_and_panels(run_dir: Path) -> None:
    html = render_html(load_run_folder(run_dir))
    assert len(re.findall(r'<g class="node[ "]', html)) == len(NODES)
    assert html.count('class="node best"') == 1 and 'data-cid="r2-1" data-status="correct"' in html
    assert 'id="curve-candidates"' in html and '<polyline class="curve"' in html
    assert 'id="curve-time"' in html  # the files' times give the time axis
    assert html.count("<section class='cand'") == len(NODES)
    assert "Interpreter timings." in html and "say nothing about GPU speed" in html
    assert "class=\"diff\"" in html or "table class=\"diff\"" in html  # difflib table against the parent
    assert "42.0% of the memory limit" in html
    # which candidates left convolutions / matmuls to the library (the evaluator's evidence)
    assert html.count("<th>library calls (conv / matmul)</th><td>2 of 3 heavy ops</td>") == 3
    assert "<span>best's library calls</span><b>2 of 3 heavy ops</b>" in html
    assert "<b>x</b>" not in html and "&lt;/script&gt;" in html  # candidate text is escaped
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")  # nothing fetched
    assert "<script src" not in html and "<link" not in html


def test_gpu_session_has_no_interpreter_note(run_dir: Path) -> None:
    for p in (run_dir / "reports").glob("*.json"):
        rep = json.loads(p.read_text())
        rep["interpreted"] = False
        p.write_text(json.dumps(rep))
    assert "Interpreter timings." not in render_html(load_run_folder(run_dir))


def test_failed_session_says_why(run_dir: Path) -> None:
    summary = json.loads((run_dir / "summary.json").read_text())
    summary.update(status="SESSION_STATUS_FAILED", error="synthesizer: InvalidSpecError: <bad>")
    (run_dir / "summary.json").write_text(json.dumps(summary))
    html = render_html(load_run_folder(run_dir))
    assert "The session failed:</b> synthesizer: InvalidSpecError: &lt;bad&gt;" in html


def test_write_report_into_run_folder(run_dir: Path) -> None:
    path = write_report(run_dir)
    assert path == run_dir / "report.html" and path.read_text().startswith("<!DOCTYPE html>")


def test_not_a_run_folder(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_run_folder(tmp_path)


async def test_store_loader_draws_the_same_report(run_dir: Path) -> None:
    store = MemoryStore()
    for p in run_dir.rglob("*"):
        if p.is_file():
            await store.put("sessions/s1/" + p.relative_to(run_dir).as_posix(), p.read_bytes())

    async def get(key: str) -> bytes | None:
        return await store.get(key) if await store.exists(key) else None

    run = await load_from_store(get, "sessions/s1/", "s1")
    folder = load_run_folder(run_dir)
    assert [n["node_id"] for n in run.nodes] == [n["node_id"] for n in folder.nodes]
    assert run.sources == folder.sources and run.reports == folder.reports and run.best_id == "r2-1"
    assert len(re.findall(r'<g class="node[ "]', render_html(run))) == len(NODES)


def test_config_show_masks_secrets() -> None:
    settings = load_settings(env={"KE_STORE_SECRET_KEY": "s3cr3t", "KE_STORE_ACCESS_KEY": "AKIA",
                                  "KE_KNOWLEDGE_API_KEY": "qk", "KE_BUS_URL": "nats://user:pw@host:4222"})
    doc = masked(settings)
    text = json.dumps(doc)
    assert "s3cr3t" not in text and "AKIA" not in text and "qk" not in text and ":pw@" not in text
    assert doc["store"]["secret_key"] == "****" and doc["bus"]["url"] == "nats://user:****@host:4222"
    assert doc["search"]["default_budget"] == 8  # everything else as is


def test_export_refuses_bad_input(run_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="does not exist"):
        export_run(tmp_path / "nope")
    with pytest.raises(InvalidArgumentError, match="--as"):
        export_run(run_dir, "wheel")
    with pytest.raises(InvalidArgumentError, match="namespace::op"):
        export_run(run_dir, "torch-library", name="no-colons")
    summary = json.loads((run_dir / "summary.json").read_text())
    summary["best_candidate_id"] = ""
    (run_dir / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(NotFoundError, match="no correct kernel"):
        export_run(run_dir)


def test_kernelevolve_import_is_light() -> None:
    import subprocess
    import sys

    code = ("import sys, kernelevolve; assert callable(kernelevolve.__getattr__); "
            "print(sorted(m for m in sys.modules if m.startswith('ke_')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
