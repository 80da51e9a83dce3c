"""The source a candidate needs to rebuild the reference's module: ``class ModelNew``
(the reference ``Model`` with its forward removed) and every top-level statement of the
spec that the class reaches, in the spec's order.

Specs are written in many styles: ``super(Model, self).__init__()``,
``super(self.__class__, self)``, ``nn.Module.__init__(self)``, no ``__init__`` at all,
``from torch import nn``, helper functions and constants at module level, helper methods
(``_make_layer``) and class attributes (``expansion = 1``) on the class, decorators,
annotations and defaults. Rather than patch each idiom, the candidate carries the class
itself under its new name, and the dependency closure of the names it uses:

- the ``Model`` class is copied whole (class attributes, helper methods, decorators,
  annotations) as ``ModelNew`` minus ``forward``, which the synthesizer generates;
- every reference to the name ``Model`` is renamed, so ``super(Model, self)`` and
  ``Model.attr`` resolve in the candidate, which has no ``Model`` (it must not: the
  evaluator rejects candidates that reach the reference class);
- ``super(self.__class__, self)`` and ``super(type(self), self)`` name their enclosing
  class instead: the evaluator's static policy refuses ``__class__`` in a candidate, and
  the explicit class is what the idiom means (it also ends the idiom's infinite recursion
  in subclasses);
- top-level imports, functions, classes and assignments are kept when the class needs
  them, directly or through another kept statement; ``get_inputs`` and friends, the
  ``__main__`` block and bare expressions never are.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass

from kernelevolve import pyast
from kernelevolve.errors import InvalidSpecError

REFERENCE_CLASS = "Model"
CANDIDATE_CLASS = "ModelNew"
# Spec functions that describe inputs: the candidate never calls them.
_INPUT_FUNCTIONS = frozenset({"get_inputs", "get_init_inputs", "get_extra_inputs"})


@dataclass(frozen=True)
class ModelSource:
    """``prelude``: top-level statements the class needs, in spec order. ``class_source``:
    ``class ModelNew(...)`` with everything of ``Model`` but ``forward``; a generated
    forward is appended at one level of indentation."""

    prelude: tuple[str, ...]
    class_source: str


def model_source(source: str, keep_forward: bool = False) -> ModelSource:
    """Raises InvalidSpecError when the spec has no top-level ``class Model``. With
    ``keep_forward`` the class keeps the reference forward (the library-call candidate of
    a forward no tracer captures, see capture.py)."""
    tree = pyast.parse(source)
    model = next((s for s in tree.body if isinstance(s, ast.ClassDef) and s.name == REFERENCE_CLASS), None)
    if model is None:
        raise InvalidSpecError(
            f"spec defines no top-level 'class {REFERENCE_CLASS}' (an alias or an imported Model cannot be "
            "rebuilt in a standalone candidate)")
    cls = copy.deepcopy(model)
    cls.name = CANDIDATE_CLASS
    if not keep_forward:
        cls.body = [s for s in cls.body if _defined_names(s) != {"forward"}] or [ast.Pass()]
    kept = _closure(tree, cls)
    rewritten = [_rewrite(copy.deepcopy(s)) for s in kept]
    return ModelSource(prelude=tuple(ast.unparse(s) for s in rewritten), class_source=ast.unparse(_rewrite(cls)))


def _closure(tree: ast.Module, cls: ast.ClassDef) -> list[ast.stmt]:
    """Top-level statements defining a name the class uses, transitively, in spec order."""
    candidates = [s for s in tree.body if _keepable(s)]
    defines = {id(s): _defined_names(s) for s in candidates}
    needed = _used_names(cls)
    kept: set[int] = set()
    changed = True
    while changed:
        changed = False
        for s in candidates:
            if id(s) not in kept and defines[id(s)] & needed:
                kept.add(id(s))
                needed |= _used_names(s)
                changed = True
    return [s for s in candidates if id(s) in kept]


def _keepable(stmt: ast.stmt) -> bool:
    if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign, ast.AugAssign)):
        return True
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return stmt.name not in _INPUT_FUNCTIONS
    if isinstance(stmt, ast.ClassDef):
        return stmt.name != REFERENCE_CLASS
    return False  # expressions, the __main__ block, control flow at module level


def _defined_names(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, ast.Import):
        return {(a.asname or a.name).split(".")[0] for a in stmt.names}
    if isinstance(stmt, ast.ImportFrom):
        return {a.asname or a.name for a in stmt.names}
    targets: list[ast.expr] = []
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
        targets = [stmt.target]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _used_names(node: ast.AST) -> set[str]:
    """Every name read anywhere inside ``node`` (over-inclusion only keeps more spec lines)."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _rewrite(node: ast.AST) -> ast.AST:
    """Rename ``Model`` and give self-referential ``super`` calls their class (see module doc)."""
    # innermost classes first: a nested class's super() names the nested class
    for cls in reversed([n for n in ast.walk(node) if isinstance(n, ast.ClassDef)]):
        name = CANDIDATE_CLASS if cls.name == REFERENCE_CLASS else cls.name
        for call in ast.walk(cls):
            if (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "super"
                    and len(call.args) == 2 and _is_type_of_self(call.args[0], call.args[1])):
                call.args[0] = ast.Name(id=name, ctx=ast.Load())
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and n.id == REFERENCE_CLASS:
            n.id = CANDIDATE_CLASS
    return ast.fix_missing_locations(node)


def _is_type_of_self(first: ast.expr, second: ast.expr) -> bool:
    """``self.__class__`` or ``type(self)``, where ``self`` is super's second argument."""
    if not isinstance(second, ast.Name):
        return False
    if isinstance(first, ast.Attribute) and first.attr == "__class__":
        return isinstance(first.value, ast.Name) and first.value.id == second.id
    return (isinstance(first, ast.Call) and isinstance(first.func, ast.Name) and first.func.id == "type"
            and len(first.args) == 1 and isinstance(first.args[0], ast.Name) and first.args[0].id == second.id)
