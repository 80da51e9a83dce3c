"""KernelEvolve shared library: what every service shares.

Generated protobuf/gRPC code (``kernelevolve.v1``), typed configuration, the error
hierarchy, logging set-up, the ports (bus, object store, vector index, embedder) with
their real adapters and test doubles, and operator-spec loading.

Nothing here connects to anything at import time: adapters are built by each
service's composition root (``build(settings, **overrides)``).
"""

__all__ = ["__version__"]
__version__ = "0.1.0"
