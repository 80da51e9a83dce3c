"""The object-store port and the key rules every adapter enforces.

Keys are ``/``-separated paths such as ``sessions/s1/candidates/c3.py``. The rules are
strict enough that the same key is valid on a local folder and on S3, so a run can move
from the embedded folder store to a shared bucket without renaming anything.

Semantics (all adapters pass tests/adapters/test_store_contract.py):
- ``put`` replaces an existing object whole; a reader never sees a partial object.
- ``get`` raises NotFoundError for a missing key.
- ``list(prefix)`` is a plain string-prefix match (``"a/b"`` matches ``"a/bc"`` and
  ``"a/b/c"``), recursive, returned sorted.
- ``delete`` of a missing key is a no-op.
"""

from __future__ import annotations

from typing import Protocol

from kernelevolve.errors import InvalidArgumentError

# Temporary files of FolderStore's atomic writes start with this; a key segment may not,
# so a half-written file can never be mistaken for (or collide with) a real object.
TEMP_PREFIX = ".ke-tmp-"


class ObjectStore(Protocol):
    async def put(self, key: str, data: bytes, content_type: str = "application/octet-stream") -> None: ...

    async def get(self, key: str) -> bytes:
        """The object's bytes; NotFoundError when missing."""
        ...

    async def exists(self, key: str) -> bool: ...

    async def list(self, prefix: str) -> list[str]:
        """Keys starting with ``prefix``, sorted."""
        ...

    async def delete(self, key: str) -> None:
        """Remove the object; a missing key is not an error."""
        ...

    async def close(self) -> None: ...


def validate_key(key: str) -> str:
    """Return ``key`` unchanged, or raise InvalidArgumentError if it could escape a folder root.

    Rejected: empty keys, absolute paths, backslashes, NUL, empty segments (``a//b``,
    trailing ``/``), ``.``/``..`` segments and segments that look like our temp files.
    """
    if not isinstance(key, str) or not key:
        raise InvalidArgumentError("object key must be a non-empty string")
    if key.startswith("/"):
        raise InvalidArgumentError(f"object key {key!r} must be relative (no leading '/')")
    if "\\" in key or "\x00" in key:
        raise InvalidArgumentError(f"object key {key!r} may not contain a backslash or NUL")
    for segment in key.split("/"):
        if segment in ("", ".", ".."):
            raise InvalidArgumentError(f"object key {key!r} has an empty, '.' or '..' segment")
        if segment.startswith(TEMP_PREFIX):
            raise InvalidArgumentError(f"object key {key!r} uses the reserved prefix {TEMP_PREFIX!r}")
    return key


def validate_prefix(prefix: str) -> str:
    """A list prefix may be empty or end in ``/``; otherwise it follows the key rules."""
    if prefix == "":
        return prefix
    validate_key(prefix[:-1] if prefix.endswith("/") else prefix)
    return prefix
