"""Operator specs: KernelBench-style modules (``Model``, ``get_inputs``, ``get_init_inputs``).

Static checks only (parsing, required names). Running the reference happens in the
evaluator's sandbox (``ValidateSpec``), never in the process that calls this.
"""

from __future__ import annotations

import ast
import hashlib
import re
from pathlib import Path

from kernelevolve import pyast
from kernelevolve.errors import InvalidSpecError
from kernelevolve.v1 import common_pb2 as pb

REQUIRED = ("Model", "get_inputs", "get_init_inputs")
MAX_SPEC_BYTES = 1_000_000


def spec_name_from_path(path: Path) -> str:
    name = re.sub(r"[^A-Za-z0-9_-]", "_", path.stem)
    return name or "operator"


def check_source(source: str, name: str = "spec") -> None:
    """Raise InvalidSpecError naming the problem when the source cannot be a spec."""
    if len(source.encode()) > MAX_SPEC_BYTES:
        raise InvalidSpecError(f"{name}: spec is larger than {MAX_SPEC_BYTES} bytes")
    try:
        tree = pyast.parse(source, filename=name)
    except SyntaxError as exc:
        raise InvalidSpecError(f"{name}: spec does not parse: {exc.msg} (line {exc.lineno})") from exc
    defined: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            defined[node.name] = "class"
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defined[node.name] = "function"
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    defined.setdefault(t.id, "assignment")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                defined.setdefault((alias.asname or alias.name).split(".")[0], "import")
    missing = [n for n in REQUIRED if n not in defined]
    if missing:
        raise InvalidSpecError(f"{name}: spec lacks {', '.join(missing)} (a spec defines class Model, "
                               "get_inputs() and get_init_inputs())")
    if defined["Model"] != "class":
        raise InvalidSpecError(f"{name}: Model must be a class (an nn.Module), found a {defined['Model']}")
    for fn in ("get_inputs", "get_init_inputs"):
        if defined[fn] not in ("function", "assignment", "import"):
            raise InvalidSpecError(f"{name}: {fn} must be a function, found a {defined[fn]}")


def hanging_import(seconds: float) -> str:
    """The one line for a spec whose import (its module-level code) did not return within
    ``seconds`` (``evaluator.spec_import_timeout_s``): said alike by the evaluator's
    validation and the CPU sizing probe, whichever imports it first."""
    return (f"the spec's import did not return within {seconds:g} s (evaluator.spec_import_timeout_s; a spec "
            "imports in milliseconds): its module-level code hangs")


def load_spec_file(path: str | Path) -> pb.OperatorSpec:
    p = Path(path)
    if not p.is_file():
        raise InvalidSpecError(f"spec file {p} does not exist")
    try:
        source = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidSpecError(f"spec file {p} cannot be read: {exc}") from exc
    name = spec_name_from_path(p)
    check_source(source, p.name)
    return make_spec(name, source)


def make_spec(name: str, source: str) -> pb.OperatorSpec:
    return pb.OperatorSpec(name=name, source=source, sha256=hashlib.sha256(source.encode()).hexdigest())
