"""Security settings: tokens from the environment, TLS files, and which token the CLI sends."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ke_cli.cluster import STATE_FILE, ClusterState, Proc, _start_time
from ke_cli.credentials import client_options
from kernelevolve.config import load_settings
from kernelevolve.errors import ConfigError
from kernelevolve.grpc_util import server_options


def test_tokens_and_limits_from_the_environment() -> None:
    s = load_settings(env={"KE_AUTH_TOKENS": " alpha , beta,,", "KE_GATEWAY_RATE_PER_S": "2.5",
                           "KE_GATEWAY_RATE_BURST": "7", "KE_GRPC_MAX_MESSAGE_BYTES": "1024",
                           "KE_METRICS_ENABLED": "true", "KE_METRICS_PORT": "0"})
    assert s.auth.token_list == ("alpha", "beta")
    internal, public = server_options(s), server_options(s, public=True)
    assert internal.tokens == public.tokens == ("alpha", "beta")
    assert internal.rate_per_s == 0 and public.rate_per_s == 2.5 and public.rate_burst == 7
    assert internal.max_message_bytes == public.max_message_bytes == 1024
    assert s.metrics.enabled and s.metrics.port == 0
    assert load_settings(env={}).auth.token_list == ()


def test_gateway_tls_files(tmp_path: Path) -> None:
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.write_bytes(b"CERT")
    key.write_bytes(b"KEY")
    s = load_settings(env={"KE_GATEWAY_TLS_CERT_FILE": str(cert), "KE_GATEWAY_TLS_KEY_FILE": str(key)})
    opts = server_options(s, public=True)
    assert (opts.tls_cert, opts.tls_key) == (b"CERT", b"KEY")
    assert server_options(s).tls_cert == b""  # internal servers stay plaintext
    with pytest.raises(ConfigError, match="both"):
        server_options(load_settings(env={"KE_GATEWAY_TLS_CERT_FILE": str(cert)}), public=True)
    with pytest.raises(ConfigError, match="cannot read"):
        server_options(load_settings(env={"KE_GATEWAY_TLS_CERT_FILE": str(tmp_path / "no.crt"),
                                          "KE_GATEWAY_TLS_KEY_FILE": str(key)}), public=True)


def _fake_cluster(state: Path, gateway: str, token: str) -> None:
    """A state folder whose 'gateway' process is this test process (alive, known start time)."""
    state.mkdir()
    (state / "token").write_text(token + "\n")
    me = Proc(name="gateway", pid=os.getpid(), start_time=_start_time(os.getpid()) or "", log="")
    (state / STATE_FILE).write_text(ClusterState(gateway=gateway, nats_url_no_token="",
                                                 token_file=str(state / "token"), processes=[me]).to_json())


def test_cli_token_precedence(tmp_path: Path) -> None:
    state = tmp_path / "state"
    _fake_cluster(state, "127.0.0.1:4000", "cluster-token")
    env = {"KE_CLUSTER_STATE_DIR": str(state)}
    s = load_settings(env=env)
    # The local cluster's token, for its own gateway only (localhost counts as 127.0.0.1).
    assert client_options(s, "127.0.0.1:4000").token == "cluster-token"
    assert client_options(s, "localhost:4000").token == "cluster-token"
    assert client_options(s, "127.0.0.1:4001").token == ""
    assert client_options(s, "10.0.0.5:4000").token == ""
    # KE_CLIENT_TOKEN, then --token, win over it.
    s2 = load_settings(env={**env, "KE_CLIENT_TOKEN": "env-token"})
    assert client_options(s2, "127.0.0.1:4000").token == "env-token"
    assert client_options(s2, "127.0.0.1:4000", token="flag-token").token == "flag-token"
    # The embedded stack (no --gateway) uses the first server token, if any.
    s3 = load_settings(env={"KE_AUTH_TOKENS": "first,second"})
    assert client_options(s3, "").token == "first"
    # A cluster whose gateway is gone gives no token.
    dead = ClusterState.load(state / STATE_FILE)
    dead.processes[0].start_time = "0"
    (state / STATE_FILE).write_text(dead.to_json())
    assert client_options(s, "127.0.0.1:4000").token == ""


def test_cli_tls_options(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_bytes(b"PEM")
    s = load_settings(env={})
    opts = client_options(s, "gw:443", tls_ca=str(ca))
    assert opts.tls and opts.ca_cert == b"PEM"
    assert client_options(s, "gw:443", tls=True).ca_cert is None  # system roots
    assert not client_options(s, "gw:443").tls
    with pytest.raises(ConfigError, match="cannot read"):
        client_options(s, "gw:443", tls_ca=str(tmp_path / "missing.pem"))
