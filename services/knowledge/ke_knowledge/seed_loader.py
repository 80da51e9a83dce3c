"""Load seed knowledge from YAML files (the package's ``seed/`` folder, or any folder).

File format::

    level: hardware            # default level for the file's documents
    hardware_kind: nvidia      # default hardware kind ("" = any)
    op_family: ""              # default op family ("" = any; see kernelevolve.op_family)
    documents:
      - id: hw-example
        title: ...
        tags: [a, b]
        text: |
          ...
        example: |              # optional: code, kept verbatim (text is re-flowed)
          ...
        # level / hardware_kind / op_family may be overridden per document

Bad seed files are configuration errors: they fail loudly at start-up, naming the file.
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from ke_knowledge.domain import Doc
from kernelevolve.errors import ConfigError, InvalidArgumentError


def _example(item: dict[str, Any]) -> str:
    """An optional ``example`` (a kernel) is appended verbatim: code needs its line breaks."""
    example = str(item.get("example") or "").strip("\n")
    return f"\n\nExample:\n{example}" if example else ""


def _docs_from_mapping(data: Any, where: str) -> list[Doc]:
    if not isinstance(data, dict) or not isinstance(data.get("documents"), list):
        raise ConfigError(f"seed file {where} must be a mapping with a 'documents' list")
    level = data.get("level", "")
    hardware_kind = data.get("hardware_kind", "") or ""
    op_family = data.get("op_family", "") or ""
    docs = []
    for i, item in enumerate(data["documents"]):
        if not isinstance(item, dict):
            raise ConfigError(f"seed file {where}: document #{i} is not a mapping")
        missing = [k for k in ("id", "title", "text") if not item.get(k)]
        if missing:
            raise ConfigError(f"seed file {where}: document #{i} lacks {', '.join(missing)}")
        tags = item.get("tags") or []
        if not isinstance(tags, list):
            raise ConfigError(f"seed file {where}: tags of {item['id']!r} must be a list")
        try:
            docs.append(
                Doc(
                    doc_id=str(item["id"]),
                    level=str(item.get("level", level)),
                    title=str(item["title"]).strip(),
                    text=" ".join(str(item["text"]).split()) + _example(item),
                    tags=tuple(str(t) for t in tags),
                    hardware_kind=str(item.get("hardware_kind", hardware_kind) or ""),
                    op_family=str(item.get("op_family", op_family) or ""),
                )
            )
        except InvalidArgumentError as exc:
            raise ConfigError(f"seed file {where}: {exc}") from exc
    return docs


def _check_unique(docs: Iterable[Doc]) -> list[Doc]:
    seen: set[str] = set()
    out = []
    for doc in docs:
        if doc.doc_id in seen:
            raise ConfigError(f"seed document id {doc.doc_id!r} is defined twice")
        seen.add(doc.doc_id)
        out.append(doc)
    return out


def parse_seed_text(text: str, where: str) -> list[Doc]:
    """The documents of one seed-format YAML text; ``where`` names it in errors."""
    return _parse(text, where)


def _parse(text: str, where: str) -> list[Doc]:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"seed file {where} is not valid YAML: {exc}") from exc
    return _docs_from_mapping(data, where)


def load_seed_documents(*extra_dirs: Path | str) -> list[Doc]:
    """The packaged seed documents plus every ``*.yaml`` in ``extra_dirs``, in file-name order."""
    docs: list[Doc] = []
    package = importlib.resources.files("ke_knowledge.seed")
    for entry in sorted(package.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".yaml"):
            docs.extend(_parse(entry.read_text(encoding="utf-8"), f"ke_knowledge/seed/{entry.name}"))
    for folder in extra_dirs:
        folder = Path(folder)
        if not folder.is_dir():
            raise ConfigError(f"seed folder {folder} does not exist")
        for path in sorted(folder.glob("*.yaml")):
            docs.extend(_parse(path.read_text(encoding="utf-8"), str(path)))
    return _check_unique(docs)
