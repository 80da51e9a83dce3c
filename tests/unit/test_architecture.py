"""The import structure stays as the README draws it: no import cycle inside the project's
packages, no service package importing another service's package, the shared library
importing no service, and the CLI (the composition root of the embedded stack) reaching
services only through their composition roots (``ke_<service>.app``) and public judge.
Inside the offline synthesizer, its layers import one way only (its README's *Layers*).

Every import counts, also one written inside a function or under ``if TYPE_CHECKING``:
such an import hides a cycle from the interpreter, not from a reader.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

ROOTS = [REPO_ROOT / "libs", REPO_ROOT / "cli", *sorted((REPO_ROOT / "services").glob("*"))]
SERVICES = {"ke_gateway", "ke_search", "ke_synthesizer", "ke_evaluator", "ke_knowledge"}
# What the composition root may reach in a service: its app and the judge (``eval``).
CLI_MAY_IMPORT = {f"{s}.app" for s in SERVICES} | {"ke_evaluator.judge"}


def _modules() -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for root in ROOTS:
        for path in root.rglob("*.py"):
            rel = path.relative_to(root).with_suffix("")
            if rel.parts[0] in {"tests", "build"} or any(p.startswith(".") for p in rel.parts):
                continue
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            mods[".".join(parts)] = path
    return mods


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """Project modules ``name`` imports (the longest known prefix of each imported name)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            # ``from pkg import mod`` needs pkg.mod; ``from pkg import name`` needs pkg itself
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        for t in targets:
            while t and t not in MODULES:
                t = t.rpartition(".")[0]
            if t and t != name:
                found.add(t)
    return found


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _cycles(graph: dict[str, set[str]] = GRAPH) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, set()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _top(module: str) -> str:
    return module.split(".")[0]


def test_nothing_in_the_library_imports_the_package_that_holds_the_facade() -> None:
    assert not sorted(m for m, targets in GRAPH.items() if "kernelevolve" in targets)


def test_the_graph_sees_every_package() -> None:
    assert {"kernelevolve", "ke_cli"} | SERVICES <= {_top(m) for m in MODULES}
    assert GRAPH["ke_search.service"], "imports are found"


def test_no_import_cycles() -> None:
    cycles = _cycles()
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_a_service_imports_no_other_service(service: str) -> None:
    bad = sorted(f"{m} -> {t}" for m, targets in GRAPH.items() if _top(m) == service
                 for t in targets if _top(t) in SERVICES and _top(t) != service)
    assert not bad, "services depend on kernelevolve.ports, never on each other's packages:\n" + "\n".join(bad)


def test_the_shared_library_imports_no_service() -> None:
    bad = sorted(f"{m} -> {t}" for m, targets in GRAPH.items() if _top(m) == "kernelevolve"
                 for t in targets if _top(t) in SERVICES | {"ke_cli"})
    assert not bad, "\n".join(bad)


def test_the_cli_reaches_services_only_through_their_composition_roots() -> None:
    bad = sorted(f"{m} -> {t}" for m, targets in GRAPH.items() if _top(m) == "ke_cli"
                 for t in targets if _top(t) in SERVICES and t not in CLI_MAY_IMPORT and t not in SERVICES)
    assert not bad, "\n".join(bad)


# What the Python API (``kernelevolve.api``) is built on: the ports, and the library's
# settings, errors, spec loading and logging set-up; its engine is found by entry point.
# kernelevolve.precision: the contract's names and record (no torch, no service), which the
# API validates like the config.
API_MAY_IMPORT = {"kernelevolve.config", "kernelevolve.errors", "kernelevolve.spec", "kernelevolve.logging",
                  "kernelevolve.precision"}


def _imported_by_name(path: Path) -> set[str]:
    """Modules named as strings to ``importlib.import_module`` / ``__import__``: an import
    the graph above cannot see."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in {"import_module", "__import__"} and isinstance(node.args[0].value, str):
                found.add(node.args[0].value)
    return found


def test_the_library_never_imports_the_cli() -> None:
    """The CLI is one client of the library's API, not a part of it: ``kernelevolve.optimize``
    reaches the CLI's engine through an entry point, never through an import."""
    bad = sorted(f"{m} -> {t}" for m, targets in GRAPH.items() if _top(m) == "kernelevolve"
                 for t in targets | _imported_by_name(MODULES[m]) if _top(t) == "ke_cli")
    assert not bad, "\n".join(bad)


