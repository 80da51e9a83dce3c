"""The honest line of a session whose best correct candidate is slower than the baseline:
the library op (or eager's composition of them) that nothing beat is named as the answer,
rather than a slower kernel reported as the result."""

from __future__ import annotations

# what a session's baseline is called in the line
BASELINE_NAMES = {"eager": "eager PyTorch", "compile": "torch.compile"}


def baseline_best(speedup: float | None, baseline: str = "eager") -> str:
    """``"eager PyTorch is already best here: best Triton candidate 0.80x"`` when the best
    correct candidate's speedup over ``baseline`` is below 1.0; "" when it is at least 1.0
    or no candidate was correct (``speedup`` None or 0: nothing was timed)."""
    if not speedup or speedup >= 1.0:
        return ""
    name = BASELINE_NAMES.get(baseline, baseline or "eager PyTorch")
    return f"{name} is already best here: best Triton candidate {speedup:.2f}x"
