"""Translation between evaluator verdicts (plain dataclasses) and ``kernelevolve.v1`` protos.

Used by the service and its gRPC servicer: the judge itself never sees a proto.
"""

from __future__ import annotations

from kernelevolve.ports.verdict import Verdict
from kernelevolve.v1 import common_pb2 as pb

_STATUS = {
    "correct": pb.EVALUATION_STATUS_CORRECT,
    "incorrect": pb.EVALUATION_STATUS_INCORRECT,
    "rejected": pb.EVALUATION_STATUS_REJECTED,
    "compile_error": pb.EVALUATION_STATUS_COMPILE_ERROR,
    "runtime_error": pb.EVALUATION_STATUS_RUNTIME_ERROR,
    "timeout": pb.EVALUATION_STATUS_TIMEOUT,
    "crashed": pb.EVALUATION_STATUS_CRASHED,
}
_BOUND = {"memory": pb.BOUND_CLASS_MEMORY, "compute": pb.BOUND_CLASS_COMPUTE, "latency": pb.BOUND_CLASS_LATENCY}


def verdict_to_pb(v: Verdict, hardware_kind: str, report_key: str = "") -> pb.EvaluationResult:
    res = pb.EvaluationResult(
        candidate_id=v.candidate_id, status=_STATUS[v.status], reason=v.reason, speedup=v.speedup,
        report_key=report_key, hardware=pb.HardwareTarget(kind=hardware_kind, name=v.device),
        fingerprint={k: str(x) for k, x in v.fingerprint.items()}, interpreted=v.interpreted,
        warnings=list(v.warnings), speedup_vs_compile=v.speedup_vs_compile,
        compile_baseline_note=str(v.evidence.get("compile_baseline", ""))[:300], tier=v.tier,
    )
    if v.precision is not None:
        res.precision.CopyFrom(pb.PrecisionContract(name=v.precision.name, flags=v.precision.flags,
                                                    spec_flags=v.precision.spec_flags))
    if v.correctness is not None:
        c = v.correctness
        res.correctness.CopyFrom(pb.CorrectnessStats(trials=c.trials, max_abs_error=c.max_abs_error,
                                                     max_rel_error=c.max_rel_error, atol=c.atol, rtol=c.rtol,
                                                     bound=c.bound, candidate_error=c.candidate_error,
                                                     reference_error=c.reference_error,
                                                     error_ratio=c.error_ratio, outliers=c.outliers))
    for name in ("candidate_timing", "baseline_timing"):
        t = getattr(v, name)
        if t is not None:
            getattr(res, name).CopyFrom(pb.TimingStats(median_ms=t.median_ms, iqr_ms=t.iqr_ms,
                                                       ci_low_ms=t.ci_low_ms, ci_high_ms=t.ci_high_ms,
                                                       trials=t.trials, min_ms=t.min_ms,
                                                       device_median_ms=t.device_median_ms,
                                                       host_median_ms=t.host_median_ms,
                                                       per_call_median_ms=t.per_call_median_ms))
    if v.diagnosis is not None:
        d = v.diagnosis
        res.diagnosis.CopyFrom(pb.Diagnosis(
            bound=_BOUND.get(d.bound, pb.BOUND_CLASS_UNSPECIFIED), bytes_moved=d.bytes_moved, flops=d.flops,
            achieved_gbps=d.achieved_gbps, achieved_gflops=d.achieved_gflops,
            roofline_fraction=d.roofline_fraction, library_time_fraction=d.library_time_fraction,
            kernels=[pb.KernelStat(name=k.name, launches=k.launches, time_ms=k.time_ms, registers=k.registers,
                                   shared_bytes=k.shared_bytes, spills=k.spills) for k in d.kernels],
            notes=list(d.notes)))
    return res
