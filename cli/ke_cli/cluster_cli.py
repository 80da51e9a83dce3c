"""Command-line side of ``kernelevolve up`` / ``down`` (the logic is in ``cluster.py``)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ke_cli.cluster import ClusterState, default_state_dir, describe, down, running, up
from kernelevolve.config import Settings


def add_cluster_commands(sub: Any) -> None:
    u = sub.add_parser("up", help="start a local multi-process cluster on loopback and print its gateway")
    u.add_argument("--evaluators", type=int, default=1, help="evaluator processes (default 1)")
    u.add_argument("--json", action="store_true", help="print one JSON object (gateway, state_dir, processes)")
    u.add_argument("--state-dir", type=Path, default=None,
                   help="state folder (default $KE_CLUSTER_STATE_DIR or ~/.local/state/kernelevolve/cluster)")
    u.add_argument("--ready-timeout", type=float, default=300.0, help="seconds to wait for every service")
    d = sub.add_parser("down", help="stop the local cluster started by `kernelevolve up`")
    d.add_argument("--json", action="store_true")
    d.add_argument("--state-dir", type=Path, default=None)


def run_cluster_command(args: argparse.Namespace, settings: Settings) -> int:
    state = args.state_dir or default_state_dir(settings)
    if args.command == "up":
        cluster: ClusterState = up(settings, state, evaluators=args.evaluators, ready_timeout_s=args.ready_timeout,
                                   config_path=args.config)
        info = describe(cluster, state)
        if args.json:
            sys.stdout.write(json.dumps(info, indent=2) + "\n")
        else:
            sys.stdout.write(f"{cluster.gateway}\n")
            sys.stderr.write(f"KernelEvolve local cluster up: gateway {cluster.gateway}, "
                             f"{args.evaluators} evaluator(s); state and logs in {state}\n"
                             f"  kernelevolve optimize SPEC --gateway {cluster.gateway}\n"
                             "  kernelevolve down\n")
        return 0
    was = running(state)
    stopped = down(state)
    if args.json:
        sys.stdout.write(json.dumps({"stopped": stopped, "gateway": was.gateway if was else None}) + "\n")
    elif stopped:
        sys.stderr.write(f"KernelEvolve local cluster stopped ({len(stopped)} processes).\n")
    else:
        sys.stderr.write("No local cluster is running.\n")
    return 0
