"""examples/styles: specs written the many ways people write PyTorch (``super(Model, self)``,
no ``__init__``, helper classes and functions, other aliases, decorators, buffers, integer
and boolean inputs, ...). Each one is a valid reference, and the seed candidate of each
matches it, passes the static policy and is judged ``correct`` by the evaluator's full
protocol (interpreter on CPU), launching its own kernels."""

from __future__ import annotations

import ast
import runpy
from typing import Any

import pytest
import torch

from ke_evaluator.judge import Judge

from .conftest import STYLES, STYLES_DIR

REQUIRED = ("Model", "get_inputs", "get_init_inputs")


def test_there_are_enough_style_specs() -> None:
    assert len(STYLES) >= 30


@pytest.mark.parametrize("name", STYLES)
def test_style_spec_layout(name: str) -> None:
    tree = ast.parse((STYLES_DIR / f"{name}.py").read_text())
    doc = ast.get_docstring(tree)
    assert doc and "\n" not in doc.strip(), "needs a one-line docstring"
    defined = {s.name for s in tree.body if isinstance(s, (ast.ClassDef, ast.FunctionDef))}
    assert set(REQUIRED) <= defined, set(REQUIRED) - defined


@pytest.mark.parametrize("name", STYLES)
def test_style_reference_runs(name: str) -> None:
    ns = runpy.run_path(str(STYLES_DIR / f"{name}.py"))
    torch.manual_seed(0)
    model = ns["Model"](*ns["get_init_inputs"]())
    main = ns["get_inputs"]()
    with torch.no_grad():
        out = model(*main)
    assert isinstance(out, torch.Tensor) and torch.isfinite(out).all()
    for extra in ns.get("get_extra_inputs", lambda: [])():
        assert len(extra) == len(main)
        for a, b in zip(main, extra, strict=True):
            assert a.dim() == b.dim() and a.dtype == b.dtype
        # another shape than the main inputs (an odd size somewhere)
        assert any(a.shape != b.shape for a, b in zip(main, extra, strict=True))
        with torch.no_grad():
            assert torch.isfinite(model(*extra)).all()


@pytest.mark.parametrize("name", STYLES)
def test_style_seed_candidate_is_correct(name: str, style_seed_results: dict[str, dict[str, Any]]) -> None:
    result = style_seed_results[name]
    assert result["error"] == "", result["error"]
    assert len([t for t in result["trials"] if t["kind"] == "seed"]) == 2
    bad = [t for t in result["trials"] if not t["ok"]]
    assert result["ok"] and not bad, bad


@pytest.mark.parametrize("name", STYLES)
def test_style_seed_candidate_passes_static_policy(name: str,
                                                   style_seed_results: dict[str, dict[str, Any]]) -> None:
    proposal = style_seed_results[name]["proposal"]
    assert proposal is not None, style_seed_results[name]["error"]
    static_checks = pytest.importorskip("ke_evaluator.static_checks")
    report = static_checks.check_candidate(proposal.source)
    assert report.ok, report.reason
    assert "class ModelNew(" in proposal.source  # its base is spelled as the spec spells nn.Module


@pytest.mark.parametrize("name", STYLES)
def test_style_seed_candidate_is_judged_correct(name: str, judge: Judge,
                                                style_seed_results: dict[str, dict[str, Any]]) -> None:
    proposal = style_seed_results[name]["proposal"]
    assert proposal is not None, style_seed_results[name]["error"]
    source = (STYLES_DIR / f"{name}.py").read_text()
    verdict = judge.evaluate(source, proposal.source, name)
    assert verdict.status == "correct", f"{verdict.status}: {verdict.reason}"
    assert verdict.evidence["kernel_launches"], "the candidate launched none of its own kernels"
