"""CapturedSpec: what the lowering passes know about one spec (built by capture.py,
rewritten in place by decompose.py)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx

from .model_source import ModelSource


@dataclass
class CapturedSpec:
    """Everything the lowering passes need to know about one spec."""

    name: str
    source: str
    model: torch.nn.Module
    gm: torch.fx.GraphModule
    inputs: list[Any]
    init_inputs: list[Any]
    # the reference class and the spec lines it needs, as the candidate rebuilds them
    model_source: ModelSource
    forward_params: list[str] = field(default_factory=list)
    # input shapes the graph is fixed to (shape_tracer.py); empty when it holds for any shape
    specialized_shapes: list[tuple[int, ...]] = field(default_factory=list)
    # the spec's KE_TOLERANCE override ({"atol": .., "rtol": ..}) when it declares one
    tolerance: dict[str, float] = field(default_factory=dict)
    # KE_ERROR_BUDGET = False: the judge skips its float64 error budget (see spec_allows_tf32)
    error_budget_off: bool = False
    # graph rewrites applied or found (see decompose.py), e.g. {"attention": 1}
    rewrites: dict[str, int] = field(default_factory=dict)
    # how the forward was captured: "symbolic", "shapes" (shape_tracer.py), "aten"
    # (aten_capture.py) or "library" (no tracer took it: the candidate is the reference
    # forward itself, see library_reason)
    tracer: str = "symbolic"
    # why no tracer captured the forward; set only when tracer == "library"
    library_reason: str = ""
    # a spec over capture.LARGE_BYTES: model parameters and ``inputs`` are fake tensors of
    # this mode (real shapes, no data), and shape propagation runs in it
    fake_mode: Any = None

    def shape_context(self) -> Any:
        """The context shape propagation on ``inputs`` runs in (see ``fake_mode``)."""
        return self.fake_mode if self.fake_mode is not None else contextlib.nullcontext()
