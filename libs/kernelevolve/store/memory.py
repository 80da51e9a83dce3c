"""In-memory object store: the test double of the object-store port."""

from __future__ import annotations

import asyncio

from kernelevolve.errors import NotFoundError
from kernelevolve.store.port import validate_key, validate_prefix


class MemoryStore:
    """Keeps objects in a dict; copies bytes in and out so callers cannot alias them."""

    def __init__(self) -> None:
        self._objects: dict[str, tuple[bytes, str]] = {}
        self._lock = asyncio.Lock()

    async def put(self, key: str, data: bytes, content_type: str = "application/octet-stream") -> None:
        validate_key(key)
        async with self._lock:
            self._objects[key] = (bytes(data), content_type)

    async def get(self, key: str) -> bytes:
        validate_key(key)
        try:
            return self._objects[key][0]
        except KeyError:
            raise NotFoundError(f"object {key!r} not found") from None

    async def exists(self, key: str) -> bool:
        validate_key(key)
        return key in self._objects

    async def list(self, prefix: str) -> list[str]:
        validate_prefix(prefix)
        return sorted(k for k in self._objects if k.startswith(prefix))

    async def delete(self, key: str) -> None:
        validate_key(key)
        async with self._lock:
            self._objects.pop(key, None)

    async def close(self) -> None:
        return None
