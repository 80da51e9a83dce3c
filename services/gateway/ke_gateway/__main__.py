"""`python -m ke_gateway` / `kernelevolve-gateway`: run the gateway service on its own."""

from __future__ import annotations

from kernelevolve.runtime import serve
from ke_gateway.app import start


def main() -> None:
    serve("gateway", start)


if __name__ == "__main__":
    main()
