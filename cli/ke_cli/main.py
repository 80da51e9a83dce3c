"""``kernelevolve``: optimise an operator, or judge one candidate.

    kernelevolve optimize examples/ops/softmax_rows.py --budget 8 [--out DIR] [--json]
    kernelevolve eval SPEC CANDIDATE [--json] [--precision default|strict|tf32]
    kernelevolve up [--evaluators N] [--json]     a local multi-process cluster on loopback
    kernelevolve down
    kernelevolve report RUN_DIR|SESSION_ID [--open] [--json]
    kernelevolve export RUN_DIR [--as module|torch-library] [--name NS::op] [--out DIR] [--json]
    kernelevolve config show [--json]
    kernelevolve knowledge add PATH... --hardware NAME | knowledge search QUERY   (ke_cli.knowledge_cli)
    kernelevolve skills list|show|retire
    kernelevolve resume RUN_DIR [--budget N] [--json]
    kernelevolve sessions list|show|cancel ... [--json]
    kernelevolve agent next [--session ID] [--json] / agent submit --request ID FILE [--json]

Exit codes: 0 success (a correct kernel was found / the candidate is correct),
1 no correct kernel / candidate not correct / the session failed / the spec has nothing to
compute (its reference only reshapes its inputs: one line says so), 2 bad input (also a
session that failed because of its spec), 3 a resource limit of ours (the spec is valid
but its reference ran out of memory inside the evaluator's limits), 130 interrupted
(SIGINT), 143 terminated (SIGTERM).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import shutil
import signal
import sys
from contextlib import AsyncExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

from ke_cli import commands, knowledge_cli, real_size
from ke_cli.client import KernelEvolveClient
from ke_cli.console import CPU_NOTE, Progress, status_name
from ke_cli.live import make_progress, working
from ke_cli.llm_flags import add_llm_flags, apply_llm_flags
from kernelevolve import logging as ke_logging
from kernelevolve.baseline_best import BASELINE_NAMES, baseline_best
from kernelevolve.config import Settings, load_settings
from kernelevolve.errors import (
    InvalidArgumentError,
    InvalidSpecError,
    KernelEvolveError,
    NothingToComputeError,
    ResourceLimitError,
)
from kernelevolve.ids import new_session_id
from kernelevolve.precision import CONTRACTS
from kernelevolve.spec import load_spec_file
from kernelevolve.spec_shrink import FitProbe, FitResult
from kernelevolve.v1 import common_pb2 as pb

log = logging.getLogger("kernelevolve.cli")


EXIT_RESOURCE_LIMIT = 3


class UsageError(Exception):
    """Bad command-line input: reported in one line, exit code 2."""


# How long a stopped session may take to write its summary before the CLI leaves anyway.
_STOP_GRACE_S = 60.0


class _Stop:
    """SIGINT or SIGTERM while optimising, sent by a terminal, ``kill``, ``timeout``, CI or
    an orchestrator: the first one stops the session the way Ctrl-C does (cancel it, wait
    for its summary and best kernel, exit 128 + signal); before the session is followed,
    or on a second signal, the command stops at once (its resources still closed in order)."""

    def __init__(self, task: asyncio.Task[Any]) -> None:
        self._task = task
        self.signum = 0
        self.following = False
        self.requested = asyncio.Event()

    def on_signal(self, signum: int) -> None:
        if self.following and not self.requested.is_set():
            self.signum = signum
            self.requested.set()
            return
        self.signum = self.signum or signum
        self._task.cancel()

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kernelevolve", description="Write and tune GPU kernels for PyTorch operators.")
    p.add_argument("--config", help="YAML config file (default: $KE_CONFIG)")
    p.add_argument("-v", "--verbose", action="store_true", help="show service logs")
    sub = p.add_subparsers(dest="command", required=True)

    o = sub.add_parser("optimize", help="search for a faster, verified ModelNew for an operator spec")
    o.add_argument("spec", type=Path, help="Python file defining Model, get_inputs(), get_init_inputs()")
    o.add_argument("--budget", type=int, default=None, help="candidates to evaluate (default 8)")
    o.add_argument("--out", type=Path, default=None, help="run folder (default runs/<session-id>)")
    o.add_argument("--json", action="store_true", help="print one JSON object instead of progress")
    o.add_argument("--quiet", action="store_true", help="no progress, only the final summary")
    o.add_argument("--strategy", default="", help="one-shot, linear, greedy (default), beam, mcts or islands")
    o.add_argument("--max-inflight", type=int, default=0, help="candidates evaluated concurrently at most")
    o.add_argument("--seeds", type=int, default=0, help="draft phase: independent samples from the reference "
                   "before expansion (default: the strategy's own)")
    o.add_argument("--time-limit", type=float, default=0.0, metavar="S",
                   help="wall-clock budget in seconds: the session then ends with its best verified kernel")
    o.add_argument("--plateau", type=int, default=0, metavar="N",
                   help="end after N evaluations without a CI-separated improvement")
    o.add_argument("--target-roofline", type=float, default=0.0, metavar="F",
                   help="end once a correct candidate reaches this fraction (0..1] of the roofline")
    o.add_argument("--baseline", choices=("eager", "compile"), default="",
                   help="fitness is the speedup over eager PyTorch (default) or torch.compile")
    o.add_argument("--precision", choices=CONTRACTS, default="",
                   help="precision contract: default (PyTorch's defaults plus the spec's own flags: cuDNN TF32 on, "
                   "matmul TF32 off), strict (IEEE float32 everywhere) or tf32 (matmuls too)")
    o.add_argument("--tune-share", type=float, default=None, metavar="F",
                   help="tuning stage: the last fraction F of the budget sweeps the launch configurations (tiles, "
                   "warps, stages) of the best candidates (default 0.25; 0 = no tuning stage)")
    o.add_argument("--tune-elite", type=int, default=None, metavar="K",
                   help="how many of the best candidates the tuning stage sweeps (default 2)")
    o.add_argument("--gateway", default="", help="use a running gateway (host:port) instead of the embedded stack")
    o.add_argument("--timeout", type=float, default=3600.0, help="seconds before the session is cancelled")
    o.add_argument("--token", default="", help="bearer token for --gateway (default: $KE_CLIENT_TOKEN, or the "
                   "local cluster's own token)")
    o.add_argument("--tls", action="store_true", help="connect to --gateway over TLS")
    o.add_argument("--synthesizer", default="", help="who writes candidates in the embedded stack: offline "
                   "(default), llm, offline+llm, or agent (answered with `kernelevolve agent next/submit`)")
    add_llm_flags(o)
    o.add_argument("--fallback", default=None, choices=["offline", ""],
                   help="offline: use the offline compiler when the LLM endpoint is down (recorded per candidate)")
    o.add_argument("--tls-ca", default="", help="CA certificate (PEM) that signed the gateway's certificate")

    e = sub.add_parser("eval", help="judge one candidate file against one spec")
    e.add_argument("spec", type=Path)
    e.add_argument("candidate", type=Path)
    e.add_argument("--json", action="store_true", help="print the full verdict as JSON")
    e.add_argument("--trials", type=int, default=None, help="correctness trials (default from config, 5)")
    e.add_argument("--precision", choices=CONTRACTS, default="",
                   help="precision contract (default: evaluator.precision, 'default')")
    e.add_argument("--tier", choices=("full", "screen"), default="full",
                   help="full protocol, or a screen: one input set, a short timing (a provisional verdict)")

    from ke_cli.cluster_cli import add_cluster_commands

    add_cluster_commands(sub)
    commands.add_commands(sub)
    knowledge_cli.add_commands(sub)
    from ke_cli.sessions import add_session_commands

    add_session_commands(sub)
    from ke_cli.agent_cli import add_agent_commands

    add_agent_commands(sub)
    return p


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    try:
        settings = load_settings(args.config)
    except KernelEvolveError as exc:
        _fail(f"configuration: {exc}")
    level = "INFO" if args.verbose else "WARNING"
    ke_logging.configure("console", level)
    try:
        if args.command == "optimize":
            code = asyncio.run(_optimize(args, settings))
        elif args.command in ("up", "down"):
            from ke_cli.cluster_cli import run_cluster_command

            code = run_cluster_command(args, settings)
        elif args.command in ("resume", "sessions"):
            from ke_cli.sessions import Follow, run_session_command

            code = run_session_command(args, settings, Follow(follow=_follow, make_stop=_Stop))
        elif args.command == "agent":
            from ke_cli.agent_cli import run_agent_command

            code = run_agent_command(args, settings)
        elif args.command in commands.COMMANDS:
            code = commands.run(args, settings)
        elif args.command in knowledge_cli.COMMANDS:
            code = knowledge_cli.run(args, settings)
        else:
            code = _eval(args, settings)
    except (UsageError, InvalidSpecError, InvalidArgumentError) as exc:
        _fail(str(exc))
    except NothingToComputeError as exc:
        # Neither the user's error (2) nor a limit of ours (3): the spec is valid, and there is
        # no kernel to write for it ("...: nothing to compute: the reference only reshapes ...").
        sys.stderr.write(f"kernelevolve: {exc}\n")
        code = 1
    except ResourceLimitError as exc:
        # Not the user's input: a limit of this installation (what was needed, the limit and
        # the setting are in the message).
        sys.stderr.write(f"kernelevolve: {exc}\n")
        code = EXIT_RESOURCE_LIMIT
    except KeyboardInterrupt:
        sys.stderr.write("kernelevolve: interrupted\n")
        code = 130
    except KernelEvolveError as exc:
        sys.stderr.write(f"kernelevolve: {exc}\n")
        code = 1
    raise SystemExit(code)


def _fail(message: str) -> None:
    sys.stderr.write(f"kernelevolve: error: {message}\n")
    raise SystemExit(2)


# -- eval -------------------------------------------------------------------------------


def _eval(args: argparse.Namespace, settings: Settings) -> int:
    from ke_evaluator.judge import Judge, options_from_settings

    spec = load_spec_file(args.spec)
    if not args.candidate.is_file():
        raise UsageError(f"candidate file {args.candidate} does not exist")
    candidate = args.candidate.read_text(encoding="utf-8")
    ev_settings = settings.evaluator
    opts = options_from_settings(ev_settings, correctness_trials=args.trials or ev_settings.correctness_trials,
                                 precision=args.precision or ev_settings.precision)
    with Judge(opts) as judge, working(f"judging {args.candidate.name}", quiet=args.json):
        judge.validate_spec(spec.source, spec.name).raise_if_failed(str(args.spec))
        verdict = judge.evaluate(spec.source, candidate, args.candidate.stem, tier=args.tier)
    if args.json:
        sys.stdout.write(json.dumps(verdict.to_dict(), indent=2) + "\n")
    else:
        out = sys.stdout
        out.write(f"{args.candidate}: {verdict.status}" + (" (screened: provisional)" if verdict.tier == "screen"
                                                            else "") + "\n")
        out.write(f"  reason: {verdict.reason}\n")
        if verdict.precision is not None:
            out.write(f"  precision: {verdict.precision.describe()}\n")
        c = verdict.correctness
        if c is not None and c.error_ratio is not None:
            out.write(f"  error vs float64 {c.candidate_error:.3g} = {c.error_ratio:.2g}x the reference's own "
                      f"({c.reference_error:.3g}); bound: {c.bound}\n")
        if verdict.is_correct and verdict.candidate_timing and verdict.baseline_timing:
            out.write(f"  candidate {verdict.candidate_timing.median_ms:.4f} ms, "
                      f"eager {verdict.baseline_timing.median_ms:.4f} ms, speedup {verdict.speedup:.3f}x\n")
        for w in verdict.warnings:
            out.write(f"  warning: {w}\n")
        if verdict.interpreted:
            out.write(f"  note: {CPU_NOTE}\n")
    return 0 if verdict.is_correct else 1


# -- optimize ------------------------------------------------------------------------------


def _prepare_run_dir(out: Path | None, session_id: str) -> tuple[Path, bool]:
    run_dir = out if out is not None else Path("runs") / session_id
    if run_dir.exists():
        if not run_dir.is_dir():
            raise UsageError(f"--out {run_dir} exists and is not a folder")
        if any(run_dir.iterdir()):
            raise UsageError(f"run folder {run_dir} already exists and is not empty; choose another --out")
        return run_dir, False
    run_dir.mkdir(parents=True)
    return run_dir, True


async def _optimize(args: argparse.Namespace, settings: Settings) -> int:
    task = asyncio.current_task()
    assert task is not None
    stop = _Stop(task)
    loop = asyncio.get_running_loop()
    signals = (signal.SIGINT, signal.SIGTERM)
    for sig in signals:
        loop.add_signal_handler(sig, stop.on_signal, sig)
    try:
        return await _optimize_session(args, settings, stop)
    except asyncio.CancelledError:
        if not stop.signum:
            raise
        task.uncancel()
        sys.stderr.write(f"kernelevolve: {signal.Signals(stop.signum).name}: stopped\n")
        return stop.exit_code
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)


async def _optimize_session(args: argparse.Namespace, settings: Settings, stop: _Stop) -> int:
    spec = load_spec_file(args.spec)  # static checks before anything is created
    budget = args.budget if args.budget is not None else settings.search.default_budget
    if budget < 1:
        raise UsageError("--budget must be at least 1")
    if args.max_inflight < 0:
        raise UsageError("--max-inflight must be positive")
    for flag, value in (("--seeds", args.seeds), ("--time-limit", args.time_limit), ("--plateau", args.plateau)):
        if value < 0:
            raise UsageError(f"{flag} must be positive")
    if not 0 <= args.target_roofline <= 1:
        raise UsageError("--target-roofline must be a fraction in (0, 1]")
    if args.tune_share is not None and not 0 <= args.tune_share < 1:
        raise UsageError("--tune-share must be a fraction in [0, 1)")
    if args.tune_elite is not None and args.tune_elite < 1:
        raise UsageError("--tune-elite must be at least 1")
    if args.synthesizer:
        if args.gateway:
            raise UsageError("--synthesizer chooses the embedded stack's synthesizer; a cluster's is set in its "
                             "configuration (KE_SYNTHESIZER_KIND)")
        settings = replace(settings, synthesizer=replace(settings.synthesizer, kind=args.synthesizer))
    session_id = new_session_id()
    run_dir, created = _prepare_run_dir(args.out, session_id)
    started = False
    fit: FitResult | None = None
    # Sized while the embedded stack starts; a gateway's evaluators may have GPUs.
    probe = (FitProbe(spec.source, real_size.budget(settings),
                      import_timeout_s=settings.evaluator.spec_import_timeout_s)
             if not args.gateway and real_size.judged_on_cpu(settings) else None)
    try:
        async with AsyncExitStack() as stack:
            from ke_cli import runstate

            # Written first: a run killed at any later point can be found and resumed.
            runstate.write_record(run_dir, runstate.RunRecord(
                session_id=session_id, spec=str(args.spec), spec_name=spec.name, budget=budget,
                strategy=args.strategy, max_inflight=args.max_inflight, gateway=args.gateway))
            stack.enter_context(runstate.hold(run_dir))
            if args.gateway:
                target = args.gateway
            else:
                from ke_cli.embedded import start_embedded

                handles = await start_embedded(synthesizer_settings(args, settings), run_dir, stack)
                target = handles.gateway.target
                if settings.synthesizer.kind == "agent":
                    from ke_cli.agent_cli import register_embedded

                    stack.callback(register_embedded(session_id, target, run_dir))
            from ke_cli.credentials import client_options

            creds = client_options(settings, args.gateway, token=args.token, tls=args.tls, tls_ca=args.tls_ca)
            client = KernelEvolveClient(target, **creds.kwargs())  # type: ignore[arg-type]
            stack.push_async_callback(client.close)
            await client.wait_ready()
            if probe is not None:
                spec, fit = await asyncio.to_thread(real_size.fit_spec, spec, probe, args.json)
                if fit is not None:
                    real_size.record(run_dir, fit)
            session = await client.start_session(spec, budget, strategy=args.strategy, session_id=session_id,
                                                 max_inflight=args.max_inflight, seeds=args.seeds,
                                                 time_limit_s=args.time_limit, plateau=args.plateau,
                                                 target_roofline=args.target_roofline, baseline=args.baseline,
                                                 tune_share=args.tune_share, tune_elite=args.tune_elite,
                                                 precision=args.precision)
            started = True
            if settings.synthesizer.kind == "agent" and not args.gateway and not args.json:
                sys.stderr.write(f"kernelevolve: candidates come from outside: answer with `kernelevolve agent next "
                                 f"--session {session_id}` and `kernelevolve agent submit`\n")
            return await _follow(args, client, session, run_dir, budget, stop, fit=fit)
    finally:
        if probe is not None:
            probe.close()
        if not started and created:
            shutil.rmtree(run_dir, ignore_errors=True)  # bad input: leave nothing half-written
        elif not started:
            (run_dir / "session.json").unlink(missing_ok=True)  # a given empty --out stays empty


def synthesizer_settings(args: argparse.Namespace, settings: Settings) -> Settings:
    """The synthesizer flags of ``optimize`` over the configured settings."""
    llm = apply_llm_flags(args, settings.llm)
    if args.fallback is not None:
        llm = replace(llm, fallback=args.fallback)
    kind = args.synthesizer or settings.synthesizer.kind
    return replace(settings, llm=llm, synthesizer=replace(settings.synthesizer, kind=kind))


async def _follow(args: argparse.Namespace, client: KernelEvolveClient, session: pb.Session, run_dir: Path,
                  budget: int, stop: _Stop, fit: FitResult | None = None) -> int:
    sid = session.session_id
    progress = make_progress(budget, quiet=args.json or getattr(args, "quiet", False))
    progress.line(f"KernelEvolve session {sid}: {session.spec.name}, budget {budget}, "
                  f"hardware {session.hardware.kind}, run folder {run_dir}")

    async def follow() -> None:
        async for env in client.watch(sid):
            progress.on_event(env)

    following = asyncio.create_task(follow(), name=f"follow:{sid}")
    stopping = asyncio.create_task(stop.requested.wait(), name="stop-signal")
    stop.following = True
    try:
        await asyncio.wait({following, stopping}, timeout=args.timeout, return_when=asyncio.FIRST_COMPLETED)
        if not following.done():
            if stopping.done():
                progress.line(f"  {signal.Signals(stop.signum).name}: cancelling the session")
            else:
                progress.line(f"  timeout after {args.timeout:.0f}s: cancelling the session")
            await client.cancel(sid)
            try:
                await asyncio.wait_for(asyncio.shield(following), timeout=_STOP_GRACE_S)
            except TimeoutError:
                progress.line(f"  the session did not end within {_STOP_GRACE_S:.0f}s of cancelling")
        following.result()  # a broken watch is an error, not a silent end
    finally:
        progress.close()
        stop.following = False
        for t in (following, stopping):
            t.cancel()
        await asyncio.gather(following, stopping, return_exceptions=True)
    final = await client.get_session(sid)
    if args.gateway:
        await client.export(sid, run_dir)
    summary = await _summary(client, final, run_dir, progress.interpreted)
    shapes = fit.to_dict() if fit is not None else real_size.recorded(run_dir)
    if shapes:
        summary["judged_shapes"] = shapes
    summary["report"] = commands.write_session_report(run_dir)
    if args.json:
        sys.stdout.write(json.dumps(summary, indent=2) + "\n")
    else:
        _print_summary(progress, summary)
    if stop.signum:
        return stop.exit_code
    if summary["status"] == "failed":
        sys.stderr.write(f"kernelevolve: session failed: {summary['error']}\n")
        return 2 if summary["bad_input"] else 1
    return 0 if summary["best"] else 1


async def _summary(client: KernelEvolveClient, session: pb.Session, run_dir: Path,
                   interpreted: bool) -> dict[str, Any]:
    best: dict[str, Any] | None = None
    if session.best_candidate_id:
        resp = await client.get_candidate(session.session_id, session.best_candidate_id)
        report = json.loads(resp.report_json) if resp.report_json else {}
        best = {
            "candidate_id": session.best_candidate_id,
            "status": status_name(resp.node.status),
            # The re-time in a fresh worker when the finalist had one (the reported figure), the
            # first evaluation's beside it: nothing is called best on one timing.
            "speedup": session.best_speedup,
            "speedup_source": "fresh-worker re-time" if resp.node.retimed else "first evaluation",
            "first_speedup": resp.node.first_fitness if resp.node.retimed else session.best_speedup,
            "path": str(run_dir / "best_kernel.py"),
            "transformation": resp.candidate.transformation.name,
            "reason": report.get("reason", ""),
            "candidate_ms": (report.get("candidate_timing") or {}).get("median_ms"),
            "baseline_ms": (report.get("baseline_timing") or {}).get("median_ms"),
            "device": report.get("device", ""),
            "precision": (report.get("precision") or {}).get("description", ""),
        }
        interpreted = interpreted or bool(report.get("interpreted"))
    out: dict[str, Any] = {
        "session_id": session.session_id,
        "status": pb.SessionStatus.Name(session.status).removeprefix("SESSION_STATUS_").lower(),
        "run_dir": str(run_dir),
        "spec": session.spec.name,
        "hardware": session.hardware.kind,
        "budget": session.budget,
        "generated": session.generated,
        "evaluated": session.evaluated,
        "best": best,
        "interpreted": interpreted,
        "error": session.error,
        "bad_input": session.bad_input,
        "common_failure": session.common_failure,
        "end_reason": session.end_reason,
        "baseline": session.baseline or "eager",
        "precision": session.precision or "default",
        "verdict": baseline_best(session.best_speedup if best else None, session.baseline or "eager"),
    }
    if interpreted:
        out["note"] = CPU_NOTE
    return out




def _print_summary(progress: Progress, s: dict[str, Any]) -> None:
    progress.line("")
    progress.line(f"Session {s['session_id']} {s['status']}: {s['evaluated']} of {s['budget']} candidates evaluated.")
    if s.get("end_reason"):
        progress.line(f"Ended: {s['end_reason']}.")
    best = s["best"]
    if best:
        over = BASELINE_NAMES.get(s.get("baseline", ""), "eager PyTorch")
        retimed = best.get("speedup_source") == "fresh-worker re-time"
        first = f"; first evaluation {best['first_speedup']:.3f}x" if retimed else ""
        progress.line(f"Best: {best['candidate_id']} ({best['transformation']}) verdict {best['status']}, "
                      f"speedup {best['speedup']:.3f}x vs {over} on {best['device'] or s['hardware']} "
                      f"({best.get('speedup_source', 'first evaluation')}{first}; "
                      f"precision {s.get('precision', 'default')}).")
        if best.get("precision"):
            progress.line(f"Precision: {best['precision']}")
        progress.line(f"Kernel: {best['path']}  (drop-in ModelNew)")
        if s.get("verdict"):
            progress.line(f"{s['verdict']}.")
    elif s["common_failure"]:
        progress.line(f"No correct candidate: {s['common_failure']}")
    else:
        progress.line("No correct candidate was found; see the reports in the run folder.")
    if s["error"]:
        progress.line(f"Failed: {s['error']}")
    progress.line(f"Run folder: {s['run_dir']} (candidates/, reports/, lineage.json)")
    if s.get("report"):
        progress.line(f"Report: {s['report']}  (kernelevolve report {s['run_dir']} --open)")
    if s.get("judged_shapes"):
        progress.line(f"Shapes: {s['judged_shapes']['description']}.")
    if s.get("note"):
        progress.line(f"Note: {s['note']}")


if __name__ == "__main__":
    main()
