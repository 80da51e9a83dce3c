"""One contract for every ObjectStore adapter; the S3 case runs against a real SeaweedFS."""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kernelevolve.config import StoreSettings
from kernelevolve.errors import ConfigError, ConflictError, InvalidArgumentError, NotFoundError, StoreUnavailable
from kernelevolve.store import FolderStore, MemoryStore, ObjectStore, S3Store, store_from_settings

from .seaweed import S3Endpoint


@pytest.fixture(params=["memory", "folder", pytest.param("s3", marks=pytest.mark.integration)])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ObjectStore]:
    if request.param == "memory":
        s: ObjectStore = MemoryStore()
    elif request.param == "folder":
        s = FolderStore(tmp_path / "objects")
    else:
        s3: S3Endpoint = request.getfixturevalue("seaweedfs")
        # A bucket per test keeps list() results independent of other tests.
        bucket = f"ke-test-{uuid.uuid4().hex[:12]}"
        s3store = S3Store(s3.endpoint, bucket, s3.access_key, s3.secret_key)
        await s3store.start()
        s = s3store
    try:
        yield s
    finally:
        await s.close()


async def test_round_trip(store: ObjectStore) -> None:
    await store.put("a/b.txt", b"hello", "text/plain")
    assert await store.get("a/b.txt") == b"hello"
    assert await store.exists("a/b.txt")


async def test_empty_object(store: ObjectStore) -> None:
    await store.put("empty", b"")
    assert await store.get("empty") == b""
    assert await store.exists("empty")


