"""KernelEvolve shared library: what every service shares.

Generated protobuf/gRPC code (``kernelevolve.v1``), typed configuration, the error
hierarchy, logging set-up, the ports (bus, object store, vector index, embedder) with
their real adapters and test doubles, operator-spec loading, and the session report.

Nothing here connects to anything at import time: adapters are built by each
service's composition root (``build(settings, **overrides)``).

The Python API (``kernelevolve.api``) is re-exported lazily, so that importing
``kernelevolve`` stays light; its sessions and judge come from the installed engine
(the CLI package's), which the library never imports::

    import kernelevolve
    result = kernelevolve.optimize("examples/ops/softmax_rows.py", budget=8)
    verdict = kernelevolve.evaluate("examples/ops/softmax_rows.py", "my_kernel.py")
"""

from typing import Any

__all__ = ["OptimizeResult", "__version__", "evaluate", "optimize"]
__version__ = "0.1.0"

_API = ("optimize", "evaluate", "OptimizeResult")


def __getattr__(name: str) -> Any:
    if name in _API:
        from kernelevolve import api

        return getattr(api, name)
    raise AttributeError(f"module 'kernelevolve' has no attribute {name!r}")
