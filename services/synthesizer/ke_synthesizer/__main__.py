"""`python -m ke_synthesizer` / `kernelevolve-synthesizer`: run the synthesizer service on its own."""

from __future__ import annotations

from ke_synthesizer.app import start
from kernelevolve.runtime import serve


def main() -> None:
    serve("synthesizer", start)


if __name__ == "__main__":
    main()
