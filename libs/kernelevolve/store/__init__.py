"""The object-store port with its adapters: a local folder, S3 (minio SDK), and memory.

Build one with ``store_from_settings(settings.store)`` in a composition root.
"""

from __future__ import annotations

from kernelevolve.store.factory import store_from_settings
from kernelevolve.store.folder import FolderStore
from kernelevolve.store.memory import MemoryStore
from kernelevolve.store.port import ObjectStore, validate_key
from kernelevolve.store.s3 import S3Store

__all__ = ["FolderStore", "MemoryStore", "ObjectStore", "S3Store", "store_from_settings", "validate_key"]
