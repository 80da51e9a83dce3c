"""The vector-index and embedder ports with their adapters.

Indexes: ``QdrantIndex`` (local folder or server) and ``MemoryIndex`` (test double).
Embedders: ``MiniLMEmbedder`` (all-MiniLM-L6-v2, offline) and ``HashEmbedder`` (no model).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kernelevolve.vector.embedders import HashEmbedder, MiniLMEmbedder
from kernelevolve.vector.factory import embedder_from_settings, index_from_settings
from kernelevolve.vector.memory import MemoryIndex
from kernelevolve.vector.port import Embedder, Hit, Point, VectorIndex

if TYPE_CHECKING:
    from kernelevolve.vector.qdrant import QdrantIndex

__all__ = [
    "Embedder",
    "HashEmbedder",
    "Hit",
    "MemoryIndex",
    "MiniLMEmbedder",
    "Point",
    "QdrantIndex",
    "VectorIndex",
    "embedder_from_settings",
    "index_from_settings",
]


def __getattr__(name: str) -> Any:
    # qdrant-client is imported on first use: the in-process stack (benchmarks on a GPU host
    # with torch, triton, numpy, protobuf, grpcio, pyyaml and structlog only) never opens Qdrant.
    if name == "QdrantIndex":
        from kernelevolve.vector.qdrant import QdrantIndex

        return QdrantIndex
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
