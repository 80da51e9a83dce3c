"""`python -m ke_evaluator` / `kernelevolve-evaluator`: run the evaluator service on its own."""

from __future__ import annotations

from ke_evaluator.app import start
from kernelevolve.runtime import serve


def main() -> None:
    serve("evaluator", start)


if __name__ == "__main__":
    main()
