"""The object-store port with its adapters: a local folder, S3 (minio SDK), and memory.

Build one with ``store_from_settings(settings.store)`` in a composition root. ``S3Store``
is imported on first use: a process that never talks to S3 (the in-process benchmark
driver on a GPU host) needs no minio SDK.
"""

from __future__ import annotations

from kernelevolve.store.factory import store_from_settings
from kernelevolve.store.folder import FolderStore
from kernelevolve.store.memory import MemoryStore
from kernelevolve.store.port import ObjectStore, validate_key

__all__ = ["FolderStore", "MemoryStore", "ObjectStore", "S3Store", "store_from_settings", "validate_key"]


def __getattr__(name: str) -> object:
    if name == "S3Store":
        from kernelevolve.store.s3 import S3Store

        return S3Store
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
