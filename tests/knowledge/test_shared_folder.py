"""The user-level knowledge folder outlives a run and is shared by concurrent sessions:
Qdrant local mode locks its folder, so a shared index opens it per operation and waits
while another process holds it."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ke_knowledge.base import KnowledgeBase
from ke_knowledge.convert import measurement_from_result
from ke_knowledge.distill import SkillContext, distill_skill
from kernelevolve.config import Settings, default_knowledge_dir
from kernelevolve.errors import IndexUnavailable
from kernelevolve.vector import HashEmbedder, Point, QdrantIndex
from tests.knowledge.gpu_results import gpu_result

HOLDER = """
import asyncio, sys, pathlib
from qdrant_client import AsyncQdrantClient
async def main():
    client = AsyncQdrantClient(path=sys.argv[1])
    pathlib.Path(sys.argv[2]).write_text("held")
    await asyncio.sleep(float(sys.argv[3]))
    pathlib.Path(sys.argv[2]).write_text("released")  # before the lock goes: an order, not a time
    await client.close()
asyncio.run(main())
"""


def _hold(folder: Path, seconds: float, tmp_path: Path) -> subprocess.Popen[bytes]:
    ready = tmp_path / "ready"
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder), str(ready), str(seconds)])
    deadline = time.monotonic() + 30
    while not ready.exists():
        assert proc.poll() is None and time.monotonic() < deadline, "the holder did not start"
        time.sleep(0.05)
    return proc


async def test_two_sessions_share_one_folder(tmp_path: Path) -> None:
    folder = tmp_path / "knowledge"
    a, b = QdrantIndex(path=folder, shared=True), QdrantIndex(path=folder, shared=True)
    await a.ensure_collection("k", 4)
    await b.ensure_collection("k", 4)

    async def write(index: QdrantIndex, prefix: str) -> None:
        for i in range(5):
            await index.upsert("k", [Point(f"{prefix}{i}", [1.0, float(i), 0.0, 1.0], {"who": prefix})])

    await asyncio.gather(write(a, "a"), write(b, "b"))
    assert await a.count("k") == await b.count("k") == 10
    hits = await b.search("k", [1.0, 0.0, 0.0, 1.0], 10, {"who": "a"})
    assert {h.id for h in hits} == {f"a{i}" for i in range(5)}


async def test_waits_for_a_process_holding_the_folder(tmp_path: Path) -> None:
    folder = tmp_path / "knowledge"
    index = QdrantIndex(path=folder, shared=True, lock_timeout_s=30)
    await index.ensure_collection("k", 4)
    holder = _hold(folder, 1.0, tmp_path)
    try:
        await index.upsert("k", [Point("x", [1.0, 0.0, 0.0, 0.0])])
        # it waited for the holder instead of failing: it got the folder after its release
        assert (tmp_path / "ready").read_text() == "released"
        assert await index.count("k") == 1
    finally:
        holder.wait(30)


async def test_gives_up_with_a_clear_error_when_the_folder_stays_locked(tmp_path: Path) -> None:
    folder = tmp_path / "knowledge"
    QdrantIndex(path=folder)  # create nothing yet; the holder creates the folder's lock
    holder = _hold(folder, 5.0, tmp_path)
    try:
        with pytest.raises(IndexUnavailable, match="locked by another process"):
            await QdrantIndex(path=folder, shared=True, lock_timeout_s=0.3).count("k")
    finally:
        holder.kill()
        holder.wait(30)


async def test_what_one_session_distils_the_next_retrieves(tmp_path: Path) -> None:
    folder = tmp_path / "knowledge"
    parent, child = measurement_from_result(gpu_result("p", 2.0)), measurement_from_result(gpu_result("c", 1.0))
    skill = distill_skill("s1", "c", SkillContext("gelu", "pointwise", "medium", "", "nvidia"), "BLOCK_SIZE",
                          {"group": "g0", "value": "4096"}, parent, child)
    assert skill is not None
    first = KnowledgeBase(QdrantIndex(path=folder, shared=True), HashEmbedder(dim=64), "kernelevolve")
    await first.start()
    await first.add_skill(skill)
    later = KnowledgeBase(QdrantIndex(path=folder, shared=True), HashEmbedder(dim=64), "kernelevolve")
    await later.start()  # re-seeding leaves skills alone
    (found,) = await later.list_skills("nvidia", "pointwise")
    assert found == skill


def test_default_folder_is_user_level(tmp_path: Path) -> None:
    assert default_knowledge_dir({"XDG_DATA_HOME": str(tmp_path)}) == tmp_path / "kernelevolve" / "knowledge"
    assert default_knowledge_dir({}) == Path.home() / ".local" / "share" / "kernelevolve" / "knowledge"
    assert Settings().learning.shared_folder
