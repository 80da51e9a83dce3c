from __future__ import annotations

import io
import json
import logging

import structlog

from kernelevolve import logging as ke_logging


def test_json_lines_carry_ids_as_fields() -> None:
    buf = io.StringIO()
    ke_logging.configure("json", "INFO", stream=buf)
    logging.getLogger("svc").info("evaluated", extra={"session_id": "s1", "candidate_id": "r1-1"})
    structlog.get_logger("svc").info("requested", session_id="s2", count=2)
    lines = [json.loads(line) for line in buf.getvalue().splitlines()]
    assert lines[0]["event"] == "evaluated" and lines[0]["session_id"] == "s1" and lines[0]["candidate_id"] == "r1-1"
    assert lines[1]["session_id"] == "s2" and lines[1]["count"] == 2 and lines[1]["level"] == "info"
    ke_logging.configure("console", "WARNING")