def test_the_python_api_depends_on_ports_only() -> None:
    bad = sorted(t for t in GRAPH["kernelevolve.api"]
                 if not t.startswith("kernelevolve.ports.") and t not in API_MAY_IMPORT)
    assert not bad, "kernelevolve.api imports beyond the ports: " + ", ".join(bad)


# The offline synthesizer's layers, lowest first: a module imports only modules of its own
# layer or a lower one; a family folder (families/<kind>/) imports no other family, only
# the shared layers below it. The registry (families/__init__) and what spans families
# (families.library_impl) sit above the family folders; the pipeline at the package root
# (partitioner, transformation space, assembler, synthesizer) above everything.
OFFLINE = "ke_synthesizer.offline"
LAYERS = ("frontend", "plan", "emit", "families.family", "families.<kind>", "families", "pipeline")


def offline_layer(module: str, package: str = OFFLINE) -> tuple[int, str]:
    """(rank in ``LAYERS``, the family kind for modules of a family folder, else "")."""
    rest = module.removeprefix(package).lstrip(".").split(".")
    if rest[0] in ("frontend", "plan", "emit"):
        return LAYERS.index(rest[0]), ""
    if rest[0] == "families":
        if len(rest) > 1 and rest[1] == "family":
            return LAYERS.index("families.family"), ""
        if len(rest) > 2:  # families.<kind>.<module>
            return LAYERS.index("families.<kind>"), rest[1]
        return LAYERS.index("families"), ""  # the registry, library_impl, a kind's __init__ is below
    return LAYERS.index("pipeline"), ""


def layer_violations(graph: dict[str, set[str]], package: str = OFFLINE) -> list[str]:
    """Imports inside ``package`` that point up a layer or from one family into another."""
    bad: list[str] = []
    for m, targets in sorted(graph.items()):
        if not m.startswith(package + "."):
            continue
        (rank, kind) = offline_layer(m, package)
        for t in sorted(targets):
            if not t.startswith(package + ".") or t == package:
                continue
            (t_rank, t_kind) = offline_layer(t, package)
            if t_rank > rank or (rank == t_rank and kind != t_kind):
                bad.append(f"{m} ({LAYERS[rank]}) -> {t} ({LAYERS[t_rank]})")
    return bad


def test_the_offline_synthesizer_layers_import_one_way() -> None:
    assert any(offline_layer(m)[1] == "row" for m in GRAPH if m.startswith(OFFLINE)), "family folders are seen"
    bad = layer_violations(GRAPH)
    assert not bad, "offline synthesizer layers (README.md: Layers):\n" + "\n".join(bad)


def test_no_import_cycles_inside_the_offline_synthesizer() -> None:
    offline = {m: {t for t in ts if t.startswith(OFFLINE)} for m, ts in GRAPH.items() if m.startswith(OFFLINE)}
    assert len(offline) > 40
    assert not _cycles(offline)


def test_the_layer_check_fails_on_violations() -> None:
    p = "pkg"
    graph = {
        "pkg.frontend.capture": {"pkg.plan.plan"},  # up a layer
        "pkg.plan.plan": {"pkg.frontend.ops", "pkg.emit.operands"},  # down (fine), up (bad)
        "pkg.emit.operands": {"pkg.families.family"},  # emit must not know families
        "pkg.families.row.kernel_row": {"pkg.families.row.row_body", "pkg.families.family", "pkg.emit.operands"},
        "pkg.families.conv.kernel_conv": {"pkg.families.pointwise.kernel_pointwise"},  # family -> family
        "pkg.families.family": {"pkg.emit.lower_pointwise", "pkg.families.row.kernel_row"},  # interface -> a kind
        "pkg.families": {"pkg.families.row.kernel_row", "pkg.families.family"},  # the registry: fine
        "pkg.graph": {"pkg.families", "pkg.frontend.ops"},  # the pipeline: fine
    }
    assert layer_violations(graph, p) == [
        "pkg.emit.operands (emit) -> pkg.families.family (families.family)",
        "pkg.families.conv.kernel_conv (families.<kind>) -> pkg.families.pointwise.kernel_pointwise (families.<kind>)",
        "pkg.families.family (families.family) -> pkg.families.row.kernel_row (families.<kind>)",
        "pkg.frontend.capture (frontend) -> pkg.plan.plan (plan)",
        "pkg.plan.plan (plan) -> pkg.emit.operands (emit)",
    ]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
