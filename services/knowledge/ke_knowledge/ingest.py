"""Documents injected by users: markdown, text or YAML files turned into knowledge documents.

A YAML file in the seed format (a ``documents`` list, see ``seed_loader``) keeps its own
ids, titles and tags. Markdown and text are cut into chunks of at most ``max_chars``
along headings, then paragraphs (a long chunk dilutes its embedding: one vector per
topic retrieves better than one per file); each chunk's title is the file's title plus
its heading. Ids derive from the hardware, the file name and the chunk's place, so adding
the same file again replaces its documents rather than duplicating them.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from ke_knowledge.domain import Doc
from ke_knowledge.seed_loader import parse_seed_text
from kernelevolve.errors import InvalidArgumentError

MAX_CHARS = 1200
KINDS = {"doc": "hardware", "pattern": "op_pattern", "guidance": "guidance"}
_HEADING = re.compile(r"^#{1,6}\s+(.*)$")


def _sections(text: str) -> list[tuple[str, str]]:
    """(heading, body) pairs in order; text before the first heading has heading ""."""
    out: list[tuple[str, list[str]]] = [("", [])]
    for line in text.splitlines():
        m = _HEADING.match(line)
        if m:
            out.append((m.group(1).strip(), []))
        else:
            out[-1][1].append(line)
    return [(h, "\n".join(body).strip()) for h, body in out if "\n".join(body).strip()]


def _split(body: str, max_chars: int) -> list[str]:
    """Paragraph-aligned pieces of at most ``max_chars`` (a longer paragraph is cut by words)."""
    pieces: list[str] = []
    current = ""
    for para in (p.strip() for p in re.split(r"\n\s*\n", body) if p.strip()):
        words = " ".join(para.split())
        while len(words) > max_chars:
            cut = words.rfind(" ", 0, max_chars)
            cut = cut if cut > 0 else max_chars
            if current:
                pieces.append(current)
                current = ""
            pieces.append(words[:cut])
            words = words[cut:].strip()
        if current and len(current) + 2 + len(words) > max_chars:
            pieces.append(current)
            current = ""
        current = f"{current}\n\n{words}" if current else words
    if current:
        pieces.append(current)
    return pieces


def chunk_text(text: str, max_chars: int = MAX_CHARS) -> list[tuple[str, str]]:
    """(heading, chunk) pairs covering ``text``, each chunk at most ``max_chars`` long."""
    if max_chars < 100:
        raise InvalidArgumentError("chunks shorter than 100 characters carry too little meaning")
    return [(h, piece) for h, body in _sections(text) for piece in _split(body, max_chars)]


def _doc_id(hardware: str, name: str, index: int) -> str:
    return "user-" + hashlib.sha256(f"{hardware}\x00{name}\x00{index}".encode()).hexdigest()[:16]


def documents_from_file(path: Path, *, hardware_kind: str, kind: str = "doc", op_family: str = "",
                        max_chars: int = MAX_CHARS) -> list[Doc]:
    """The documents of one file; ``hardware_kind`` "" = any hardware."""
    if kind not in KINDS:
        raise InvalidArgumentError(f"unknown document kind {kind!r}; expected one of {', '.join(KINDS)}")
    if not path.is_file():
        raise InvalidArgumentError(f"{path} is not a file")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidArgumentError(f"cannot read {path} as UTF-8 text: {exc}") from exc
    if path.suffix.lower() in (".yaml", ".yml"):
        return [Doc(d.doc_id, d.level, d.title, d.text, d.tags, d.hardware_kind or hardware_kind,
                    d.op_family or op_family) for d in parse_seed_text(text, str(path))]
    level = KINDS[kind] if hardware_kind or kind != "doc" else "guidance"
    title = path.stem.replace("_", " ").replace("-", " ")
    chunks = chunk_text(text, max_chars)
    if not chunks:
        raise InvalidArgumentError(f"{path} holds no text")
    tags = tuple(t for t in ("user", hardware_kind, op_family) if t)
    return [Doc(_doc_id(hardware_kind, path.name, i), level, f"{title}: {h}" if h else title, chunk, tags,
                hardware_kind, op_family) for i, (h, chunk) in enumerate(chunks)]
