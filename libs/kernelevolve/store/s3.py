"""Object store on any S3-compatible server (SeaweedFS, MinIO, AWS) through the ``minio`` SDK.

The SDK is blocking; every call runs in a worker thread (``asyncio.to_thread``) so the
service's event loop keeps serving while an upload is in flight. The client is built and
the bucket created on ``start()`` (or on first use), never in the constructor.
"""

from __future__ import annotations

import asyncio
import io
import logging
import threading
from collections.abc import Callable
from typing import TypeVar

import urllib3
from minio import Minio
from minio.error import InvalidResponseError, MinioException, S3Error, ServerError

from kernelevolve.errors import ConfigError, KernelEvolveError, NotFoundError, StoreUnavailable
from kernelevolve.store.port import validate_key, validate_prefix

log = logging.getLogger(__name__)

T = TypeVar("T")

_MISSING = frozenset({"NoSuchKey", "NotFound"})
# Retrying with the same credentials cannot fix these: it is a configuration problem.
_AUTH = frozenset(
    {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidBucketName", "AllAccessDisabled"}
)
_BUCKET_RACE = frozenset({"BucketAlreadyOwnedByYou", "BucketAlreadyExists"})


def _split_endpoint(endpoint: str, secure: bool) -> tuple[str, bool]:
    """Accept ``host:port`` as well as ``http(s)://host:port``; the SDK wants the former."""
    if endpoint.startswith("https://"):
        return endpoint[len("https://") :].rstrip("/"), True
    if endpoint.startswith("http://"):
        return endpoint[len("http://") :].rstrip("/"), False
    return endpoint.rstrip("/"), secure


class S3Store:
    def __init__(
        self,
        endpoint: str,
        bucket: str,
        access_key: str,
        secret_key: str,
        secure: bool = False,
        region: str | None = None,
        *,
        timeout_s: float = 30.0,
        retries: int = 2,
    ) -> None:
        if not endpoint:
            raise ConfigError("S3 store needs an endpoint (host:port)")
        if not bucket:
            raise ConfigError("S3 store needs a bucket name")
        self.endpoint, self.secure = _split_endpoint(endpoint, secure)
        self.bucket = bucket
        self._access_key = access_key
        self._secret_key = secret_key
        self._region = region or None
        self._timeout_s = timeout_s
        self._retries = retries
        self._client: Minio | None = None
        self._http: urllib3.PoolManager | None = None
        self._ready = False
        self._lock = threading.Lock()

    def __repr__(self) -> str:  # never show the keys
        return f"S3Store(endpoint={self.endpoint!r}, bucket={self.bucket!r}, secure={self.secure})"

    async def start(self) -> None:
        """Build the client and create the bucket if missing; StoreUnavailable if unreachable."""
        await self._call(lambda: None)

    def _ensure(self) -> Minio:
        with self._lock:
            if self._client is None:
                # Few, quick retries: an unreachable store should surface as StoreUnavailable
                # within seconds and let the caller (or the bus redelivery) retry later.
                self._http = urllib3.PoolManager(
                    timeout=urllib3.Timeout(connect=min(5.0, self._timeout_s), read=self._timeout_s),
                    maxsize=16,
                    retries=urllib3.Retry(
                        total=self._retries,
                        backoff_factor=0.2,
                        status_forcelist=[500, 502, 503, 504],
                    ),
                )
                try:
                    self._client = Minio(
                        self.endpoint,
                        access_key=self._access_key or None,
                        secret_key=self._secret_key or None,
                        secure=self.secure,
                        region=self._region,
                        http_client=self._http,
                    )
                except ValueError as exc:
                    raise ConfigError(f"bad S3 endpoint {self.endpoint!r}: {exc}") from exc
            if not self._ready:
                self._create_bucket(self._client)
                self._ready = True
            return self._client

    def _create_bucket(self, client: Minio) -> None:
        if client.bucket_exists(self.bucket):
            return
        try:
            client.make_bucket(self.bucket, location=self._region)
            log.info("created bucket", extra={"bucket": self.bucket, "endpoint": self.endpoint})
        except S3Error as exc:
            if exc.code not in _BUCKET_RACE:  # another process created it first: fine
                raise

    async def _call(self, fn: Callable[[], T], key: str = "") -> T:
        def run() -> T:
            self._ensure()
            return fn()

        try:
            return await asyncio.to_thread(run)
        except KernelEvolveError:
            raise
        except S3Error as exc:
            if exc.code in _MISSING:
                raise NotFoundError(f"object {key!r} not found in bucket {self.bucket!r}") from exc
            if exc.code in _AUTH:
                raise ConfigError(f"S3 {self.endpoint} refused the request: {exc.code}") from exc
            raise StoreUnavailable(f"S3 {self.endpoint} error {exc.code}: {exc.message}") from exc
        except (ServerError, InvalidResponseError, MinioException) as exc:
            raise StoreUnavailable(f"S3 {self.endpoint} failed: {exc}") from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise StoreUnavailable(f"S3 {self.endpoint} unreachable: {exc}") from exc
        except ValueError as exc:  # the SDK validates names and endpoints with ValueError
            raise ConfigError(f"S3 request rejected by the client: {exc}") from exc

    async def put(self, key: str, data: bytes, content_type: str = "application/octet-stream") -> None:
        validate_key(key)
        payload = bytes(data)

        def fn() -> None:
            assert self._client is not None
            self._client.put_object(
                self.bucket, key, io.BytesIO(payload), len(payload), content_type=content_type
            )

        await self._call(fn, key)

    async def get(self, key: str) -> bytes:
        validate_key(key)

        def fn() -> bytes:
            assert self._client is not None
            response = self._client.get_object(self.bucket, key)
            try:
                return response.read()
            finally:
                response.close()
                response.release_conn()

        return await self._call(fn, key)

    async def exists(self, key: str) -> bool:
        validate_key(key)

        def fn() -> bool:
            assert self._client is not None
            try:
                self._client.stat_object(self.bucket, key)
            except S3Error as exc:
                if exc.code in _MISSING:
                    return False
                raise
            return True

        return await self._call(fn, key)

    async def list(self, prefix: str) -> list[str]:
        validate_prefix(prefix)

        def fn() -> list[str]:
            assert self._client is not None
            objects = self._client.list_objects(self.bucket, prefix=prefix or None, recursive=True)
            return sorted(o.object_name for o in objects if o.object_name and not o.is_dir)

        return await self._call(fn, prefix)

    async def delete(self, key: str) -> None:
        validate_key(key)

        def fn() -> None:
            assert self._client is not None
            try:
                self._client.remove_object(self.bucket, key)
            except S3Error as exc:
                if exc.code not in _MISSING:  # S3 deletes are idempotent; some servers still 404
                    raise

        await self._call(fn, key)

    async def close(self) -> None:
        with self._lock:
            if self._http is not None:
                self._http.clear()
            self._client = None
            self._http = None
            self._ready = False
