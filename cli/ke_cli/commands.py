"""The ``report``, ``export`` and ``config show`` commands (``ke_cli.main`` registers them).

    kernelevolve report RUN_DIR|SESSION_ID [--open] [--out FILE] [--gateway HOST:PORT] [--json]
    kernelevolve export RUN_DIR [--as module|torch-library] [--name NS::op] [--out DIR] [--force] [--json]
    kernelevolve config show [--json]

Each returns an exit code: 0 done, 1 nothing to show/ship, 2 bad input (raised as
``InvalidArgumentError`` and reported by ``main``).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import re
import sys
import webbrowser
from pathlib import Path
from typing import Any

from kernelevolve.config import Settings
from kernelevolve.errors import InvalidArgumentError

COMMANDS = ("report", "export", "config")


def add_commands(sub: Any) -> None:
    r = sub.add_parser("report", help="write (and open) a session's self-contained HTML report")
    r.add_argument("target", help="a run folder, or a session id (runs/<id>, or fetched from --gateway)")
    r.add_argument("--out", type=Path, default=None, help="HTML file to write (default RUN_DIR/report.html)")
    r.add_argument("--open", action="store_true", help="open the report in a browser")
    r.add_argument("--gateway", default="", help="fetch the report of SESSION_ID from a running gateway")
    r.add_argument("--json", action="store_true", help="print one JSON object")

    x = sub.add_parser("export", help="ship the best kernel of a run folder as a module or a torch.library op")
    x.add_argument("run_dir", type=Path)
    x.add_argument("--as", dest="fmt", choices=("module", "torch-library"), default="torch-library",
                   help="standalone module, or a torch.library custom op as well (default)")
    x.add_argument("--name", default=None, help="custom op name NS::op (default kernelevolve::<spec>)")
    x.add_argument("--out", type=Path, default=None, help="folder to write (default RUN_DIR/export/<as>)")
    x.add_argument("--force", action="store_true", help="replace a non-empty --out folder")
    x.add_argument("--json", action="store_true", help="print one JSON object")

    c = sub.add_parser("config", help="configuration")
    csub = c.add_subparsers(dest="config_command", required=True)
    show = csub.add_parser("show", help="print the effective configuration, secrets masked")
    show.add_argument("--json", action="store_true", help="print it as JSON")


def run(args: argparse.Namespace, settings: Settings) -> int:
    if args.command == "report":
        return _report(args)
    if args.command == "export":
        return _export(args)
    return _config_show(args, settings)


# -- report -----------------------------------------------------------------------------


def _report(args: argparse.Namespace) -> int:
    from kernelevolve.report import REPORT_NAME, load_run_folder, render_html

    target = Path(args.target)
    if args.gateway:
        from ke_cli.client import KernelEvolveClient

        async def fetch() -> str:
            async with KernelEvolveClient(args.gateway) as client:
                return await client.get_report(args.target)

        html = asyncio.run(fetch())
        local = Path("runs") / args.target
        path = args.out or (local / REPORT_NAME if local.is_dir() else Path(f"{args.target}.report.html"))
        info: dict[str, Any] = {"session_id": args.target, "source": f"gateway {args.gateway}"}
    else:
        run_dir = target if target.is_dir() else Path("runs") / args.target
        if not run_dir.is_dir():
            raise InvalidArgumentError(f"{args.target} is neither a run folder nor a session id under runs/ "
                                       "(use --gateway HOST:PORT for a remote session)")
        try:
            run = load_run_folder(run_dir)
        except FileNotFoundError as exc:
            raise InvalidArgumentError(str(exc)) from exc
        html = render_html(run)
        path = args.out or run_dir / REPORT_NAME
        info = {"session_id": run.session_id, "source": str(run_dir), "candidates": len(run.nodes),
                "best": run.best_id or None, "interpreted": run.interpreted}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(html, encoding="utf-8")
    info["report"] = str(path)
    if args.open:
        info["opened"] = webbrowser.open(path.resolve().as_uri())
    if args.json:
        sys.stdout.write(json.dumps(info, indent=2) + "\n")
    else:
        sys.stdout.write(f"Report: {path}\n")
    return 0


def write_session_report(run_dir: Path) -> str | None:
    """Write ``run_dir/report.html`` at the end of a session; a report that cannot be drawn
    never fails the session (None, and the reason in the log)."""
    import logging

    from kernelevolve.report import write_report

    try:
        return str(write_report(run_dir))
    except Exception:  # noqa: BLE001 - the report is a by-product
        logging.getLogger("kernelevolve.cli").warning("could not write the session report", exc_info=True)
        return None


# -- export ------------------------------------------------------------------------------


def _export(args: argparse.Namespace) -> int:
    from ke_cli.export import export_run

    result = export_run(args.run_dir, args.fmt, args.name, args.out, force=args.force)
    if args.json:
        sys.stdout.write(json.dumps(result.to_dict(), indent=2) + "\n")
        return 0
    out = sys.stdout
    out.write(f"Exported candidate {result.candidate_id} ({result.speedup:.3g}x) as {result.format} "
              f"into {result.out_dir}\n")
    if result.format == "torch-library":
        out.write(f"  custom op: torch.ops.{result.op_name.replace('::', '.')} (import {result.out_dir}/op.py)\n")
    out.write(f"  module:    ExportedModel in {result.out_dir}/module.py\n")
    shapes = "; ".join("(" + ", ".join(f"{a['dtype']}{a['shape']}" if a["kind"] == "tensor" else a["kind"]
                                       for a in s["args"]) + ")" for s in result.verified_shapes)
    out.write(f"  verified on inputs {shapes}; other shapes are refused\n")
    out.write(f"  test:      pytest {result.out_dir / 'test_export.py'}\n")
    return 0


# -- config show -----------------------------------------------------------------------------

_SECRET = re.compile(r"(secret|password|passwd|token|api_key|access_key|credential|private)", re.I)
_URL_CREDS = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^:@/]*):(?P<pw>[^@/]*)@", re.I)


def masked(value: Any, key: str = "") -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: masked(getattr(value, f.name), f.name) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {k: masked(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):  # llm.endpoints
        return [masked(v, key) for v in value]
    if isinstance(value, str):
        # "api_key_env" / "api_key_file" say where a secret is read, not the secret.
        if value and _SECRET.search(key) and not key.endswith(("_env", "_file")):
            return "****"
        return _URL_CREDS.sub(lambda m: f"{m['scheme']}{m['user']}:****@", value)
    return value


def _config_show(args: argparse.Namespace, settings: Settings) -> int:
    doc = masked(settings)
    if args.json:
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        import yaml

        sys.stdout.write("# effective configuration (defaults, then --config/KE_CONFIG, then KE_* variables, "
                         "OPENAI_BASE_URL for an unset llm.base_url); secrets masked, LLM keys never read here\n")
        sys.stdout.write(yaml.safe_dump(doc, sort_keys=False))
    return 0
