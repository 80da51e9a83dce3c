"""Object store on a local folder: the embedded runner's store, and a run folder users can read.

Writes are atomic (temporary file in the target folder, then ``os.replace``), so a
crashed writer leaves either the old object or the new one, never a torn file.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
import os
import tempfile
from pathlib import Path

from kernelevolve.errors import ConflictError, NotFoundError, StoreUnavailable
from kernelevolve.store.port import TEMP_PREFIX, validate_key, validate_prefix

log = logging.getLogger(__name__)


class FolderStore:
    """Maps key ``a/b/c`` to ``<root>/a/b/c``."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        return self.root.joinpath(*validate_key(key).split("/"))

    async def put(self, key: str, data: bytes, content_type: str = "application/octet-stream") -> None:
        path = self._path(key)
        await asyncio.to_thread(self._write, path, bytes(data))

    @staticmethod
    def _write(path: Path, data: bytes) -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=path.parent)
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except (FileExistsError, NotADirectoryError, IsADirectoryError) as exc:
            # S3 allows both "a" and "a/b" as keys; a folder cannot hold a file and a folder
            # of the same name.
            raise ConflictError(f"cannot write {path}: a parent or the key itself is in use") from exc
        except OSError as exc:
            raise StoreUnavailable(f"cannot write {path}: {exc}") from exc

    async def get(self, key: str) -> bytes:
        path = self._path(key)
        try:
            return await asyncio.to_thread(path.read_bytes)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError) as exc:
            raise NotFoundError(f"object {key!r} not found") from exc
        except OSError as exc:
            raise StoreUnavailable(f"cannot read {path}: {exc}") from exc

    async def exists(self, key: str) -> bool:
        path = self._path(key)
        return await asyncio.to_thread(path.is_file)

    async def list(self, prefix: str) -> list[str]:
        validate_prefix(prefix)
        return await asyncio.to_thread(self._list, prefix)

    def _list(self, prefix: str) -> builtins.list[str]:  # `list` here is the method above
        # Walk only the deepest folder the prefix pins down, not the whole root.
        folder = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        start = self.root.joinpath(*folder.split("/")) if folder else self.root
        if not start.is_dir():
            return []
        keys: list[str] = []
        try:
            for dirpath, _dirnames, filenames in os.walk(start):
                rel = Path(dirpath).relative_to(self.root).as_posix()
                base = "" if rel == "." else f"{rel}/"
                for name in filenames:
                    if name.startswith(TEMP_PREFIX):
                        continue
                    key = base + name
                    if key.startswith(prefix):
                        keys.append(key)
        except OSError as exc:
            raise StoreUnavailable(f"cannot list {start}: {exc}") from exc
        return sorted(keys)

    async def delete(self, key: str) -> None:
        path = self._path(key)
        try:
            await asyncio.to_thread(path.unlink, missing_ok=True)
        except (IsADirectoryError, NotADirectoryError):
            return  # a "folder", or a path through a file: no such object, nothing to delete
        except OSError as exc:
            raise StoreUnavailable(f"cannot delete {path}: {exc}") from exc

    async def close(self) -> None:
        return None
