"""``ast.parse`` that threads may call at once.

CPython 3.11 (3.11.7 here) keeps the recursion depth of its AST-to-object conversion in
per-interpreter state without a lock; two threads parsing at once can fail with
``SystemError: AST constructor recursion depth mismatch`` (CPython gh-106905). The judge
checks candidates on several threads, and a session's services share one process in the
embedded default: the static policy failed that way on a loaded 2-core machine. Every
parse in the services' processes goes through one lock; a parse takes milliseconds.
"""

from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse(source, filename)``, one thread at a time."""
    with _LOCK:
        return ast.parse(source, filename=filename)
