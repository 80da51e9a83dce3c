"""Evaluation results as an evaluator on a GPU would publish them: CUDA-event timings with
their confidence intervals and the worker's environment fingerprint. CPU sessions never
distil skills, so tests of distillation build these with a GPU-like fingerprint."""

from __future__ import annotations

from kernelevolve.v1 import common_pb2 as pb

H100 = {"device": "cuda", "device_name": "NVIDIA H100 80GB HBM3", "torch": "2.5.1+cu124", "triton": "3.1.0",
        "driver": "550.54.15", "cuda": "12.4", "compute_capability": "9.0", "triton_interpret": "0"}


def gpu_result(candidate_id: str, median_ms: float, *, spread: float = 0.01, baseline_ms: float = 1.0,
               fingerprint: dict[str, str] | None = None, interpreted: bool = False,
               kind: str = "nvidia") -> pb.EvaluationResult:
    """A correct result timed at ``median_ms`` with a CI of +-``spread`` (relative)."""
    fp = dict(H100 if fingerprint is None else fingerprint)
    timing = pb.TimingStats(median_ms=median_ms, ci_low_ms=median_ms * (1 - spread),
                            ci_high_ms=median_ms * (1 + spread), trials=50, min_ms=median_ms * (1 - 2 * spread))
    base = pb.TimingStats(median_ms=baseline_ms, ci_low_ms=baseline_ms * 0.99, ci_high_ms=baseline_ms * 1.01,
                          trials=50)
    speedup = baseline_ms / median_ms if median_ms > 0 else 0.0
    return pb.EvaluationResult(candidate_id=candidate_id, status=pb.EVALUATION_STATUS_CORRECT,
                               candidate_timing=timing, baseline_timing=base, speedup=speedup,
                               hardware=pb.HardwareTarget(kind=kind, name=fp.get("device_name", "cpu")),
                               fingerprint=fp, interpreted=interpreted)
