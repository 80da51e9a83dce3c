"""Which launches a CUDA graph replay stands for.

A candidate with ``cuda_graph=on`` captures its forward once per input signature into a
``torch.cuda.CUDAGraph`` and replays it: a replay launches no Triton kernel through
``JITFunction.run``, so the launch counter alone sees none. The ledger wraps the graph
class's ``capture_begin`` / ``capture_end`` / ``replay`` (once per process, at class
level, before any candidate code): launches between begin and end are recorded for that
graph (they are recorded into the graph, not executed, so they do not count as launches
of the call), and a replay inside a recording adds the graph's launches to the
recorder, but only for a graph captured while that same candidate module was being
recorded. A graph captured elsewhere (in ``__init__``, outside any recording) or holding
none of the candidate's kernels adds nothing: its replay counts as no launch of its own.

``wrap(cls)`` takes any class with those three methods, so the accounting runs off CUDA
with an eager stand-in (tests/evaluator/test_graph_audit.py). Worker side: torch only.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import launch_counter


@dataclass
class Captured:
    module_name: str | None
    own: dict[str, int] = field(default_factory=dict)
    foreign: dict[str, int] = field(default_factory=dict)


# graph -> what it captured; weak, so a finished job's graphs (and their memory pools) go
_graphs: weakref.WeakKeyDictionary[Any, Captured] = weakref.WeakKeyDictionary()
_installed: list[str] = []


# a graph class whose instances take no weak reference: held for the worker's life
_held: dict[int, tuple[Any, Captured]] = {}


def captured_by(graph: Any) -> Captured | None:
    try:
        return _graphs.get(graph)
    except TypeError:
        entry = _held.get(id(graph))
        return entry[1] if entry is not None and entry[0] is graph else None


def _remember(graph: Any, cap: Captured) -> None:
    try:
        _graphs[graph] = cap
    except TypeError:
        _held[id(graph)] = (graph, cap)


def wrap(cls: type) -> None:
    begin: Callable[..., Any] = cls.capture_begin  # type: ignore[attr-defined]
    end: Callable[..., Any] = cls.capture_end  # type: ignore[attr-defined]
    replay: Callable[..., Any] = cls.replay  # type: ignore[attr-defined]

    def capture_begin(self: Any, *args: Any, **kwargs: Any) -> Any:
        rec = launch_counter.current()
        cap = Captured(rec.module_name if rec is not None else None)
        _remember(self, cap)
        launch_counter.set_capture(cap)
        try:
            return begin(self, *args, **kwargs)
        except BaseException:
            launch_counter.set_capture(None)
            raise

    def capture_end(self: Any, *args: Any, **kwargs: Any) -> Any:
        launch_counter.set_capture(None)
        return end(self, *args, **kwargs)

    def replay_(self: Any, *args: Any, **kwargs: Any) -> Any:
        rec = launch_counter.current()
        # a replay executes no Python launch (an eager stand-in's rerun is not counted either)
        with launch_counter.recording(None):
            result = replay(self, *args, **kwargs)
        cap = captured_by(self)
        if rec is not None:
            rec.graph_replays += 1
            if cap is not None and cap.module_name is not None and cap.module_name == rec.module_name:
                for name, n in cap.own.items():
                    rec.own.setdefault(name, launch_counter.KernelStats()).launches += n
                rec.replayed_launches += sum(cap.own.values())
        return result

    cls.capture_begin = capture_begin  # type: ignore[attr-defined]
    cls.capture_end = capture_end  # type: ignore[attr-defined]
    cls.replay = replay_  # type: ignore[attr-defined]


def install() -> list[str]:
    """Wrap ``torch.cuda.CUDAGraph`` once per process. Returns what was wrapped."""
    if not _installed:
        import torch

        wrap(torch.cuda.CUDAGraph)
        _installed.append("torch.cuda.CUDAGraph.capture_begin/capture_end/replay")
    return list(_installed)
