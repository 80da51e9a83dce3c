"""Build the configured vector index and embedder (composition roots only)."""

from __future__ import annotations

from kernelevolve.config import KnowledgeSettings
from kernelevolve.errors import ConfigError
from kernelevolve.vector.embedders import HashEmbedder, MiniLMEmbedder
from kernelevolve.vector.port import Embedder, VectorIndex
from kernelevolve.vector.qdrant import QdrantIndex


def index_from_settings(settings: KnowledgeSettings) -> VectorIndex:
    """A Qdrant server when ``url`` is set, else Qdrant local mode in ``path``."""
    if settings.url:
        return QdrantIndex(url=settings.url, api_key=settings.api_key or None)
    if settings.path:
        return QdrantIndex(path=settings.path)
    raise ConfigError("knowledge.path (Qdrant local folder) or knowledge.url (Qdrant server) must be set")


def embedder_from_settings(settings: KnowledgeSettings) -> Embedder:
    kind = settings.embedder.strip().lower()
    if kind == "minilm":
        return MiniLMEmbedder()
    if kind == "hash":
        return HashEmbedder()
    raise ConfigError(f"unknown knowledge.embedder {settings.embedder!r} (expected 'minilm' or 'hash')")
