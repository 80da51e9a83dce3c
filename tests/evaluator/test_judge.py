"""The Judge API end to end on CPU: verdict contents, worker lifecycle, spec validation."""

from __future__ import annotations

import json
import threading

import pytest

from ke_evaluator.judge import EvalOptions, Judge
from kernelevolve.errors import InvalidArgumentError, InvalidSpecError
from kernelevolve.ports.verdict import STATUSES, Verdict

from .sources import candidate, example, spec_for_tests

RELU = "relu_scale_add"


def test_correct_candidate_full_verdict(tmp_path) -> None:  # noqa: ANN001
    opts = EvalOptions(device="cpu", correctness_trials=5, time_candidates=True, scratch_dir=str(tmp_path))
    with Judge(opts) as judge:
        v = judge.evaluate(example(RELU), candidate("ok_relu_scale_add"), candidate_id="c-1")
    assert v.status == "correct", v.reason
    assert v.interpreted and v.device == "cpu"
    assert any("say nothing about GPU speed" in w for w in v.warnings)
    # 5 seeded trials (one in trial 0's buffers) + the spec's extra shape set.
    assert v.correctness is not None and v.correctness.trials == 6
    assert v.correctness.atol == pytest.approx(1e-4) and v.correctness.rtol == pytest.approx(1e-4)
    assert v.evidence["deterministic"] == "bitwise"
    assert v.evidence["parameters"] == "copied from the reference"
    ct, bt = v.candidate_timing, v.baseline_timing
    assert ct is not None and bt is not None
    assert 3 <= ct.trials <= 10 and ct.trials == bt.trials
    assert ct.ci_low_ms <= ct.median_ms <= ct.ci_high_ms and ct.iqr_ms >= 0
    assert v.speedup == pytest.approx(bt.median_ms / ct.median_ms)
    for key in ("python", "torch", "triton", "numpy", "device_name"):
        assert v.fingerprint.get(key)
    assert v.diagnosis is not None and v.diagnosis.bound == "memory"
    assert v.diagnosis.bytes_moved == (2 * 64 * 257 + 257) * 4  # x in, y out, bias (float32)
    assert v.diagnosis.kernels[0].name == "_relu_scale_add" and v.diagnosis.kernels[0].launches == 1
    assert 0.0 <= v.diagnosis.library_time_fraction <= 1.0
    assert v.evidence["sandbox"]["network"] in ("netns", "userns+netns", "socket-blocked")
    fs = v.evidence["sandbox"]["filesystem"]
    assert fs == "read-only except scratch" or fs.startswith("not isolated")  # the latter without root
    assert "flop counter" in v.evidence["sandbox"]["warmed"]  # one-time costs paid at start-up
    steps = v.evidence["sandbox"]["startup_s"]
    assert {"sandbox", "import", "device_init", "profiler", "flop_counter"} <= set(steps), steps
    d = json.loads(json.dumps(v.to_dict()))
    assert Verdict.from_dict(d).to_dict() == d
    assert d["status"] in STATUSES


def test_worker_replaced_after_crash_next_candidate_unaffected(tmp_path) -> None:  # noqa: ANN001
    opts = EvalOptions(device="cpu", correctness_trials=2, time_candidates=False, scratch_dir=str(tmp_path))
    with Judge(opts) as judge:
        first = judge.evaluate(example(RELU), candidate("ok_relu_scale_add"))
        crash = judge.evaluate(example(RELU), candidate("segfault_oob"))
        after = judge.evaluate(example(RELU), candidate("ok_relu_scale_add"))
        wrong = judge.evaluate(example(RELU), candidate("wrong_math"))
        again = judge.evaluate(example(RELU), candidate("ok_relu_scale_add"))
        retimed = judge.evaluate(example(RELU), candidate("ok_relu_scale_add"), fresh_worker=True)
    assert retimed.status == "correct"
    assert retimed.evidence["worker"]["pid"] != again.evidence["worker"]["pid"]
    assert [first.status, crash.status, after.status, wrong.status, again.status] == [
        "correct", "crashed", "correct", "incorrect", "correct"]
    pids = [v.evidence["worker"]["pid"] for v in (first, crash, after, wrong, again)]
    assert pids[0] == pids[1]  # the crash happened in the warm worker ...
    assert pids[2] != pids[1]  # ... which was replaced
    assert pids[3] == pids[2]  # a correct verdict keeps the worker warm
    assert pids[4] != pids[3]  # default policy: any failure replaces it
    assert judge.workers_started == 4


