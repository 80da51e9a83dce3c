"""The packaged seed knowledge parses, is well formed, and covers what the synthesizer asks for."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from ke_knowledge.domain import LEVELS
from ke_knowledge.seed_loader import load_seed_documents
from kernelevolve.errors import ConfigError


def test_seed_documents_are_well_formed() -> None:
    docs = load_seed_documents()
    assert 15 <= len(docs) <= 60
    assert len({d.doc_id for d in docs}) == len(docs)
    assert all(d.level in LEVELS and d.title and len(d.text) > 80 and d.tags for d in docs)
    levels = Counter(d.level for d in docs)
    assert levels["guidance"] >= 5 and levels["hardware"] >= 3 and levels["op_pattern"] >= 5
    assert levels["skill"] == 0  # skills come from search, never from seed files
    hardware = {d.hardware_kind for d in docs if d.level == "hardware"}
    assert hardware == {"nvidia", "amd", "cpu"}
    assert all(d.hardware_kind == "" for d in docs if d.level == "guidance")


def test_hopper_facts_are_present() -> None:
    text = " ".join(d.text for d in load_seed_documents() if d.hardware_kind == "nvidia")
    for fact in ("132 SMs", "TB/s", "50 MB", "wgmma", "TMA"):
        assert fact in text


def test_extra_folder_adds_hardware(tmp_path: Path) -> None:
    (tmp_path / "hardware_fake.yaml").write_text(
        "level: hardware\nhardware_kind: fakegpu\ndocuments:\n"
        "  - id: hw-fake\n    title: Fake GPU\n    tags: [fake]\n    text: |\n      Has 7 SMs.\n"
    )
    docs = load_seed_documents(tmp_path)
    fake = [d for d in docs if d.hardware_kind == "fakegpu"]
    assert [(d.doc_id, d.level, d.text) for d in fake] == [("hw-fake", "hardware", "Has 7 SMs.")]


@pytest.mark.parametrize(
    "content",
    [
        "documents: not-a-list\n",
        "level: wisdom\ndocuments:\n  - {id: a, title: t, text: x}\n",
        "level: guidance\ndocuments:\n  - {id: a, title: t}\n",
        "level: guidance\ndocuments:\n  - {id: guide-coalescing, title: t, text: duplicate of a seed id}\n",
        "level: guidance\ndocuments: [\n",
    ],
)
def test_bad_seed_files_fail_loudly(tmp_path: Path, content: str) -> None:
    (tmp_path / "bad.yaml").write_text(content)
    with pytest.raises(ConfigError):
        load_seed_documents(tmp_path)


def test_every_target_and_op_family_is_covered() -> None:
    from kernelevolve.op_family import OP_FAMILIES

    docs = load_seed_documents()
    hw = " ".join(f"{d.title} {d.text}" for d in docs if d.level == "hardware")
    for name in ("H100", "H200", "A100", "MI300X", "MI350X", "x86", "wavefront", "LDS", "TMA", "num_stages"):
        assert name in hw, name
    families = {d.op_family for d in docs if d.level == "op_pattern"}
    assert families == set(OP_FAMILIES)
    examples = [d for d in docs if "Example:\n@triton.jit" in d.text]
    assert {d.op_family for d in examples} >= {"pointwise", "reduction", "matmul", "pooling", "scan", "loss"}
