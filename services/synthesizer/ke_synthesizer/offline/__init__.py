"""Offline, compiler-style candidate synthesizer: captures a spec's forward with
torch.fx, lowers it to named Triton kernels (library calls where it cannot) and
exposes the tuning/fusion choices as an enumerable transformation space."""

from __future__ import annotations

from .synthesizer import OfflineSynthesizer

__all__ = ["OfflineSynthesizer"]
