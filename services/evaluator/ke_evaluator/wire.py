"""Parent <-> worker wire protocol: one JSON object per line over two dedicated pipes.

The worker's stdout/stderr go to a log file, never to the protocol pipes, so a
candidate that prints cannot corrupt a message. Stdlib only.

Parent -> worker ("op"):
  {"op": "evaluate", "job_id", "spec_source", "spec_name", "candidate_source", "candidate_id", "options"}
  {"op": "validate_spec", "job_id", "spec_source", "spec_name", "options"}
  {"op": "shutdown"}
  "options" is flat, ``{field: value}`` of ``worker.evaluation.JobOptions`` plus the phase
  limits' options and the spec's stored "reference_cost" (``Judge._job_options`` builds it
  from the nested ``EvalOptions``).
Worker -> parent ("type"):
  {"type": "ready", "fingerprint": {...}, "sandbox": {...}}
  {"type": "phase", "job_id", "phase": "measure" | "compile" | "run"}  # restarts the parent's clock
      # (forward only; the message that ends "measure" carries "reference_cost": phase_limits)
  {"type": "lock_wait", "mode": "shared" | "exclusive"}     # waiting for the device lock: clock paused
  {"type": "lock_held", "mode", "waited_s"}                 # got it: the clock runs on
  {"type": "result", "job_id", "payload": {...}}            # Verdict.to_dict() or SpecCheck fields
"""

from __future__ import annotations

import json
import os
import select
import time
from typing import Any

MAX_LINE_BYTES = 64 * 1024 * 1024


class ChannelClosed(Exception):
    """The other end closed its pipe (process exited)."""


class ChannelTimeout(Exception):
    """No complete message arrived before the deadline."""


def encode(msg: dict[str, Any]) -> bytes:
    return (json.dumps(msg, allow_nan=True, default=str) + "\n").encode()


def write_message(fd: int, msg: dict[str, Any]) -> None:
    data = encode(msg)
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


class LineReader:
    """Reads newline-delimited JSON from a raw fd with a deadline."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._buf = bytearray()

    def read(self, deadline: float | None) -> dict[str, Any]:
        while True:
            nl = self._buf.find(b"\n")
            if nl >= 0:
                line = bytes(self._buf[:nl])
                del self._buf[: nl + 1]
                if not line.strip():
                    continue
                return json.loads(line)
            if len(self._buf) > MAX_LINE_BYTES:
                raise ChannelClosed("message too large")
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self.fd], [], [], timeout)
            if not ready:
                raise ChannelTimeout()
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                raise ChannelClosed("end of stream")
            self._buf.extend(chunk)
