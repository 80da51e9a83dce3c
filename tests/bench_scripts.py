"""Loading a script of bench/ (a folder of scripts, not a package) as a module in a test."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from tests.conftest import REPO_ROOT


def load_bench_script(stem: str, module_name: str | None = None) -> ModuleType:
    """``bench/<stem>.py`` as a fresh module, registered in sys.modules under its name (its
    dataclasses resolve annotations through sys.modules)."""
    name = module_name or f"bench_{stem}"
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "bench" / f"{stem}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
