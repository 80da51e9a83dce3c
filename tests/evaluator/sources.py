"""Where the evaluator tests find specs and candidate sources."""

from __future__ import annotations

import importlib.util
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent.parent
CANDIDATES = HERE / "candidates"
TEST_SPECS = HERE / "specs"
EXAMPLES = REPO_ROOT / "examples" / "ops"

# Secrets planted in the parent environment: a worker must never see them.
PLANTED_SECRETS = {"OPENAI_API_KEY": "sk-planted-by-tests", "KE_TEST_SECRET_TOKEN": "planted"}


def candidate(name: str) -> str:
    # A source that does not parse is kept as .txt so that linters and compileall skip it.
    path = CANDIDATES / f"{name}.py"
    return (path if path.exists() else CANDIDATES / f"{name}.txt").read_text()


def example(name: str) -> str:
    return (EXAMPLES / f"{name}.py").read_text()


def spec_for_tests(name: str) -> str:
    return (TEST_SPECS / f"{name}.py").read_text()


def kernel_module(folder: Path, name: str, source: str) -> types.ModuleType:
    """``source`` (Triton kernels for a test) imported as module ``name`` from a file in
    ``folder``: Triton reads a kernel's source from its file."""
    path = folder / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
