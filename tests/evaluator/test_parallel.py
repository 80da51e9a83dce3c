"""Parallel judging on one device (judge/worker_pool.py, device_lock.py): the same verdicts as sequential
judging, verdicts in input order, timing never overlapping other workers' device work,
and lock waits not counted against a worker's timeouts."""

from __future__ import annotations

import threading

import pytest

from ke_evaluator.device_lock import DeviceLock
from ke_evaluator.judge import EvalJob, EvalOptions, Judge, TimingOptions, WorkerPoolOptions
from kernelevolve.errors import InvalidArgumentError

from .sources import candidate, example

RELU = "relu_scale_add"
MIX = [("ok_relu_scale_add", RELU), ("wrong_math", RELU), ("raise_in_forward", RELU), ("segfault_oob", RELU),
       ("ok_softmax_rows", "softmax_rows"), ("mutate_input", RELU), ("ok_autotuned_heuristics", RELU),
       ("stale_memory_empty", RELU)]


def test_parallel_workers_give_the_sequential_verdicts(judge: Judge, tmp_path) -> None:  # noqa: ANN001
    sequential = [judge.evaluate(example(spec), candidate(name), candidate_id=name).status for name, spec in MIX]
    opts = EvalOptions(device="cpu", correctness_trials=2, time_candidates=True, timing=TimingOptions(max_trials=3),
                       parallel_workers=2,
                       pool=WorkerPoolOptions(reuse_worker_after_failure=True, spare_worker=False),
                       scratch_dir=str(tmp_path))
    with Judge(opts) as pj:
        verdicts = pj.evaluate_many([(example(spec), candidate(name), name) for name, spec in MIX])
    assert [v.candidate_id for v in verdicts] == [name for name, _ in MIX]  # input order
    assert [v.status for v in verdicts] == sequential
    assert {v.evidence["worker"]["slot"] for v in verdicts} == {0, 1}  # both workers judged
    timed = [v for v in verdicts if v.status == "correct"]
    assert timed and all(v.candidate_timing is not None for v in timed)
    # While one worker times (exclusive), no other worker holds the device at all.
    holds = [(i, mode, start, end) for i, v in enumerate(verdicts)
             for mode, start, end in v.evidence.get("device_lock", {}).get("held", [])]
    assert any(mode == "exclusive" for _, mode, _, _ in holds)
    for i, mode, start, end in holds:
        if mode != "exclusive":
            continue
        for j, _, s2, e2 in holds:
            assert j == i or not (s2 < end and start < e2), (verdicts[i].candidate_id, verdicts[j].candidate_id)


def test_concurrent_evaluate_calls_share_the_pool(tmp_path) -> None:  # noqa: ANN001
    opts = EvalOptions(device="cpu", correctness_trials=2, time_candidates=False, parallel_workers=2,
                       scratch_dir=str(tmp_path))
    results: dict[int, str] = {}
    with Judge(opts) as pj:
        pj.warm_up()
        assert pj.workers_started == 2

        def call(k: int) -> None:
            results[k] = pj.evaluate(example(RELU), candidate("ok_relu_scale_add"), candidate_id=str(k)).status

        threads = [threading.Thread(target=call, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert pj.evaluate_many([]) == []
        job = EvalJob(example(RELU), candidate("wrong_math"), "w")
        assert [v.status for v in pj.evaluate_many([job])] == ["incorrect"]
        with pytest.raises(InvalidArgumentError):
            pj.evaluate_many([("only one field",)])
    assert results == {k: "correct" for k in range(4)}
    with pytest.raises(InvalidArgumentError):
        Judge(EvalOptions(device="cpu", parallel_workers=0))


def test_lock_waits_do_not_count_against_the_phase_timeouts(tmp_path) -> None:  # noqa: ANN001
    opts = EvalOptions(device="cpu", correctness_trials=2, time_candidates=False, compile_timeout_s=2.0,
                       run_timeout_s=2.0,
                       pool=WorkerPoolOptions(lock_wait_timeout_s=5.0, reuse_worker_after_failure=True),
                       scratch_dir=str(tmp_path))
    with Judge(opts) as pj:
        pj.warm_up()
        other = DeviceLock(pj.lock_dir)  # another worker timing: it has the device alone

        def evaluate_while_held(seconds: float):  # noqa: ANN202
            other.acquire("exclusive")
            timer = threading.Timer(seconds, other.release)
            timer.start()
            try:
                return pj.evaluate(example(RELU), candidate("ok_relu_scale_add"))
            finally:
                timer.join()

        waited = evaluate_while_held(3.0)  # longer than the compile timeout
        assert waited.status == "correct", waited.reason
        assert waited.evidence["device_lock"]["waited_s"]["shared"] >= 2.5
        stuck = evaluate_while_held(7.0)  # longer than the lock-wait limit
        assert stuck.status == "timeout" and "device lock" in stuck.reason
        other.close()
