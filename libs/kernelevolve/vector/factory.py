"""Build the configured vector index and embedder (composition roots only)."""

from __future__ import annotations

from kernelevolve.config import KnowledgeSettings
from kernelevolve.errors import ConfigError
from kernelevolve.vector.embedders import HashEmbedder, MiniLMEmbedder
from kernelevolve.vector.port import Embedder, VectorIndex


def index_from_settings(settings: KnowledgeSettings, *, shared: bool = False,
                        lock_timeout_s: float = 30.0) -> VectorIndex:
    """A Qdrant server when ``url`` is set, else Qdrant local mode in ``path`` (opened per
    operation when ``shared``: several processes use the folder)."""
    from kernelevolve.vector.qdrant import QdrantIndex  # qdrant-client only where an index is opened

    if settings.url:
        return QdrantIndex(url=settings.url, api_key=settings.api_key or None)
    if settings.path:
        return QdrantIndex(path=settings.path, shared=shared, lock_timeout_s=lock_timeout_s)
    raise ConfigError("knowledge.path (Qdrant local folder) or knowledge.url (Qdrant server) must be set")


def embedder_from_settings(settings: KnowledgeSettings) -> Embedder:
    kind = settings.embedder.strip().lower()
    if kind == "minilm":
        return MiniLMEmbedder()
    if kind == "hash":
        return HashEmbedder()
    raise ConfigError(f"unknown knowledge.embedder {settings.embedder!r} (expected 'minilm' or 'hash')")
