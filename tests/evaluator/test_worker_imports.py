"""The sandboxed side of the evaluator runs with torch, triton, numpy and protobuf alone: a
GPU machine needs nothing of the service stack to run a worker, and a worker never loads
the parent side (``ke_evaluator.judge``) or another service."""

from __future__ import annotations

import subprocess
import sys

from ke_evaluator.judge import worker_pool

# Modules the worker must never import: the service stack's third-party packages, the
# other services, and the parent side of the evaluator.
BLOCKED = ("grpc", "nats", "structlog", "yaml", "qdrant_client", "minio", "sentence_transformers",
           "ke_cli", "ke_gateway", "ke_knowledge", "ke_search", "ke_synthesizer",
           "ke_evaluator.judge", "ke_evaluator.app", "ke_evaluator.service", "ke_evaluator.grpc_server")

_PROBE = """
import importlib, pkgutil, runpy, sys

BLOCKED = {blocked!r}


class Refuse:
    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in BLOCKED):
            raise ImportError(f"the worker side imported {{name}}")
        return None


# Only the worker's own PYTHONPATH finds the project: drop the development install's finder,
# as a GPU host running from a checkout has none.
sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in getattr(f, "__module__", "")]
sys.path_hooks[:] = [h for h in sys.path_hooks if "__editable__" not in getattr(h, "__module__", "")]
sys.path_importer_cache.clear()
sys.meta_path.insert(0, Refuse())
import ke_evaluator.worker

names = ["ke_evaluator.wire", "ke_evaluator.device_lock", "kernelevolve.ports.verdict", "kernelevolve.orphans"]
names += [m.name for m in pkgutil.walk_packages(ke_evaluator.worker.__path__, "ke_evaluator.worker.")
          if not m.name.endswith("__main__")]
for name in names:
    importlib.import_module(name)
sys.argv = ["worker", "--help"]  # the process entry as the pool starts it; --help stops before sandboxing
try:
    runpy.run_module("ke_evaluator.worker", run_name="__main__")
except SystemExit as exc:
    assert exc.code == 0, exc.code
print(len(names))
"""


def _env() -> dict[str, str]:
    """The path the pool gives its workers, and nothing else of the environment."""
    return {"PATH": "/usr/bin:/bin", "TRITON_INTERPRET": "1", "PYTHONPATH": worker_pool._PKG_PARENT}


def test_worker_side_imports_nothing_of_the_service_stack() -> None:
    code = _PROBE.format(blocked=BLOCKED)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180, env=_env())
    assert out.returncode == 0, out.stderr[-3000:]
    assert int(out.stdout.strip().splitlines()[-1]) >= 15  # every worker module was imported


def test_the_probe_does_refuse_a_blocked_import() -> None:
    code = _PROBE.format(blocked=BLOCKED).replace("import ke_evaluator.worker\n",
                                                  "import ke_evaluator.worker\nimport yaml\n", 1)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180, env=_env())
    assert out.returncode != 0 and "the worker side imported yaml" in out.stderr
