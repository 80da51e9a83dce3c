"""`python -m ke_synthesizer` / `kernelevolve-synthesizer`: run the synthesizer service on its own."""

from __future__ import annotations

from kernelevolve.runtime import serve
from ke_synthesizer.app import start


def main() -> None:
    serve("synthesizer", start)


if __name__ == "__main__":
    main()
