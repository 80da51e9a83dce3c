"""In-memory cosine index: the test double of the vector-index port."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from kernelevolve.errors import ConfigError, InvalidArgumentError, NotFoundError
from kernelevolve.vector.port import Hit, Point


def _matches(payload: dict[str, Any], filters: dict[str, str]) -> bool:
    for key, want in filters.items():
        have = payload.get(key)
        if isinstance(have, list | tuple):
            if want not in have:
                return False
        elif have != want:
            return False
    return True


def _unit(vector: Sequence[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm > 0 else [0.0 for _ in vector]


class MemoryIndex:
    def __init__(self) -> None:
        self._dims: dict[str, int] = {}
        self._points: dict[str, dict[str, tuple[list[float], dict[str, Any]]]] = {}

    def _collection(self, name: str) -> dict[str, tuple[list[float], dict[str, Any]]]:
        try:
            return self._points[name]
        except KeyError:
            raise NotFoundError(f"collection {name!r} does not exist") from None

    async def ensure_collection(self, name: str, dim: int) -> None:
        if name in self._dims:
            if self._dims[name] != dim:
                raise ConfigError(f"collection {name!r} has dimension {self._dims[name]}, not {dim}")
            return
        self._dims[name] = dim
        self._points[name] = {}

    async def upsert(self, collection: str, points: list[Point]) -> None:
        stored = self._collection(collection)
        dim = self._dims[collection]
        for p in points:
            if len(p.vector) != dim:
                raise InvalidArgumentError(f"point {p.id!r} has {len(p.vector)} dims, expected {dim}")
        for p in points:
            stored[p.id] = (_unit(p.vector), dict(p.payload))

    async def search(
        self,
        collection: str,
        vector: Sequence[float],
        limit: int,
        filters: dict[str, str] | None = None,
    ) -> list[Hit]:
        stored = self._collection(collection)
        if len(vector) != self._dims[collection]:
            raise InvalidArgumentError(f"query has {len(vector)} dims, expected {self._dims[collection]}")
        query = _unit(vector)
        hits = [
            Hit(pid, sum(a * b for a, b in zip(query, vec, strict=True)), dict(payload))
            for pid, (vec, payload) in stored.items()
            if not filters or _matches(payload, filters)
        ]
        hits.sort(key=lambda h: (-h.score, h.id))
        return hits[: max(limit, 0)]

    async def count(self, collection: str) -> int:
        return len(self._collection(collection))

    async def close(self) -> None:
        return None
