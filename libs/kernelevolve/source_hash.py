"""A hash of a Python source that ignores what cannot change its behaviour: comments,
docstrings, blank lines and layout. Two candidates with the same hash are twins, and
only the first is worth an evaluation (the synthesizer marks the second a duplicate).

Sources that do not parse are hashed as text with whitespace collapsed, so a broken
candidate is still compared (and still judged once, as broken)."""

from __future__ import annotations

import ast
import hashlib

from kernelevolve import pyast


def _strip_docstrings(tree: ast.AST) -> None:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                # Keep the body non-empty: a function that is only a docstring still parses.
                node.body = body[1:] or [ast.Pass()]


def normalise_source(source: str) -> str:
    """The source as the interpreter sees it: ``ast.unparse`` drops comments and layout."""
    try:
        tree = pyast.parse(source)
    except SyntaxError:
        return " ".join(source.split())
    _strip_docstrings(tree)
    return ast.unparse(tree)


def source_hash(source: str) -> str:
    """sha256 (hex) of ``normalise_source(source)``."""
    return hashlib.sha256(normalise_source(source).encode()).hexdigest()
