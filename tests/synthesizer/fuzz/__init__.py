"""Differential fuzzing of the offline synthesizer: random small PyTorch graphs written as
spec sources (generator), lowered and checked against their reference (runner)."""
