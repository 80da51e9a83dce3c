"""Importing test source (Triton kernels, candidates) as a module from a file: Triton reads
a kernel's source from its file, so ``exec`` of a string will not do."""

from __future__ import annotations

import importlib.util
import types
from pathlib import Path


def import_source(folder: Path, name: str, source: str) -> types.ModuleType:
    """``source`` written to ``folder/name.py`` and imported as module ``name``."""
    path = folder / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
