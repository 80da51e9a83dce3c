"""The event bus port (``EventBus``), its NATS JetStream adapter and an in-memory double."""

from kernelevolve.bus.port import EventBus, Handler, KeyValueEntry, Subscription

__all__ = ["EventBus", "Handler", "KeyValueEntry", "Subscription"]