def test_spec_validation_of_examples(judge: Judge) -> None:
    check = judge.validate_spec(example(RELU), RELU)
    assert check.ok, check.reason
    assert check.info["outputs"] == [{"shape": [64, 257], "dtype": "float32"}]
    assert check.info["weak_signal"] is False
    assert check.info["parameters"] == 257
    assert check.info["tolerance"] == {"atol": 1e-4, "rtol": 1e-4, "overridden": False}


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("def broken(:\n", "does not parse"),
        ("import torch\n\ndef get_inputs():\n    return []\n\ndef get_init_inputs():\n    return []\n", "lacks Model"),
        ("import torch.nn as nn\n\nclass Model(nn.Module):\n    pass\n\ndef get_init_inputs():\n    return []\n",
         "lacks get_inputs"),
        ("import torch.nn as nn\n\nclass Model(nn.Module):\n    pass\n\ndef get_inputs():\n    return []\n",
         "lacks get_init_inputs"),
        ("raise RuntimeError('boom')\nModel = get_inputs = get_init_inputs = None\n", "raised on import"),
        ("import torch.nn as nn\n\nclass Model(nn.Module):\n    def __init__(self, a):\n        super().__init__()\n"
         "\ndef get_inputs():\n    return []\n\ndef get_init_inputs():\n    return []\n",
         "Model(*get_init_inputs()) raised"),
        (spec_for_tests("raises"), "reference raised when run"),
        ("import torch\nModel = 3\ndef get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n",
         "not a torch.nn.Module"),
        ("import torch.nn as nn\nKE_TOLERANCE = {'atol': -1}\nclass Model(nn.Module):\n    pass\n"
         "def get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n", "KE_TOLERANCE"),
    ],
    ids=["syntax", "no-model", "no-get-inputs", "no-init-inputs", "import-raises", "init-raises", "forward-raises",
         "model-not-module", "bad-tolerance"],
)
def test_bad_specs_rejected(judge: Judge, source: str, reason: str) -> None:
    check = judge.validate_spec(source, "bad")
    assert not check.ok
    assert reason in check.reason


def test_hanging_reference_fails_validation(timeout_judge: Judge) -> None:
    check = timeout_judge.validate_spec(spec_for_tests("hangs"), "hangs")
    assert not check.ok and "hung" in check.reason


@pytest.mark.parametrize(("spec", "why"), [("tiny_output", "all-zeros"), ("near_identity", "returning input 0")])
def test_signal_floor_marks_weak_specs(judge: Judge, spec: str, why: str) -> None:
    check = judge.validate_spec(spec_for_tests(spec), spec)
    assert check.ok
    assert check.info["weak_signal"] is True
    assert any(why in w for w in check.warnings)


def test_evaluate_with_invalid_spec_raises(judge: Judge) -> None:
    with pytest.raises(InvalidSpecError):
        judge.evaluate("class Nope: pass\n", candidate("ok_relu_scale_add"))
    with pytest.raises(InvalidSpecError, match="reference|raised"):
        judge.evaluate("raise ValueError('x')\nModel = get_inputs = get_init_inputs = None\n",
                       candidate("ok_relu_scale_add"))


def test_misuse_raises_invalid_argument() -> None:
    with pytest.raises(InvalidArgumentError):
        Judge(EvalOptions(device="tpu"))
    with pytest.raises(InvalidArgumentError):
        Judge(EvalOptions(correctness_trials=0))
    judge = Judge(EvalOptions(device="cpu"))
    judge.close()
    with pytest.raises(InvalidArgumentError):
        judge.evaluate(example(RELU), candidate("ok_relu_scale_add"))


def test_auto_device_resolves_and_cuda_requires_a_gpu() -> None:
    torch = pytest.importorskip("torch")
    judge = Judge(EvalOptions(device="auto"))
    try:
        assert judge.device == ("cuda" if torch.cuda.is_available() else "cpu")
    finally:
        judge.close()
    if not torch.cuda.is_available():
        with pytest.raises(InvalidArgumentError, match="no CUDA device"):
            Judge(EvalOptions(device="cuda"))


def test_nondeterminism_within_tolerance_is_reported(judge: Judge) -> None:
    v = judge.evaluate(example(RELU), candidate("ok_nondeterministic_noise"))
    assert v.status == "correct", v.reason
    assert v.evidence["deterministic"] == "within tolerance"
    assert any("nondeterministic" in w for w in v.warnings)


