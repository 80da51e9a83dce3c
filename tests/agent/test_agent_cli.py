"""How `kernelevolve agent` finds whom to ask: the record a running embedded optimize
leaves, stale records of dead processes, and the clear answer when nothing runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ke_cli.agent_cli import NothingPending, live_embedded, register_embedded, registry_dir, resolve_gateway
from kernelevolve.config import load_settings


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("KE_CLUSTER_STATE_DIR", str(tmp_path / "cluster"))
    return tmp_path


def test_a_running_embedded_session_is_found_by_session_or_as_the_newest(state: Path) -> None:
    settings = load_settings()
    first = register_embedded("s-one", "127.0.0.1:1111", state / "one")
    register_embedded("s-two", "127.0.0.1:2222", state / "two")
    assert (registry_dir() / "s-one.json").stat().st_mode & 0o077 == 0
    assert resolve_gateway(settings, "", "s-one") == ("127.0.0.1:1111", True)
    assert resolve_gateway(settings, "", "") == ("127.0.0.1:2222", True)
    assert resolve_gateway(settings, "10.0.0.1:5", "s-one") == ("10.0.0.1:5", False)
    first()  # the optimize ended
    with pytest.raises(NothingPending, match="no running session s-one to answer"):
        resolve_gateway(settings, "", "s-one")


def test_the_record_of_a_dead_optimize_is_dropped(state: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    folder = registry_dir()
    folder.mkdir(parents=True)
    (folder / "s-gone.json").write_text(json.dumps({"session_id": "s-gone", "gateway": "127.0.0.1:9", "pid":
                                                    int(dead.stdout), "run_dir": "x", "started_at": 1.0}))
    assert live_embedded() == [] and not (folder / "s-gone.json").exists()
    with pytest.raises(NothingPending, match="--synthesizer agent"):
        resolve_gateway(load_settings(), "", "")
