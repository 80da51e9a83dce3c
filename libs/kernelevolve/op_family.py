"""Op families: the coarse kind of work an operator does, shared by knowledge and search.

Knowledge documents and skills are filed under a family so that advice on softmax
reaches a layer norm and a skill learned on one GEMM reaches the next. The family is
read from the spec's source by the torch calls it makes, first match wins, in the
order below: an attention block contains matmuls and a softmax, a conv layer may end
with a pointwise op.
"""

from __future__ import annotations

import re

OP_FAMILIES: tuple[str, ...] = (
    "attention", "conv", "pooling", "matmul", "loss", "scan", "reduction", "pointwise",
)

_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("attention", re.compile(r"scaled_dot_product_attention|MultiheadAttention|\battention\b", re.I)),
    ("conv", re.compile(r"\bconv(?:_transpose)?[123]d|\bConv(?:Transpose)?[123]d")),
    ("pooling", re.compile(r"pool[123]d|Pool[123]d")),
    ("matmul", re.compile(r"\b(?:matmul|bmm|mm|addmm|baddbmm|linear|einsum)\(|nn\.Linear|\s@\s")),
    ("loss", re.compile(r"_loss\b|Loss\(|cross_entropy|nll_loss|kl_div|mse_loss")),
    ("scan", re.compile(r"\bcum(?:sum|prod|max|min)\b|logcumsumexp")),
    ("reduction", re.compile(r"softmax|\bnorm\b|layer_norm|group_norm|batch_norm|rms|Norm\(|\.(?:sum|mean|amax|"
                             r"amin|max|min|var|std|logsumexp|prod|argmax|argmin)\(")),
)


def classify_op_family(source: str) -> str:
    """The family of an operator spec's source; "pointwise" when nothing else matches."""
    for family, pattern in _PATTERNS:
        if pattern.search(source):
            return family
    return "pointwise"


def check_op_family(family: str) -> str:
    """``family`` if known or empty (any family); InvalidArgumentError otherwise."""
    from kernelevolve.errors import InvalidArgumentError

    if family and family not in OP_FAMILIES:
        raise InvalidArgumentError(f"unknown op family {family!r}; expected one of {', '.join(OP_FAMILIES)}")
    return family
