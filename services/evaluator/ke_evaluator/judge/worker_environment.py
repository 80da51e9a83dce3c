"""The scrubbed environment a worker process starts with (parent side of the sandbox).

The candidate runs arbitrary code in the worker, so the worker inherits only an allowlist
of variables, never a credential or the service's own configuration. The worker isolates
itself further once started (``worker/isolation.py``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ..backends import get_backend

# Variables a worker may inherit. Everything else is dropped: the candidate runs
# arbitrary code and must not see credentials or service configuration.
_ALLOW_EXACT = frozenset(
    {
        "PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM",
        "CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH",
        "VIRTUAL_ENV", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE",
        "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
    }
)
_ALLOW_PREFIX = ("TRITON_", "NVIDIA_", "CUDA_", "PYTORCH_", "TORCH_", "NCCL_")
# A name containing any of these is a secret even when a prefix allows it.
_SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "COOKIE",
                   "SESSION", "PRIVATE", "CERT")
_SECRET_PREFIXES = ("AWS_", "OPENAI_", "ANTHROPIC_", "AZURE_", "GCP_", "GOOGLE_", "HF_", "HUGGING",
                    "GITHUB_", "GH_", "MINIO_", "NATS_", "QDRANT_", "KE_", "KERNELEVOLVE_")

def is_secret_name(name: str) -> bool:
    up = name.upper()
    return any(m in up for m in _SECRET_MARKERS) or up.startswith(_SECRET_PREFIXES)


def child_environment(
    parent_env: Mapping[str, str],
    *,
    scratch_dir: str,
    device: str,
    cuda_visible_devices: str | None,
    pythonpath: str,
) -> dict[str, str]:
    """The scrubbed environment for a worker process on the device backend ``device``, pinned
    to ``cuda_visible_devices`` (an entry of the backend's visibility variable; None keeps
    the parent's)."""
    backend = get_backend(device)
    allow_prefix = _ALLOW_PREFIX + backend.environment_prefixes
    env: dict[str, str] = {}
    for name, value in parent_env.items():
        if is_secret_name(name):
            continue
        if name in _ALLOW_EXACT or name.startswith(allow_prefix):
            env[name] = value
    env.setdefault("PATH", "/usr/bin:/bin")
    tmp = os.path.join(scratch_dir, "tmp")
    os.makedirs(tmp, exist_ok=True)
    env["HOME"] = scratch_dir
    env["TMPDIR"] = tmp
    env["PYTHONPATH"] = pythonpath
    env["PYTHONNOUSERSITE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    backend.worker_environment(env, cuda_visible_devices)
    return env
