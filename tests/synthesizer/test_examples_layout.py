"""examples/ops specs follow the spec conventions: a one-line docstring, only imports,
Model, get_inputs, get_init_inputs, get_extra_inputs and constants at module level, and
extra inputs of the same ranks as the main inputs."""

from __future__ import annotations

import ast
import runpy

import pytest
import torch

from .conftest import EXAMPLES, EXAMPLES_DIR

# get_gpu_inputs: sizes the benchmarks time on a GPU (bench/common.py), where batch scaling does not fit
ALLOWED_FUNCTIONS = {"get_inputs", "get_init_inputs", "get_extra_inputs", "get_gpu_inputs"}


def test_there_are_enough_examples() -> None:
    assert len(EXAMPLES) >= 60


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_module_layout(name: str) -> None:
    tree = ast.parse((EXAMPLES_DIR / f"{name}.py").read_text())
    doc = ast.get_docstring(tree)
    assert doc and "\n" not in doc.strip(), "needs a one-line docstring"
    for stmt in tree.body[1:]:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(stmt, ast.ClassDef):
            assert stmt.name == "Model"
        elif isinstance(stmt, ast.FunctionDef):
            assert stmt.name in ALLOWED_FUNCTIONS
        else:
            assert isinstance(stmt, (ast.Assign, ast.AnnAssign)), ast.dump(stmt)[:80]
            names = [t.id for t in ast.walk(stmt) if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store)]
            assert names and all(n.isupper() for n in names), names  # constants only


@pytest.mark.parametrize("name", EXAMPLES)
def test_extra_inputs_keep_ranks(name: str) -> None:
    ns = runpy.run_path(str(EXAMPLES_DIR / f"{name}.py"))
    if "get_extra_inputs" not in ns:
        pytest.skip("no extra shapes for this op")
    torch.manual_seed(0)
    main = ns["get_inputs"]()
    for extra in ns["get_extra_inputs"]():
        assert len(extra) == len(main)
        for a, b in zip(main, extra, strict=True):
            assert a.dim() == b.dim() and a.dtype == b.dtype
        # another shape than the main inputs (an odd size somewhere)
        assert any(a.shape != b.shape for a, b in zip(main, extra, strict=True))
