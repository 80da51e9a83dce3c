"""Process lifecycle shared by every service entrypoint.

``serve(name, start)`` reads settings once, configures logging once, runs ``start``
inside an ``AsyncExitStack`` that owns every resource, and waits for SIGTERM/SIGINT;
leaving the stack stops gRPC servers (with grace) and drains bus connections.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

from kernelevolve import logging as ke_logging
from kernelevolve.config import BusSettings, Settings, load_settings
from kernelevolve.errors import KernelEvolveError

log = logging.getLogger(__name__)

StartFn = Callable[[Settings, AsyncExitStack], Awaitable[Any]]


@dataclass
class ServiceHandle:
    name: str
    port: int
    service: Any

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"


async def connect_bus(settings: BusSettings, name: str, stack: AsyncExitStack) -> Any:
    from kernelevolve.bus.jetstream import JetStreamBus

    bus = await JetStreamBus.connect(settings, name=f"kernelevolve-{name}")
    stack.push_async_callback(bus.close)
    return bus


async def _serve(name: str, settings: Settings, start: StartFn) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    async with AsyncExitStack() as stack:
        handle = await start(settings, stack)
        metrics_port = None
        if settings.metrics.enabled:
            from kernelevolve.metrics import start_metrics_server

            metrics_port, stop_metrics = start_metrics_server(settings.grpc.host, settings.metrics.port)
            stack.callback(stop_metrics)
        log.info("service ready", extra={"service": name, "port": getattr(handle, "port", None),
                                         "metrics_port": metrics_port})
        await stop.wait()
        log.info("service stopping", extra={"service": name})


def serve(name: str, start: StartFn, argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog=f"kernelevolve-{name}", description=f"Run the KernelEvolve {name} service.")
    parser.add_argument("--config", help="YAML config file (default: $KE_CONFIG); KE_* variables override it")
    ns = parser.parse_args(argv)
    try:
        settings = load_settings(ns.config)
    except KernelEvolveError as exc:
        parser.exit(2, f"kernelevolve-{name}: {exc}\n")
    ke_logging.configure("json" if settings.log_format == "json" else "console", settings.log_level)
    try:
        asyncio.run(_serve(name, settings, start))
    except KernelEvolveError as exc:
        log.error("service failed", extra={"service": name, "error": str(exc)})
        raise SystemExit(1) from exc