async def test_large_object(store: ObjectStore) -> None:
    data = bytes(range(256)) * (5 * 1024 * 1024 // 256)
    await store.put("big/blob.bin", data)
    assert await store.get("big/blob.bin") == data


async def test_overwrite_replaces(store: ObjectStore) -> None:
    await store.put("k", b"first version, longer")
    await store.put("k", b"second")
    assert await store.get("k") == b"second"
    assert await store.list("") == ["k"]


async def test_missing_key(store: ObjectStore) -> None:
    with pytest.raises(NotFoundError):
        await store.get("no/such/key")
    assert not await store.exists("no/such/key")


async def test_list_by_prefix(store: ObjectStore) -> None:
    keys = ["s/1/b.py", "s/1/a.py", "s/1/reports/x.json", "s/10/a.py", "s/2/a.py", "top.json"]
    for key in keys:
        await store.put(key, key.encode())
    assert await store.list("") == sorted(keys)
    assert await store.list("s/1/") == ["s/1/a.py", "s/1/b.py", "s/1/reports/x.json"]
    # A prefix is a string prefix, not a folder: "s/1" also matches "s/10/...".
    assert await store.list("s/1") == ["s/1/a.py", "s/1/b.py", "s/1/reports/x.json", "s/10/a.py"]
    assert await store.list("s/1/re") == ["s/1/reports/x.json"]
    assert await store.list("nothing/here/") == []
    assert await store.list("s/3") == []


async def test_delete_is_idempotent(store: ObjectStore) -> None:
    await store.put("d/x", b"1")
    await store.put("d/y", b"2")
    await store.delete("d/x")
    await store.delete("d/x")
    await store.delete("never/existed")
    assert not await store.exists("d/x")
    assert await store.list("d/") == ["d/y"]
    with pytest.raises(NotFoundError):
        await store.get("d/x")


@pytest.mark.parametrize(
    "key", ["with space/file name.txt", "unicodé/ключ/数据.py", "plus+sign/a+b=c.json", "semi;colon,comma'q"]
)
async def test_odd_characters(store: ObjectStore, key: str) -> None:
    await store.put(key, key.encode())
    assert await store.get(key) == key.encode()
    assert await store.list(key.split("/")[0]) == [key]
    await store.delete(key)
    assert not await store.exists(key)


@pytest.mark.parametrize(
    "key", ["", "/abs/path", "a/../b", "..", "a//b", "a/b/", "back\\slash", "./a", "a/.ke-tmp-x"]
)
async def test_rejects_unsafe_keys(store: ObjectStore, key: str) -> None:
    with pytest.raises(InvalidArgumentError):
        await store.put(key, b"x")
    with pytest.raises(InvalidArgumentError):
        await store.get(key)


async def test_concurrent_puts(store: ObjectStore) -> None:
    n = 24
    await asyncio.gather(*(store.put(f"c/{i:03d}", str(i).encode() * 100) for i in range(n)))
    # Concurrent writers of one key: the last one wins whole, never a mix.
    await asyncio.gather(*(store.put("c/same", bytes([i]) * 4096) for i in range(8)))
    assert await store.list("c/") == sorted([f"c/{i:03d}" for i in range(n)] + ["c/same"])
    values = await asyncio.gather(*(store.get(f"c/{i:03d}") for i in range(n)))
    assert values == [str(i).encode() * 100 for i in range(n)]
    same = await store.get("c/same")
    assert len(same) == 4096 and len(set(same)) == 1


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_s3_unreachable_raises_store_unavailable() -> None:
    store = S3Store(f"127.0.0.1:{_closed_port()}", "bucket", "k", "s", retries=0, timeout_s=2.0)
    with pytest.raises(StoreUnavailable):
        await store.start()
    with pytest.raises(StoreUnavailable):
        await store.put("a", b"x")
    with pytest.raises(StoreUnavailable):
        await store.get("a")
    await store.close()


@pytest.mark.integration
async def test_s3_wrong_secret_is_config_error(seaweedfs: S3Endpoint) -> None:
    store = S3Store(seaweedfs.endpoint, "ke-wrong-secret", seaweedfs.access_key, "not-the-secret")
    with pytest.raises(ConfigError):
        await store.start()
    await store.close()


@pytest.mark.integration
async def test_s3_data_survives_a_new_client(seaweedfs: S3Endpoint) -> None:
    bucket = f"ke-test-{uuid.uuid4().hex[:12]}"
    first = S3Store(f"http://{seaweedfs.endpoint}", bucket, seaweedfs.access_key, seaweedfs.secret_key)
    await first.put("p/k", b"kept")  # creates the bucket lazily
    await first.close()
    second = S3Store(seaweedfs.endpoint, bucket, seaweedfs.access_key, seaweedfs.secret_key)
    assert await second.get("p/k") == b"kept"
    await second.close()


async def test_folder_key_used_as_file_and_folder_conflicts(tmp_path: Path) -> None:
    store = FolderStore(tmp_path)
    await store.put("a", b"file")
    with pytest.raises(ConflictError):
        await store.put("a/b", b"nested under a file")
    assert await store.get("a") == b"file"


def test_folder_writes_leave_no_temp_files(tmp_path: Path) -> None:
    async def scenario() -> list[str]:
        store = FolderStore(tmp_path)
        await store.put("x/y.bin", b"1")
        await store.put("x/y.bin", b"2")
        return sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())

    assert asyncio.run(scenario()) == ["x/y.bin"]


def test_store_from_settings(tmp_path: Path) -> None:
    folder = store_from_settings(StoreSettings(kind="folder", root=str(tmp_path)))
    assert isinstance(folder, FolderStore) and folder.root == tmp_path
    s3 = store_from_settings(
        StoreSettings(kind="s3", endpoint="127.0.0.1:9", bucket="b-k", access_key="a", secret_key="s")
    )
    assert isinstance(s3, S3Store) and s3.bucket == "b-k" and "secret" not in repr(s3)
    with pytest.raises(ConfigError):
        store_from_settings(StoreSettings(kind="ftp"))
    with pytest.raises(ConfigError):
        store_from_settings(StoreSettings(kind="s3", endpoint=""))


async def test_folder_paths_that_are_not_objects(tmp_path: Path) -> None:
    store = FolderStore(tmp_path)
    await store.put("dir/file", b"x")
    assert not await store.exists("dir") and not await store.exists("dir/file/below")
    with pytest.raises(NotFoundError):
        await store.get("dir")
    await store.delete("dir")
    await store.delete("dir/file/below")
    assert await store.list("") == ["dir/file"]
