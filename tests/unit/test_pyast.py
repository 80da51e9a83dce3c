"""``kernelevolve.pyast``: parses from many threads at once agree with a serial parse, and
service code parses through it (CPython 3.11's AST conversion is not thread-safe: the
static policy failed with "AST constructor recursion depth mismatch" under load)."""

from __future__ import annotations

import ast
import re
import threading
from pathlib import Path

from kernelevolve import pyast

ROOT = Path(__file__).resolve().parents[2]
# nested enough that the conversion recurses deeply (the depth bookkeeping that races)
SOURCE = ("def f(x):\n" + "".join("    " * (i + 1) + f"if x > {i}:\n" for i in range(40))
          + "    " * 41 + "return [[(x, {x: x})]]\n")


def test_parses_from_many_threads_match_a_serial_parse() -> None:
    expected = ast.dump(ast.parse(SOURCE))
    results: list[str] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(50):
                results.append(ast.dump(pyast.parse(SOURCE)))
        except BaseException as exc:  # noqa: BLE001 - a SystemError is what this test is about
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(results) == 400 and set(results) == {expected}


def test_service_code_parses_through_the_lock() -> None:
    """The worker's subprocess is single-threaded and imports torch-only modules: exempt."""
    bare = []
    for root in ("libs", "services", "cli"):
        for path in (ROOT / root).rglob("*.py"):
            if "/worker/" in path.as_posix() or path.name == "pyast.py":
                continue
            if re.search(r"\bast\.parse\(", path.read_text()):
                bare.append(path.relative_to(ROOT).as_posix())
    assert bare == []
