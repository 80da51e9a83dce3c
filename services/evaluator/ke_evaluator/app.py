"""Composition root of the evaluator service."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from ke_evaluator.grpc_server import EvaluatorServicer
from ke_evaluator.service import EvaluatorService
from kernelevolve.bus.subjects import Subjects
from kernelevolve.config import EvaluatorSettings, Settings
from kernelevolve.grpc_util import start_server
from kernelevolve.ports.judge import JudgePort
from kernelevolve.runtime import ServiceHandle, connect_bus
from kernelevolve.store import store_from_settings
from kernelevolve.v1 import services_pb2_grpc as sgrpc


def detect_hardware_kind(settings: EvaluatorSettings) -> str:
    if settings.hardware_kind != "auto":
        return settings.hardware_kind
    import torch

    return "nvidia" if torch.cuda.is_available() else "cpu"


def make_judge(settings: EvaluatorSettings, hardware_kind: str, stack: AsyncExitStack) -> JudgePort:
    from ke_evaluator.judge import EvalOptions, Judge

    judge = Judge(EvalOptions(
        device="cuda" if hardware_kind == "nvidia" else "cpu",
        correctness_trials=settings.correctness_trials,
        compile_timeout_s=settings.compile_timeout_s,
        run_timeout_s=settings.run_timeout_s,
        scratch_dir=Path(settings.scratch_dir) if settings.scratch_dir else None,
        parallel_workers=max(1, settings.parallel_workers),
    ))

    async def close() -> None:
        # By now the consumers are stopped (EvaluatorService.stop): nobody waits for a running
        # evaluation, so its worker is killed instead of running on to its timeout; in a
        # thread, so that the event loop keeps serving the other services' shutdown.
        await asyncio.to_thread(judge.close, True)

    stack.push_async_callback(close)
    return judge


async def start(settings: Settings, stack: AsyncExitStack, *, bus: Any = None, store: Any = None,
                judge: JudgePort | None = None, port: int | None = None) -> ServiceHandle:
    hardware_kind = detect_hardware_kind(settings.evaluator)
    bus = bus or await connect_bus(settings.bus, f"evaluator-{hardware_kind}", stack)
    if store is None:
        store = store_from_settings(settings.store)
        stack.push_async_callback(store.close)
    judge = judge or make_judge(settings.evaluator, hardware_kind, stack)
    service = EvaluatorService(bus, store, Subjects(settings.bus.subject_prefix), judge, hardware_kind,
                               parallel=max(1, settings.evaluator.parallel_workers))
    server = await start_server(
        settings.grpc.host, settings.grpc.evaluator_port if port is None else port,
        [lambda s: sgrpc.add_EvaluatorServicer_to_server(EvaluatorServicer(service), s)],
        ["kernelevolve.v1.Evaluator"])
    stack.push_async_callback(server.stop)
    await service.subscribe()
    stack.push_async_callback(service.stop)
    return ServiceHandle("evaluator", server.port, service)
