"""The README's Python API example, run as written on a tiny spec: the documented calls
keep working through the installed engine (the CLI's embedded stack, on the CPU)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.e2e

TINY = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) * 2.0


def get_inputs():
    return [torch.randn(8, 33)]


def get_init_inputs():
    return []
'''


def readme_api_example() -> str:
    """The first Python block of the README's "Python API" section."""
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("### Python API\n"):]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "the Python API section has a python example"
    return match.group(1)


def test_the_readme_python_api_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    example = readme_api_example()
    # the example's spec and budget, made small; everything else runs as written
    for documented in ('"examples/ops/softmax_rows.py"', "budget=8"):
        assert example.count(documented) >= 1, f"the README example no longer says {documented}"
    spec = tmp_path / "relu_double.py"
    spec.write_text(TINY)
    code = example.replace('"examples/ops/softmax_rows.py"', repr(str(spec))).replace("budget=8", "budget=2")
    monkeypatch.chdir(tmp_path)  # runs/, softmax_kernel.py and the export land here
    monkeypatch.setenv("KE_KNOWLEDGE_EMBEDDER", "hash")  # no 90 MB model in this test
    monkeypatch.setenv("KE_EVALUATOR_CORRECTNESS_TRIALS", "2")
    scope: dict[str, object] = {}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "README.md", "exec"), scope)  # noqa: S102 - the project's own README
    result, verdict = scope["result"], scope["verdict"]
    assert result.ok and result.interpreted and result.device == "cpu"  # type: ignore[attr-defined]
    assert (tmp_path / "softmax_kernel.py").read_text() == result.best_source  # type: ignore[attr-defined]
    assert (result.run_dir / "export" / "torch_library" / "op.py").is_file()  # type: ignore[attr-defined]
    assert verdict.status == "correct"  # type: ignore[attr-defined]
    assert printed.getvalue().splitlines()[0].startswith("correct ")
