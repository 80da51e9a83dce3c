"""The last resort: a candidate whose forward is the reference forward itself.

Used when no tracer captures the forward (a branch on tensor values, ``.item()``, an op
without a fake-tensor kernel; see capture.py) or a specialised graph cannot be emitted.
It is correct by construction but launches no Triton kernel, and says so: the docstring
carries the reason, the proposal lists ``forward`` in ``fallback_nodes``, and the
evaluator's own checks (kernels launched, library time) judge it as what it is.
"""

from __future__ import annotations

from .frontend.captured import CapturedSpec

# the fallback_nodes entry of a candidate whose whole forward is a library call
WHOLE_FORWARD = "forward"


def library_candidate_source(spec: CapturedSpec, reason: str) -> str:
    shapes = ", ".join(str(list(s)) for s in spec.specialized_shapes) or "any"
    title = (f"Library-call candidate for {spec.name}: the reference forward, not lowered.\n\n"
             f"No tracer captured the forward ({_one_line(reason)}),\nso this candidate runs the reference "
             f"forward through torch (input shapes seen: {shapes}).\nIt launches no Triton kernel of its own.")
    parts = [f'"""{title}"""', "", "import math", "", "import torch", "import torch.nn as nn", ""]
    header = set(parts)
    for stmt in spec.model_source.prelude:
        if stmt not in header:
            parts += [stmt, ""] if "\n" in stmt else [stmt]
    parts += ["", spec.model_source.class_source, ""]
    return "\n".join(parts)


def _one_line(text: str, limit: int = 300) -> str:
    flat = " ".join(text.replace('"""', "'''").split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
