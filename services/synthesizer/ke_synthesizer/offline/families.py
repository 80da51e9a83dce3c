"""The registry of kernel families: the partitioner, the transformation space and the
code generator know a family only through this tuple (README.md: "add an op family").

Order matters where recognisers overlap: the partitioner asks each family in turn and
the first that recognises a node starts its group.
"""

from __future__ import annotations

from collections.abc import Mapping

from .family import KernelFamily
from .kernel_attention import AttentionFamily
from .kernel_conv import ConvFamily
from .kernel_convnd import ConvNdFamily
from .kernel_matmul import MatmulFamily
from .kernel_pointwise import PointwiseFamily
from .kernel_pool import PoolFamily
from .kernel_row import RowFamily

FAMILIES: tuple[KernelFamily, ...] = (
    PointwiseFamily(),
    RowFamily(),
    MatmulFamily(),
    PoolFamily(),
    ConvFamily(),
    ConvNdFamily(),  # after ConvFamily: takes the convolutions it declines
    AttentionFamily(),
)

BY_KIND: Mapping[str, KernelFamily] = {f.kind: f for f in FAMILIES}
