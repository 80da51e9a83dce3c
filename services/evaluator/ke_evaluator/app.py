"""Composition root of the evaluator service."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from typing import Any

from ke_evaluator.grpc_server import EvaluatorServicer
from ke_evaluator.judge import Judge, options_from_settings, resolve_hardware_kind
from ke_evaluator.judge.options import host_gpus
from ke_evaluator.service import EvaluatorService
from kernelevolve.bus.subjects import Subjects
from kernelevolve.config import EvaluatorSettings, Settings
from kernelevolve.grpc_util import server_options, start_server
from kernelevolve.ports.judge import JudgePort
from kernelevolve.runtime import ServiceHandle, connect_bus
from kernelevolve.store import store_from_settings
from kernelevolve.v1 import services_pb2_grpc as sgrpc


def make_judge(settings: EvaluatorSettings, hardware_kind: str, stack: AsyncExitStack) -> JudgePort:
    judge = Judge(options_from_settings(settings, gpus=host_gpus(settings, hardware_kind)))

    async def close() -> None:
        # By now the consumers are stopped (EvaluatorService.stop): nobody waits for a running
        # evaluation, so its worker is killed instead of running on to its timeout; in a
        # thread, so that the event loop keeps serving the other services' shutdown.
        await asyncio.to_thread(judge.close, True)

    stack.push_async_callback(close)
    return judge


async def start(settings: Settings, stack: AsyncExitStack, *, bus: Any = None, store: Any = None,
                judge: JudgePort | None = None, port: int | None = None) -> ServiceHandle:
    hardware_kind = resolve_hardware_kind(settings.evaluator.hardware_kind)
    bus = bus or await connect_bus(settings.bus, f"evaluator-{hardware_kind}", stack)
    if store is None:
        store = store_from_settings(settings.store)
        stack.push_async_callback(store.close)
    judge = judge or make_judge(settings.evaluator, hardware_kind, stack)
    # One candidate at a time per worker: with several GPUs the Judge has a worker per GPU.
    parallel = max(1, settings.evaluator.parallel_workers, len(getattr(judge, "pins", ())))
    service = EvaluatorService(bus, store, Subjects(settings.bus.subject_prefix), judge, hardware_kind,
                               parallel=parallel,
                               max_attempts=settings.evaluator.max_attempts,
                               ack_wait_s=settings.evaluator.ack_wait_s, screen=settings.evaluator.screen)
    server = await start_server(
        settings.grpc.host, settings.grpc.evaluator_port if port is None else port,
        [lambda s: sgrpc.add_EvaluatorServicer_to_server(EvaluatorServicer(service), s)],
        ["kernelevolve.v1.Evaluator"], server_options(settings))
    stack.push_async_callback(server.stop)
    await service.subscribe()
    stack.push_async_callback(service.stop)
    return ServiceHandle("evaluator", server.port, service)