def test_library_ops_are_reported(judge: Judge) -> None:
    fused = judge.evaluate(example("linear_bias_relu"), candidate("ok_linear_bias_relu"))
    fallback = judge.evaluate(example("linear_bias_relu"), candidate("ok_partial_fallback_linear"))
    assert fused.status == fallback.status == "correct"
    assert not any(op in fused.evidence["library_ops"] for op in ("aten::mm", "aten::matmul"))
    assert any(op in fallback.evidence["library_ops"] for op in ("aten::mm", "aten::matmul"))


def test_concurrent_callers_are_serialised(judge: Judge) -> None:
    results: list[str] = []

    def call() -> None:
        results.append(judge.evaluate(example(RELU), candidate("ok_relu_scale_add")).status)

    threads = [threading.Thread(target=call) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert results == ["correct"] * 3


def test_fixed_seed_makes_evaluations_reproducible(tmp_path) -> None:  # noqa: ANN001
    opts = EvalOptions(device="cpu", correctness_trials=2, time_candidates=False, seed=1234, scratch_dir=str(tmp_path))
    with Judge(opts) as judge:
        a = judge.evaluate(example("softmax_rows"), candidate("ok_softmax_rows"))
        b = judge.evaluate(example("softmax_rows"), candidate("ok_softmax_rows"))
    assert a.status == b.status == "correct"
    assert a.evidence["seed"] == b.evidence["seed"] == 1234
    assert a.correctness is not None and b.correctness is not None
    assert a.correctness.details == b.correctness.details


def test_spare_worker_takes_over_after_a_failure_with_the_same_verdicts() -> None:
    """After a replacement a pre-started spare serves the next job; it never ran a job before."""
    with Judge(EvalOptions(device="cpu", correctness_trials=2, spare_worker=True)) as j:
        first = j.evaluate(example(RELU), candidate("wrong_math"))
        second = j.evaluate(example(RELU), candidate("ok_relu_scale_add"))
        third = j.evaluate(example(RELU), candidate("wrong_math"))
        fourth = j.evaluate(example(RELU), candidate("ok_relu_scale_add"))
    assert [v.status for v in (first, second, third, fourth)] == ["incorrect", "correct", "incorrect", "correct"]
    pids = [v.evidence["worker"]["pid"] for v in (first, second, third, fourth)]
    assert len(set(pids)) == 4 or (pids[1] != pids[0] and pids[3] != pids[2])
    assert second.evidence["worker"]["job_index"] == 1 and fourth.evidence["worker"]["job_index"] == 1


def test_spare_from_start_serves_the_first_replacement_at_once() -> None:
    """With spare_from_start the spare is spawned beside the first worker, so the job after
    the first failure does not wait for a worker start."""
    with Judge(EvalOptions(device="cpu", correctness_trials=2, spare_from_start=True)) as j:
        j.warm_up()
        slot = j._pool.slots[0]  # noqa: SLF001 - the pool's internals are what is under test
        assert slot.spare is not None
        spare_pid = slot.spare.proc.pid
        first = j.evaluate(example(RELU), candidate("wrong_math"))
        second = j.evaluate(example(RELU), candidate("ok_relu_scale_add"))
    assert [first.status, second.status] == ["incorrect", "correct"]
    assert second.evidence["worker"]["pid"] == spare_pid != first.evidence["worker"]["pid"]
    assert second.evidence["worker"]["job_index"] == 1


@pytest.mark.parametrize(("device", "setting", "status", "reused"), [
    ("cuda", None, "incorrect", True), ("cuda", None, "compile_error", True),
    ("cuda", None, "runtime_error", False), ("cuda", None, "rejected", False), ("cuda", None, "timeout", False),
    ("cuda", False, "incorrect", False), ("cpu", None, "incorrect", False), ("cpu", None, "runtime_error", False),
    ("cpu", True, "incorrect", True), ("cpu", True, "runtime_error", True), ("cpu", True, "crashed", False),
])
def test_worker_reuse_policy(device: str, setting: bool | None, status: str, reused: bool) -> None:
    """Which non-correct verdicts keep their worker: the default keeps it after incorrect and
    compile errors on CUDA only; a CUDA runtime error never (its context may be poisoned)."""
    with Judge(EvalOptions(device="cpu", reuse_worker_after_failure=setting)) as j:
        j.device = device  # the policy reads the resolved device; no worker is started here
        assert j._may_reuse(Verdict(status=status, reason="x")) is reused  # noqa: SLF001
