"""The vector-index and embedder ports.

Semantics (both index adapters pass tests/adapters/test_vector_contract.py):
- Scores are cosine similarities; ``search`` returns hits best first.
- Point ids are arbitrary strings; upserting an existing id replaces its vector and payload.
- ``filters`` are exact matches on payload fields, all of which must hold; a list-valued
  payload field matches when it contains the value (Qdrant's rule, mirrored in memory).
- ``search``/``count`` on a collection that does not exist raise NotFoundError.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class Point:
    id: str
    vector: Sequence[float]
    payload: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Hit:
    id: str
    score: float
    payload: dict[str, Any]


class Embedder(Protocol):
    """Turns texts into unit vectors of length ``dim``; blocking (call it via asyncio.to_thread)."""

    dim: int

    def embed(self, texts: list[str]) -> list[list[float]]: ...


class VectorIndex(Protocol):
    async def ensure_collection(self, name: str, dim: int) -> None:
        """Create the collection if missing; ConfigError if it exists with another dimension."""
        ...

    async def upsert(self, collection: str, points: list[Point]) -> None: ...

    async def search(
        self,
        collection: str,
        vector: Sequence[float],
        limit: int,
        filters: dict[str, str] | None = None,
    ) -> list[Hit]: ...

    async def count(self, collection: str) -> int: ...

    async def close(self) -> None: ...
