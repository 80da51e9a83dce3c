"""`python -m ke_search` / `kernelevolve-search`: run the search service on its own."""

from __future__ import annotations

from ke_search.app import start
from kernelevolve.runtime import serve


def main() -> None:
    serve("search", start)


if __name__ == "__main__":
    main()
