"""Build the configured object store (called by composition roots, never at import)."""

from __future__ import annotations

from kernelevolve.config import StoreSettings
from kernelevolve.errors import ConfigError
from kernelevolve.store.folder import FolderStore
from kernelevolve.store.port import ObjectStore


def store_from_settings(settings: StoreSettings) -> ObjectStore:
    """``kind: folder`` → FolderStore(root); ``kind: s3`` → S3Store (connects on first use)."""
    kind = settings.kind.strip().lower()
    if kind == "folder":
        if not settings.root:
            raise ConfigError("store.root must be set for the folder store")
        return FolderStore(settings.root)
    if kind == "s3":
        from kernelevolve.store.s3 import S3Store  # the minio SDK only where S3 is configured

        return S3Store(
            endpoint=settings.endpoint,
            bucket=settings.bucket,
            access_key=settings.access_key,
            secret_key=settings.secret_key,
            secure=settings.secure,
            region=settings.region or None,
        )
    raise ConfigError(f"unknown store.kind {settings.kind!r} (expected 'folder' or 's3')")
