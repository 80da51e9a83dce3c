"""Files users add: markdown chunked along headings and paragraphs, YAML in the seed format,
stable ids so that adding a file again replaces its documents."""

from __future__ import annotations

from pathlib import Path

import pytest

from ke_knowledge.ingest import chunk_text, documents_from_file
from kernelevolve.errors import InvalidArgumentError

LONG = "\n\n".join(f"Paragraph {i}: " + "word " * 60 for i in range(7))


@pytest.mark.parametrize("max_chars", [150, 333, 1200])
def test_chunks_respect_the_limit_and_keep_every_word(max_chars: int) -> None:
    text = f"intro line\n\n# First\n{LONG}\n## Second\nshort body\n"
    chunks = chunk_text(text, max_chars)
    assert all(len(c) <= max_chars for _, c in chunks)
    assert [h for h, _ in chunks][0] == "" and chunks[-1] == ("Second", "short body")
    joined = " ".join(c for _, c in chunks).split()
    assert joined == ("intro line " + LONG + " short body").split()


def test_markdown_file_becomes_hardware_documents_with_stable_ids(tmp_path: Path) -> None:
    md = tmp_path / "mi350_notes.md"
    md.write_text("# LDS\n160 KB per CU.\n\n# Memory\nHBM3E at 8 TB/s.\n")
    docs = documents_from_file(md, hardware_kind="amd", op_family="matmul")
    assert [(d.level, d.hardware_kind, d.op_family) for d in docs] == [("hardware", "amd", "matmul")] * 2
    assert [d.title for d in docs] == ["mi350 notes: LDS", "mi350 notes: Memory"]
    assert [d.doc_id for d in documents_from_file(md, hardware_kind="amd")] == [d.doc_id for d in docs]
    generic = documents_from_file(md, hardware_kind="", kind="doc")
    assert {d.level for d in generic} == {"guidance"}
    assert {d.level for d in documents_from_file(md, hardware_kind="amd", kind="pattern")} == {"op_pattern"}


def test_yaml_file_keeps_its_ids(tmp_path: Path) -> None:
    y = tmp_path / "extra.yaml"
    y.write_text("level: op_pattern\ndocuments:\n  - id: my-scan\n    title: Scan\n    op_family: scan\n"
                 "    text: Use tl.associative_scan.\n    example: |\n      a = 1\n      b = 2\n")
    (doc,) = documents_from_file(y, hardware_kind="nvidia")
    assert (doc.doc_id, doc.level, doc.op_family, doc.hardware_kind) == ("my-scan", "op_pattern", "scan", "nvidia")
    assert doc.text.endswith("Example:\na = 1\nb = 2")


def test_bad_input(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError):
        documents_from_file(tmp_path / "missing.md", hardware_kind="amd")
    empty = tmp_path / "empty.md"
    empty.write_text("# only a heading\n")
    with pytest.raises(InvalidArgumentError, match="no text"):
        documents_from_file(empty, hardware_kind="amd")
    with pytest.raises(InvalidArgumentError):
        documents_from_file(empty, hardware_kind="amd", kind="poem")
