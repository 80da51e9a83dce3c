"""Every publish on the bus carries a message id (de-duplication): a handler that runs
again after a crash re-publishes the same logical event, which the stream then drops.
Checked on the source, so a new publish without one fails here."""

from __future__ import annotations

import ast

import pytest

from tests.conftest import REPO_ROOT

SOURCES = sorted(p for folder in ("services", "cli") for p in (REPO_ROOT / folder).rglob("*.py"))


def _publish_calls() -> list[tuple[str, int, ast.Call]]:
    calls = []
    for path in SOURCES:
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "publish"
                    and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "_bus"):
                calls.append((str(path.relative_to(REPO_ROOT)), node.lineno, node))
    return calls


def test_there_are_publishes_to_check() -> None:
    assert len(_publish_calls()) >= 10


@pytest.mark.parametrize(("path", "line", "call"), _publish_calls(), ids=lambda v: v if isinstance(v, str) else "")
def test_publish_carries_a_dedup_id(path: str, line: int, call: ast.Call) -> None:
    dedup = [kw for kw in call.keywords if kw.arg == "dedup_id"]
    assert dedup, f"{path}:{line} publishes without dedup_id"
    assert not (isinstance(dedup[0].value, ast.Constant) and dedup[0].value.value is None), f"{path}:{line}"
