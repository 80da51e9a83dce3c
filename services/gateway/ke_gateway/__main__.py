"""`python -m ke_gateway` / `kernelevolve-gateway`: run the gateway service on its own."""

from __future__ import annotations

from ke_gateway.app import start
from kernelevolve.runtime import serve


def main() -> None:
    serve("gateway", start)


if __name__ == "__main__":
    main()
