"""The float64 re-run of a reference that draws random numbers: it replays eager's draws.

Seeding alike is not enough: a GPU's dropout kernel maps its random stream onto the
elements differently for float32 and float64 (vector width, grid), so even from the same
generator state the float64 run kept other elements than eager (on an H200, every shape
but the tiniest), and the host's generator draws other numbers than a GPU's. Eager's own
error against such a float64 output is as large as the output itself, which voids the
float64 error budget (tolerance.py, rules 2 and 3).

``record`` runs the eager reference (seeded as every forward call is) under a dispatch mode
that keeps the result of every random op (``torch.Tag.nondeterministic_seeded``: rand,
randn, bernoulli, native_dropout, ...); ``replay`` runs the float64 model under a mode that
hands those results back, in order, instead of drawing: a dropout keeps the elements eager
kept, scaled in float64. A draw that does not line up (another op, another shape: control
flow that depends on values) stops the replay: ``ReplayMismatch``.

Worker side: torch only.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

_SEEDED = torch.Tag.nondeterministic_seeded
_NATIVE_DROPOUT = torch.ops.aten.native_dropout.default


class ReplayMismatch(RuntimeError):
    """The float64 run asked for other draws than eager made."""


def _detach(x: Any) -> Any:
    return x.detach().clone() if isinstance(x, torch.Tensor) else x


class _Record(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.draws: list[tuple[Any, Any]] = []  # (op, its result)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        out = func(*args, **(kwargs or {}))
        if _SEEDED in func.tags:
            self.draws.append((func, tree_map(_detach, out)))
        return out


class _Replay(TorchDispatchMode):
    def __init__(self, draws: list[tuple[Any, Any]]) -> None:
        super().__init__()
        self.draws = list(reversed(draws))

    def _next(self, func: Any) -> Any:
        if not self.draws:
            raise ReplayMismatch(f"the float64 run drew more random numbers than eager ({func})")
        op, value = self.draws.pop()
        if op != func:
            raise ReplayMismatch(f"the float64 run drew with {func} where eager drew with {op}")
        return value

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        kwargs = kwargs or {}
        if _SEEDED not in func.tags:
            return func(*args, **kwargs)
        value = self._next(func)
        if func == _NATIVE_DROPOUT:
            x, p = args[0], float(args[1] if len(args) > 1 else kwargs["p"])
            mask = value[1].to(x.device)
            if tuple(mask.shape) != tuple(x.shape):
                raise ReplayMismatch(f"dropout of shape {tuple(x.shape)} where eager's was {tuple(mask.shape)}")
            scale = 1.0 / (1.0 - p) if p < 1 else 0.0
            return x * mask.to(x.dtype) * scale, mask
        out = func(*args, **kwargs)  # the op's own result (shape, dtype, in-place target), overwritten
        got, _ = tree_flatten(out)
        want, _ = tree_flatten(value)
        if len(got) != len(want):
            raise ReplayMismatch(f"{func} returned {len(got)} results where eager's returned {len(want)}")
        for g, w in zip(got, want, strict=True):
            if isinstance(g, torch.Tensor):
                if not isinstance(w, torch.Tensor) or tuple(g.shape) != tuple(w.shape):
                    raise ReplayMismatch(f"{func} drew another shape than eager")
                g.copy_(w)
        return out

    def finish(self) -> None:
        if self.draws:
            raise ReplayMismatch(f"the float64 run left {len(self.draws)} of eager's random draws unused")


def record(run: Any) -> tuple[Any, list[tuple[Any, Any]]]:
    """``run()``'s result and the random draws it made, in order."""
    mode = _Record()
    with mode:
        out = run()
    return out, mode.draws


def replay(run: Any, draws: list[tuple[Any, Any]]) -> Any:
    """``run()`` with every random draw replaced by eager's (``record``), in order."""
    mode = _Replay(draws)
    with mode:
        out = run()
    mode.finish()
    return out
