"""The real values of a fake-captured spec's buffers, where building them is cheap.

A spec over ``LARGE_BYTES`` is captured on fake tensors: its parameters and buffers too, so
a mask buffer's value is unknown and a proof that needs it (``attention_chain.prove_causal``:
a ``tril`` buffer is the causal triangle) fails, and the kernel reads the mask from memory
with no stop at the diagonal, about twice the work of causal attention. The buffers are made
by ``Model.__init__`` from ``get_init_inputs()`` and the seed alone, never from the inputs,
so constructing the model again for real, seeded as the capture and the candidate construct
it, gives exactly the values the candidate's own buffers will hold. That costs the model's
whole state (every parameter is built too), so it is done only for a state of at most
``REAL_STATE_BYTES``, and only when a proof asks (once per capture).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensor, unset_fake_temporarily

log = logging.getLogger(__name__)

# The most parameter and buffer bytes rebuilt for real to read a buffer's value: a GPT-2
# block at 768 wide with a 1024-token triangle holds 32 MiB; a whole model of hundreds of
# MiB is not rebuilt (its masks are read, as without this).
REAL_STATE_BYTES = 64 * 2**20
_META_KEY = "real_state"


class RealState:
    """The real model behind a fake capture, built (seeded) on the first question."""

    def __init__(self, build: Callable[[], torch.nn.Module], name: str) -> None:
        self._build, self._name = build, name
        self._model: torch.nn.Module | None = None
        self._failed = False

    def __deepcopy__(self, memo: dict[int, Any]) -> RealState:
        return self  # read-only once built: a copied graph shares it

    def value(self, target: str, like: torch.Tensor) -> torch.Tensor | None:
        """The real tensor at attribute path ``target``, or None (not a real tensor of the
        model, or not the shape and dtype the capture saw there)."""
        model = self._real()
        obj: Any = model
        for part in target.split("."):
            obj = getattr(obj, part, None)
        if not isinstance(obj, torch.Tensor) or isinstance(obj, FakeTensor) or obj.is_meta:
            return None
        if obj.shape != like.shape or obj.dtype != like.dtype:
            return None
        return obj

    def _real(self) -> torch.nn.Module | None:
        if self._model is None and not self._failed:
            try:
                # real even when asked from inside the capture's fake mode (a pass that
                # propagates shapes again): the first answer is kept for the whole capture
                with unset_fake_temporarily(), torch.random.fork_rng(devices=[]), torch.no_grad():
                    self._model = self._build()
                log.info("built %s for real to read its buffers", self._name)
            except Exception as exc:  # noqa: BLE001 - no values: the masks are read, as on fake tensors
                self._failed = True
                log.info("%s not built for real (%s); its buffers stay unknown", self._name, exc)
        return self._model


def attach(gm: torch.fx.GraphModule, build: Callable[[], torch.nn.Module], state_bytes: int, name: str) -> None:
    """Let proofs on ``gm`` read real buffer values, when the state is small enough."""
    if state_bytes > REAL_STATE_BYTES:
        log.info("%s: %.3g MiB of parameters and buffers, not rebuilt for real; masks are read", name,
                 state_bytes / 2**20)
        return
    gm.meta[_META_KEY] = RealState(build, name)


def real_value(gm: torch.fx.GraphModule, target: str, like: torch.Tensor) -> torch.Tensor | None:
    """The real value of ``gm``'s fake attribute ``target`` (see ``attach``), or None."""
    state = gm.meta.get(_META_KEY)
    return state.value(target, like) if isinstance(state, RealState) else None
