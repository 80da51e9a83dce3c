"""Shared pieces of the GPU benchmarks. Needs torch, triton, numpy and protobuf only, so
it runs on a GPU host where the service stack (NATS, S3, Qdrant clients) is not installed."""

from __future__ import annotations

import importlib.util
import json
import platform
import sys
import types
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for sub in ("libs", "services/evaluator", "services/synthesizer", "services/search"):
    path = str(ROOT / sub)
    if path not in sys.path:
        sys.path.insert(0, path)

GPU_SUFFIX = """

# --- benchmark sizing: use the spec's GPU-sized inputs when it declares them ---
if "get_gpu_inputs" in globals():
    get_inputs = get_gpu_inputs  # noqa: F811
if "get_gpu_init_inputs" in globals():
    get_init_inputs = get_gpu_init_inputs  # noqa: F811
"""


def gpu_variant(source: str) -> str:
    """The spec at realistic GPU sizes: ``get_gpu_inputs``/``get_gpu_init_inputs`` when
    declared (see examples/ops/README.md), else unchanged."""
    return source + GPU_SUFFIX


def load_module(name: str, source: str) -> types.ModuleType:
    spec = importlib.util.spec_from_loader(name, loader=None)
    assert spec is not None
    mod = importlib.util.module_from_spec(spec)
    exec(compile(source, f"<{name}>", "exec"), mod.__dict__)
    return mod


def fingerprint() -> dict[str, Any]:
    import torch
    import triton

    fp: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__,
                          "triton": triton.__version__}
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        fp.update(gpu=props.name, sms=props.multi_processor_count, cuda=torch.version.cuda,
                  memory_gib=round(props.total_memory / 2**30, 1))
    return fp


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, default=str))
