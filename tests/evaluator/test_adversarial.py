"""Adversarial suite: cheating and broken candidates are never judged correct, each with a
named reason; honest candidates stay correct. One file per case in ``candidates/``."""

from __future__ import annotations

import json

import pytest

from ke_evaluator.judge import Judge

from .sources import CANDIDATES, candidate, example, spec_for_tests

RELU = "relu_scale_add"

# (candidate file, spec, expected status, substring of the reason) -- full policy.
FULL_POLICY = [
    ("ok_relu_scale_add", RELU, "correct", "matches the reference"),
    ("ok_softmax_rows", "softmax_rows", "correct", "matches the reference"),
    ("ok_linear_bias_relu", "linear_bias_relu", "correct", "matches the reference"),
    ("ok_partial_fallback_linear", "linear_bias_relu", "correct", "matches the reference"),
    ("ok_affine", "test:affine_loose_tolerance", "correct", "matches the reference"),
    ("ok_autotuned_heuristics", RELU, "correct", "matches the reference"),
    ("ok_nondeterministic_noise", RELU, "correct", "matches the reference"),
    ("wrong_math", RELU, "incorrect", "mismatch"),
    ("wrong_shape", RELU, "incorrect", "shape"),
    ("wrong_dtype", RELU, "incorrect", "dtype"),
    ("hardcoded_shape", RELU, "incorrect", "extra shape set"),
    ("stale_memory_empty", RELU, "incorrect", "(trial 0)"),
    ("return_input_view", RELU, "incorrect", "modified in place"),
    ("mutate_input", RELU, "incorrect", "modified in place"),
    ("precision_downgrade", "test:affine_loose_tolerance", "incorrect", "precision downgrade"),
    # eager's overflow NaN copied where float64 is finite (tolerance.py, rule 4)
    ("softmax_copies_overflow", "test:softmax_overflow", "incorrect",
     "its float64 run has not (a reference defect): judged against float64 there, and 64 of them are outside"),
    ("decoy_kernel_functional", RELU, "rejected", "does not depend"),
    # library calls with Triton kernels that only move their result (README "Library calls")
    ("library_forward_copy_kernel", RELU, "rejected", "only move data"),
    ("library_forward_add_zero", RELU, "rejected", "only move data"),
    ("library_forward_transpose_kernel", RELU, "rejected", "only move data"),
    ("decoy_compute_plus_copy", RELU, "rejected", "do not reach the output"),
    ("pointer_cache", RELU, "rejected", "result caching"),
    ("value_cache", RELU, "rejected", "result caching"),
    ("cross_job_store", RELU, "rejected", "frame/global inspection"),
    ("cache_tamper", RELU, "rejected", "frame/global inspection"),
    ("try_fallback", RELU, "rejected", "try/except"),
    ("inherit_model", RELU, "rejected", "subclasses the reference Model"),
    ("tf32_flip", RELU, "rejected", "precision flags"),
    ("tf32_flip_dynamic", RELU, "rejected", "precision flags"),
    ("thread_spawn", RELU, "rejected", "thread or process creation"),
    ("extra_stream", RELU, "rejected", "CUDA stream"),
    ("monkeypatch_timer", RELU, "rejected", "timing functions"),
    ("inspect_frame", RELU, "rejected", "frame/global inspection"),
    ("globals_reach", RELU, "rejected", "globals()"),
    ("import_spec", RELU, "rejected", "imports the spec"),
    ("lazy_tensor_subclass", RELU, "rejected", "lazy tensor subclass"),
    ("env_secret", RELU, "rejected", "environment"),
    ("socket_open", RELU, "rejected", "network access"),
    ("write_outside", RELU, "rejected", "file IO"),
    ("segfault_ctypes", RELU, "rejected", "native code"),
    ("os_exit", RELU, "rejected", "process access"),
    ("exec_string", RELU, "rejected", "exec"),
    ("torch_compile_fallback", RELU, "rejected", "torch.compile"),
    ("numpy_compute", RELU, "rejected", "array library"),
    ("global_forward_hook", RELU, "rejected", "global module hooks"),
    ("syntax_error", RELU, "compile_error", "syntax error"),
    ("missing_modelnew", RELU, "compile_error", "ModelNew"),
    ("import_error", RELU, "compile_error", "no_such_primitive"),
    ("raise_in_forward", RELU, "runtime_error", "kernel post-processing failed"),
    ("huge_alloc", RELU, "runtime_error", "allocate"),
    ("exit_in_forward", RELU, "crashed", "code 3"),
    ("segfault_oob", RELU, "crashed", "SIGSEGV"),
]

# The same cheats with the AST policy switched off: the runtime layers alone must hold.
RUNTIME_ONLY = [
    ("pointer_cache", "incorrect", "same buffers as trial 0"),
    ("value_cache", "rejected", "same output memory on two calls"),
    ("cache_tamper", "rejected", "cached inputs or reference changed"),
    ("thread_spawn", "rejected", "started threads"),
    ("monkeypatch_timer", "rejected", "time.perf_counter"),
    ("tf32_flip", "rejected", "allow_tf32"),
    ("tf32_flip_dynamic", "rejected", "float32_matmul_precision"),
    ("lazy_tensor_subclass", "incorrect", "plain torch.Tensor"),
    ("inherit_model", "rejected", "does not depend"),
    ("inspect_frame", "rejected", "does not depend"),
    ("exec_string", "rejected", "does not depend"),
    ("numpy_compute", "rejected", "does not depend"),
    ("global_forward_hook", "rejected", "global_module_hooks"),
    ("socket_open", "runtime_error", "candidate forward raised"),
    ("import_spec", "compile_error", "No module named"),
    ("segfault_ctypes", "crashed", "SIGSEGV"),
    ("os_exit", "crashed", "code 0"),
    ("write_outside", "runtime_error", "Read-only file system"),
]


