"""Generated code in libs/kernelevolve/v1 must match protos/: regenerate and compare."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO_ROOT


def test_the_generator_is_installed() -> None:
    import grpc_tools  # noqa: F401 - the dev extra's grpcio-tools: a missing one fails, never skips


def test_generated_code_is_fresh(tmp_path: Path) -> None:
    subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "gen_protos.py"), "--out", str(tmp_path)],
                   check=True, capture_output=True)
    committed = REPO_ROOT / "libs" / "kernelevolve" / "v1"
    fresh = tmp_path / "kernelevolve" / "v1"
    names = sorted(p.name for p in fresh.iterdir() if p.is_file())
    assert names == sorted(p.name for p in committed.iterdir() if p.is_file() and p.suffix in (".py", ".pyi"))
    stale = [n for n in names if (fresh / n).read_bytes() != (committed / n).read_bytes()]
    assert not stale, f"stale generated code {stale}: run python scripts/gen_protos.py"
