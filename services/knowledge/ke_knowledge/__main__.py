"""`python -m ke_knowledge` / `kernelevolve-knowledge`: run the knowledge service on its own."""

from __future__ import annotations

from ke_knowledge.app import start
from kernelevolve.runtime import serve


def main() -> None:
    serve("knowledge", start)


if __name__ == "__main__":
    main()
