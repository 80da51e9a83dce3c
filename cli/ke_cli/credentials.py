"""Which token and TLS settings the CLI uses to reach a gateway.

Token, first found: ``--token`` → ``KE_CLIENT_TOKEN`` (``client.token``) → the local
cluster's token, when ``--gateway`` names the gateway of the cluster running from the
state folder (``kernelevolve up``) → for the embedded stack, the first of
``KE_AUTH_TOKENS`` (it then requires one) → none.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ke_cli.cluster import default_state_dir, running
from kernelevolve.config import Settings
from kernelevolve.errors import ConfigError


@dataclass(frozen=True)
class ClientOptions:
    token: str = ""
    tls: bool = False
    ca_cert: bytes | None = None

    def kwargs(self) -> dict[str, object]:
        return {"token": self.token, "tls": self.tls, "ca_cert": self.ca_cert}


def _same_gateway(a: str, b: str) -> bool:
    def norm(t: str) -> str:
        host, _, port = t.rpartition(":")
        return f"{'127.0.0.1' if host in ('localhost', '127.0.0.1', '') else host}:{port}"

    return norm(a) == norm(b)


def client_options(settings: Settings, gateway: str, *, token: str = "", tls: bool = False,
                   tls_ca: str = "", state_dir: Path | None = None) -> ClientOptions:
    tls = tls or settings.client.tls or bool(tls_ca)
    ca_path = tls_ca or settings.client.tls_ca_file
    ca: bytes | None = None
    if ca_path:
        try:
            ca = Path(ca_path).read_bytes()
        except OSError as exc:
            raise ConfigError(f"cannot read the CA certificate {ca_path}: {exc}") from exc
    chosen = token or settings.client.token
    if not chosen and gateway:
        state = state_dir or default_state_dir(settings)
        cluster = running(state)
        if cluster is not None and _same_gateway(cluster.gateway, gateway):
            try:
                chosen = Path(cluster.token_file).read_text().strip()
            except OSError:
                chosen = ""
    if not chosen and not gateway and settings.auth.token_list:
        chosen = settings.auth.token_list[0]
    return ClientOptions(token=chosen, tls=tls, ca_cert=ca)