def _spec(name: str) -> str:
    return spec_for_tests(name[5:]) if name.startswith("test:") else example(name)


def test_every_candidate_file_is_covered_and_documented() -> None:
    paths = list(CANDIDATES.glob("*.py")) + list(CANDIDATES.glob("*.txt"))
    files = {p.stem for p in paths}
    # the hangs below; the spinner and the forger in test_phase_limits.py
    covered = {c for c, *_ in FULL_POLICY} | {"hang_first_call", "hang_later_call", "spin_after_first_call",
                                               "forge_phase_messages"}
    assert files == covered
    for p in paths:
        first = p.read_text().splitlines()[0]
        assert first.startswith('"""') and first.endswith('"""') and len(first) > 12, p.name
    cheats = [c for c, _, status, _ in FULL_POLICY if status != "correct"]
    assert len(cheats) >= 20


@pytest.mark.parametrize(("name", "spec", "status", "reason"), FULL_POLICY, ids=[c[0] for c in FULL_POLICY])
def test_full_policy(judge: Judge, name: str, spec: str, status: str, reason: str) -> None:
    v = judge.evaluate(_spec(spec), candidate(name), candidate_id=name)
    assert v.status == status, v.reason
    assert reason in v.reason
    assert v.candidate_id == name
    json.dumps(v.to_dict(), allow_nan=False)  # the report must be strict JSON
    if status == "correct":
        assert v.correctness is not None and v.correctness.trials >= 3  # 2 seeds + extra/same-buffer sets
        assert v.evidence["kernel_dependency"].startswith("output changes")
        assert sum(v.evidence["kernel_launches"].values()) >= 1
    else:
        assert v.speedup == 0.0


@pytest.mark.parametrize(("name", "status", "reason"), RUNTIME_ONLY, ids=[c[0] for c in RUNTIME_ONLY])
def test_runtime_defenses_without_static_policy(runtime_judge: Judge, name: str, status: str, reason: str) -> None:
    if name == "write_outside" and runtime_judge.sandbox_info.get("filesystem") != "read-only except scratch":
        pytest.skip("no mount namespace here (needs root): the file-system jail is not available")
    v = runtime_judge.evaluate(example(RELU), candidate(name), candidate_id=name)
    assert v.status == status, v.reason
    assert reason in v.reason


@pytest.mark.parametrize(("name", "phase"), [("hang_first_call", "compile phase"), ("hang_later_call", "run phase")])
def test_hangs_time_out_per_phase(timeout_judge: Judge, name: str, phase: str) -> None:
    v = timeout_judge.evaluate(example(RELU), candidate(name), candidate_id=name)
    assert v.status == "timeout"
    assert phase in v.reason and "killed" in v.reason


def test_secrets_never_reach_the_worker(judge_with_planted_secrets: Judge) -> None:
    # The candidate raises if it can see a planted secret: correct means the env was scrubbed.
    v = judge_with_planted_secrets.evaluate(example(RELU), candidate("env_secret"))
    assert v.status == "correct", v.reason


def test_a_spec_can_turn_the_error_budget_off(judge: Judge) -> None:
    """The fp16 candidate above fails only the float64 budget; a spec that declares its
    loose tolerance as the bound (KE_ERROR_BUDGET = False) accepts it and says so."""
    spec = _spec("test:affine_loose_tolerance") + "\nKE_ERROR_BUDGET = False\n"
    v = judge.evaluate(spec, candidate("precision_downgrade"), candidate_id="budget_off")
    assert v.status == "correct", v.reason
    assert v.evidence["error_budget"].startswith("off: the spec sets KE_ERROR_BUDGET = False")
    # fp16 is ~1.4e4x eager's error here: a spec factor of 1e5 admits it, and is the one used
    wide = judge.evaluate(_spec("test:affine_loose_tolerance") + "\nKE_ERROR_BUDGET = 1e5\n",
                          candidate("precision_downgrade"), candidate_id="budget_1e5")
    assert wide.status == "correct", wide.reason
    for e in wide.evidence["error_budget"].values():
        assert e["budget"] >= 1e5 * e["eager_error"] * (1 - 1e-9) and e["candidate_error"] <= e["budget"]


@pytest.mark.parametrize("value", ["0.5", "True", "'off'", "[10]"])
def test_error_budget_declarations_are_checked(tmp_path, value: str) -> None:  # noqa: ANN001
    from ke_evaluator.worker import loading

    src = _spec("test:affine_loose_tolerance") + f"\nKE_ERROR_BUDGET = {value}\n"
    with pytest.raises(loading.SpecError, match="KE_ERROR_BUDGET"):
        loading.load_spec(src, "bad_budget", str(tmp_path), {})
    no_tol = example(RELU) + "\nKE_ERROR_BUDGET = False\n"
    with pytest.raises(loading.SpecError, match="explicit KE_TOLERANCE"):
        loading.load_spec(no_tol, "no_tol", str(tmp_path), {})
