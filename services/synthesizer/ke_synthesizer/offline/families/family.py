"""KernelFamily: one kind of generated kernel (pointwise, row, matmul, pool, conv,
attention, ...) as the partitioner, the transformation space and the code generator
see it. Each family lives in one folder ``families/<kind>/`` and is listed once in
``families.FAMILIES``; nothing else names it (README.md: "add an op family").
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

import torch.fx

from ..emit.lower_pointwise import PointwiseEmitter
from ..frontend.ops import NormOp
from ..plan.plan import Group, Plan, PlanContext

# (canonical op of the group's first member, the group's info) of a recognised node
Recognised = tuple[NormOp, dict[str, Any]]
# (kernel source, launcher source, launcher name) of one group
Emitted = tuple[str, str, str]
# (launcher arguments, output nodes it returns) of one group
LaunchArgs = tuple[list[Any], list[torch.fx.Node]]


class KernelFamily(ABC):
    """How one kind of kernel is recognised, tuned, generated and launched."""

    # Group.kind of this family's groups; the prefix of its kernels' names
    kind: ClassVar[str]
    # per-group knobs (genome key ``gK.<name>``) and their choices; the first is the default
    knobs: ClassVar[Mapping[str, tuple[str, ...]]]
    # pointwise consumers of the first member's value may join the group (one kernel with
    # a fused epilogue; genome key ``epilogue.<node>`` turns it off per boundary)
    epilogue: ClassVar[bool] = False
    # the group's node returns a tuple of tensors (a recurrent layer's output and final
    # state); its dtypes are the family's to check, not the pipeline's one-tensor rule
    tuple_outputs: ClassVar[bool] = False
    # the group's outputs may be of any dtype (integer and boolean data moved exactly, an
    # int64 bucket index): the pipeline's floating-point output rule does not apply
    any_dtype_outputs: ClassVar[bool] = False

    def recognise(self, node: torch.fx.Node, op: NormOp | None, ctx: PlanContext) -> Recognised | None:
        """Whether ``node`` starts a group of this family (``op`` is its canonical op, None
        for calls the normaliser does not know). The partitioner asks families in registry
        order and turns any TypeError / ValueError / ... into "no". None by default: the
        partitioner's fusion rules grow pointwise and row groups themselves (graph.py)."""
        return None

    def group_knobs(self, plan: Plan, group: Group, genome: dict[str, str]) -> list[tuple[str, tuple[str, ...]]]:
        """The knobs ``group`` offers under ``genome``, in ``knobs`` order, each narrowed to
        the choices the recogniser allowed (``group.info["allowed"]``). Families drop or
        reorder knobs here where a choice cannot change, or must not reach, the code."""
        return [(name, narrowed(group, name, choices)) for name, choices in self.knobs.items()]

    @classmethod
    def value(cls, genome: dict[str, str], group: Group, name: str) -> str:
        """``group``'s value of knob ``name``: the genome's, else the default that
        space.complete_genome would fill in (the first choice the group allows). Generators
        read knobs through this, so a default is written once, in ``knobs``."""
        return genome.get(f"{group.key}.{name}", narrowed(group, name, cls.knobs[name])[0])

    def launches(self, group: Group) -> int:
        """Kernel launches of one forward call of ``group``'s launcher, at least (the
        ``cuda_graph`` knob is offered by the plan's total): one by default."""
        return 1

    @abstractmethod
    def generate(self, plan: Plan, group: Group, genome: dict[str, str], emitter: PointwiseEmitter) -> Emitted:
        """Triton kernel(s) and host launcher of ``group``; any exception demotes the group
        to library calls (codegen.assemble)."""

    @abstractmethod
    def launch_args(self, plan: Plan, group: Group) -> LaunchArgs:
        """The forward's values the launcher takes and the nodes its results bind."""


def narrowed(group: Group, name: str, choices: tuple[str, ...]) -> tuple[str, ...]:
    """``choices`` kept in their order where the group's ``allowed`` list names them; the
    default alone when it names none. A choice the recogniser names in
    ``group.info["seed"]`` (measured or derived from the captured shapes) moves first: it
    is the group's default."""
    allowed = group.info.get("allowed", {}).get(name)
    out = tuple(choices) if allowed is None else tuple(c for c in choices if c in allowed) or tuple(choices[:1])
    first = group.info.get("seed", {}).get(name)
    return (first, *(c for c in out if c != first)) if first in out else out
