"""Regenerate the Python gRPC/protobuf code from protos/ into libs/kernelevolve/v1/.

Usage: python scripts/gen_protos.py [--out DIR]

The generated files are committed; tests/unit/test_protos_fresh.py regenerates into
a temporary folder and fails when the committed copy is stale.
"""

from __future__ import annotations

import argparse
import sys
from importlib import resources
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "protos"
DEFAULT_OUT = ROOT / "libs"


def generate(out: Path) -> list[Path]:
    from grpc_tools import protoc

    protos = sorted(PROTO_ROOT.glob("kernelevolve/v1/*.proto"))
    well_known = resources.files("grpc_tools") / "_proto"
    args = [
        "protoc",
        f"-I{PROTO_ROOT}",
        f"-I{well_known}",
        f"--python_out={out}",
        f"--pyi_out={out}",
        f"--grpc_python_out={out}",
        *[str(p.relative_to(PROTO_ROOT)) for p in protos],
    ]
    code = protoc.main(args)
    if code != 0:
        raise SystemExit(f"protoc failed with exit code {code}")
    pkg = out / "kernelevolve" / "v1"
    header = '"""Generated from protos/kernelevolve/v1 by scripts/gen_protos.py. Do not edit."""\n'
    (pkg / "__init__.py").write_text(header)
    return sorted(pkg.glob("*.py*"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ns = parser.parse_args()
    ns.out.mkdir(parents=True, exist_ok=True)
    for path in generate(ns.out):
        sys.stdout.write(f"{path}\n")


if __name__ == "__main__":
    main()
