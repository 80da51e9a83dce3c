"""Where the evaluator tests find specs and candidate sources."""

from __future__ import annotations

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
