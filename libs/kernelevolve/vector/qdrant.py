"""Vector index on Qdrant: local mode (a folder, no server) or a Qdrant server.

Qdrant accepts only unsigned integers or UUIDs as point ids, so a string id is mapped to
``uuid5(_NAMESPACE, id)`` (stable across processes) and kept in the payload under
``_ID_FIELD`` to be handed back in hits.

Local mode takes an exclusive lock on its folder: one process at a time. A folder
shared by several processes (the user-level knowledge base that every embedded
session reads and writes) is opened with ``shared=True``: the folder is then opened
for each operation and closed right after, and an operation that finds it locked by
another process waits (up to ``lock_timeout_s``, polling) rather than failing. Opening
a folder of a few hundred documents takes milliseconds, so per-operation opening costs
little next to embedding. Its async client computes in the event loop; that is fine for
a knowledge base of hundreds of documents.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from qdrant_client import AsyncQdrantClient, models
from qdrant_client.http.exceptions import ApiException, ResponseHandlingException, UnexpectedResponse

from kernelevolve.errors import (
    ConfigError,
    IndexUnavailable,
    InvalidArgumentError,
    KernelEvolveError,
    NotFoundError,
)
from kernelevolve.vector.port import Hit, Point

log = logging.getLogger(__name__)

T = TypeVar("T")

_NAMESPACE = uuid.UUID("5b0f6f3e-2f55-4c1e-9d7a-4b1e6f0c9a11")
_ID_FIELD = "_ke_id"


def point_uuid(point_id: str) -> str:
    """The Qdrant id that stands for our string id."""
    return str(uuid.uuid5(_NAMESPACE, point_id))


class QdrantIndex:
    def __init__(
        self,
        path: str | Path | None = None,
        url: str | None = None,
        api_key: str | None = None,
        *,
        timeout_s: int = 10,
        shared: bool = False,
        lock_timeout_s: float = 30.0,
    ) -> None:
        if bool(path) == bool(url):
            raise ConfigError("QdrantIndex needs exactly one of path (local mode) or url (server)")
        self._path = str(path) if path else None
        self._url = url or None
        self._api_key = api_key or None
        self._timeout_s = timeout_s
        self._shared = shared and bool(path)
        self._lock_timeout_s = lock_timeout_s
        self._client: AsyncQdrantClient | None = None
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        where = f"path={self._path!r}" if self._path else f"url={self._url!r}"
        return f"QdrantIndex({where})"

    async def start(self) -> None:
        """Open the local folder or the server connection (also done on first use)."""
        if not self._shared:
            await self._get_client()

    async def _open_shared(self) -> AsyncQdrantClient:
        """Open the shared folder, waiting while another process holds its lock."""
        assert self._path is not None
        Path(self._path).mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + self._lock_timeout_s
        delay = 0.02
        warned = False
        while True:
            try:
                return AsyncQdrantClient(path=self._path)
            except RuntimeError as exc:
                if time.monotonic() >= deadline:
                    raise IndexUnavailable(
                        f"knowledge folder {self._path} stayed locked by another process for "
                        f"{self._lock_timeout_s:.0f} s (a process that keeps it open, not a session "
                        f"sharing it): {exc}") from exc
                if not warned:
                    log.warning("knowledge folder busy, waiting", extra={"path": self._path})
                    warned = True
                await asyncio.sleep(delay)
                delay = min(delay * 2, 0.5)
            except OSError as exc:
                raise IndexUnavailable(f"cannot open Qdrant folder {self._path}: {exc}") from exc

    async def _get_client(self) -> AsyncQdrantClient:
        async with self._lock:
            if self._client is None:
                try:
                    if self._path:
                        Path(self._path).mkdir(parents=True, exist_ok=True)
                        self._client = AsyncQdrantClient(path=self._path)
                    else:
                        self._client = AsyncQdrantClient(
                            url=self._url, api_key=self._api_key, timeout=self._timeout_s
                        )
                except RuntimeError as exc:  # local folder locked by another process
                    raise IndexUnavailable(f"cannot open Qdrant folder {self._path}: {exc}") from exc
                except OSError as exc:
                    raise IndexUnavailable(f"cannot open Qdrant folder {self._path}: {exc}") from exc
            return self._client

    async def _call(self, what: str, fn: Callable[[AsyncQdrantClient], Awaitable[T]]) -> T:
        if not self._shared:
            return await self._run(what, fn, await self._get_client())
        async with self._lock:  # one open per operation, and one operation at a time here
            client = await self._open_shared()
            try:
                return await self._run(what, fn, client)
            finally:
                await client.close()

    async def _run(self, what: str, fn: Callable[[AsyncQdrantClient], Awaitable[T]], client: AsyncQdrantClient) -> T:
        try:
            return await fn(client)
        except KernelEvolveError:
            raise
        except UnexpectedResponse as exc:
            if exc.status_code == 404:
                raise NotFoundError(f"Qdrant {what}: not found") from exc
            if exc.status_code is not None and 400 <= exc.status_code < 500:
                raise InvalidArgumentError(f"Qdrant {what} rejected: {exc}") from exc
            raise IndexUnavailable(f"Qdrant {what} failed: {exc}") from exc
        except (ResponseHandlingException, ApiException, OSError) as exc:
            raise IndexUnavailable(f"Qdrant {what} unreachable: {exc}") from exc
        except ValueError as exc:  # local mode reports bad input and missing collections so
            if "not found" in str(exc).lower():
                raise NotFoundError(f"Qdrant {what}: {exc}") from exc
            raise InvalidArgumentError(f"Qdrant {what}: {exc}") from exc

    async def ensure_collection(self, name: str, dim: int) -> None:
        async def fn(client: AsyncQdrantClient) -> None:
            if await client.collection_exists(name):
                info = await client.get_collection(name)
                params = info.config.params.vectors
                size = params.size if isinstance(params, models.VectorParams) else None
                if size != dim:
                    raise ConfigError(f"collection {name!r} has vectors of size {size}, not {dim}")
                return
            await client.create_collection(
                name, vectors_config=models.VectorParams(size=dim, distance=models.Distance.COSINE)
            )
            log.info("created collection", extra={"collection": name, "dim": dim})

        await self._call(f"ensure_collection({name})", fn)

    async def upsert(self, collection: str, points: list[Point]) -> None:
        if not points:
            return
        structs = [
            models.PointStruct(
                id=point_uuid(p.id), vector=list(map(float, p.vector)), payload={**p.payload, _ID_FIELD: p.id}
            )
            for p in points
        ]

        async def fn(client: AsyncQdrantClient) -> None:
            await client.upsert(collection, points=structs, wait=True)

        await self._call(f"upsert({collection})", fn)

    async def search(
        self,
        collection: str,
        vector: Sequence[float],
        limit: int,
        filters: dict[str, str] | None = None,
    ) -> list[Hit]:
        query_filter = None
        if filters:
            must: list[models.Condition] = [
                models.FieldCondition(key=k, match=models.MatchValue(value=v)) for k, v in filters.items()
            ]
            query_filter = models.Filter(must=must)

        async def fn(client: AsyncQdrantClient) -> list[Hit]:
            result = await client.query_points(
                collection,
                query=list(map(float, vector)),
                limit=limit,
                query_filter=query_filter,
                with_payload=True,
            )
            return [_hit(p) for p in result.points]

        if limit <= 0:
            return []
        return await self._call(f"search({collection})", fn)

    async def count(self, collection: str) -> int:
        async def fn(client: AsyncQdrantClient) -> int:
            return (await client.count(collection, exact=True)).count

        return await self._call(f"count({collection})", fn)

    async def close(self) -> None:
        async with self._lock:
            client, self._client = self._client, None
        if client is not None:
            await client.close()


def _hit(point: models.ScoredPoint) -> Hit:
    payload: dict[str, Any] = dict(point.payload or {})
    pid = payload.pop(_ID_FIELD, None)
    return Hit(id=str(pid if pid is not None else point.id), score=float(point.score), payload=payload)
