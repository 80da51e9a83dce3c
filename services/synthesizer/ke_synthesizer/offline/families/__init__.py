"""The registry of kernel families: the partitioner, the transformation space and the
code generator know a family only through this tuple (README.md: "add an op family").

Order matters where recognisers overlap: the partitioner asks each family in turn and
the first that recognises a node starts its group.
"""

from __future__ import annotations

from collections.abc import Mapping

from .attention.kernel_attention import AttentionFamily
from .conv.kernel_conv import ConvFamily
from .convnd.kernel_convnd import ConvNdFamily
from .family import KernelFamily
from .index.kernel_index import IndexFamily
from .index.kernel_scatter import ScatterFamily
from .integer.kernel_integer import IntegerFamily
from .matmul.kernel_matmul import MatmulFamily
from .norm.kernel_batch_norm import NormFamily
from .pointwise.kernel_pointwise import PointwiseFamily
from .pool.kernel_pool import PoolFamily
from .pool.kernel_unpool import UnpoolFamily
from .recurrent.kernel_recurrent import RecurrentFamily
from .row.kernel_row import RowFamily

FAMILIES: tuple[KernelFamily, ...] = (
    PointwiseFamily(),
    RowFamily(),
    MatmulFamily(),
    PoolFamily(),
    UnpoolFamily(),  # max_unpool: a scatter over zeros, no epilogue
    ConvFamily(),
    ConvNdFamily(),  # after ConvFamily: takes the convolutions it declines
    AttentionFamily(),
    RecurrentFamily(),
    # data movement, indexing, lookups and scatters (any dtype: values are moved, not computed)
    IndexFamily(),
    ScatterFamily(),
    IntegerFamily(),
    NormFamily(),  # functional batch / instance norm writing their running statistics
)

BY_KIND: Mapping[str, KernelFamily] = {f.kind: f for f in FAMILIES}
