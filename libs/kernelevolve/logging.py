"""Logging set-up, called once by each entrypoint (never at import time).

Services log JSON lines; the CLI logs readable lines. Ids (session_id, candidate_id,
node_id) are passed as fields: ``log.info("evaluated", candidate_id=cid)``.
"""

from __future__ import annotations

import logging
import sys
from typing import Literal

import structlog

Format = Literal["json", "console"]


def configure(fmt: Format = "json", level: str = "INFO", stream=None) -> None:
    """Route stdlib logging and structlog through one renderer."""
    stream = stream or sys.stderr
    renderer: structlog.types.Processor
    if fmt == "json":
        renderer = structlog.processors.JSONRenderer()
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=False)
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        # stdlib calls pass ids as ``extra={...}``: lift them into the event's fields.
        structlog.stdlib.ExtraAdder(),
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    handler = logging.StreamHandler(stream)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
            foreign_pre_chain=shared,
        )
    )
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    # Third-party chatter (nats reconnects, httpx requests) is noise at INFO.
    for noisy in ("nats", "httpx", "urllib3", "qdrant_client", "sentence_transformers", "transformers"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def get_logger(name: str) -> structlog.stdlib.BoundLogger:
    return structlog.get_logger(name)
