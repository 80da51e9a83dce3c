"""Identifiers minted outside any one service (the CLI names a run folder after the
session before the gateway sees it)."""

from __future__ import annotations

import secrets
import time


def new_session_id() -> str:
    """Sortable by start time, unique enough for one deployment (24 random bits a second)."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)
