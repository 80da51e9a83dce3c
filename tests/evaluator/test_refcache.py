"""Reference cache across candidates (worker/reference_cache.py): seeds from a per-Judge secret, cache
hits on the next candidate of a spec, the same verdicts as without the cache, and cheats
that try to exploit the cache still caught."""

from __future__ import annotations

import hashlib

import pytest

from ke_evaluator.judge import EvalOptions, Judge, ReferenceCacheOptions, WorkerPoolOptions
from kernelevolve.errors import InvalidArgumentError
from kernelevolve.ports.verdict import Verdict

from .sources import candidate, example

RELU = "relu_scale_add"
NO_CACHE = ReferenceCacheOptions(limit_bytes=0)


def _opts(tmp_path, **kw: object) -> EvalOptions:  # noqa: ANN001
    base: dict[str, object] = dict(device="cpu", correctness_trials=3, time_candidates=False,
                                   pool=WorkerPoolOptions(reuse_worker_after_failure=True),
                                   scratch_dir=str(tmp_path))
    base.update(kw)
    return EvalOptions(**base)  # type: ignore[arg-type]


def _cache(v: Verdict) -> dict:
    return v.evidence["reference_cache"]


def test_seeds_come_from_a_secret_per_judge_and_rotate() -> None:
    sha = hashlib.sha256(example(RELU).encode()).hexdigest()
    one = Judge(EvalOptions(device="cpu", cache=ReferenceCacheOptions(seed_rotation_jobs=3)))
    two = Judge(EvalOptions(device="cpu"))
    fixed, off = Judge(EvalOptions(device="cpu", seed=7)), Judge(EvalOptions(device="cpu", cache=NO_CACHE))
    try:
        slot = one._pool.slots[0]
        seeds = [one._seed_options(sha, slot) for _ in range(7)]
        assert all(s["seed_shared"] for s in seeds)
        assert [s["seed"] for s in seeds[:3]] == [seeds[0]["seed"]] * 3  # shared by 3 jobs of the spec ...
        assert len({s["seed"] for s in seeds}) == 3  # ... then a new one
        assert two._seed_options(sha, two._pool.slots[0])["seed"] != seeds[0]["seed"]  # another salt
        assert fixed._seed_options(sha, fixed._pool.slots[0]) == {"seed": 7}
        assert off._seed_options(sha, off._pool.slots[0]) == {"seed": None}  # random per evaluation
        # The salt itself never goes into a job.
        assert one._salt.hex() not in repr(one._job_options()) + repr(seeds)
    finally:
        for j in (one, two, fixed, off):
            j.close()


def test_next_candidate_of_a_spec_gets_cached_references(tmp_path) -> None:  # noqa: ANN001
    with Judge(_opts(tmp_path, cache=ReferenceCacheOptions(seed_rotation_jobs=2))) as judge:
        first = judge.evaluate(example(RELU), candidate("ok_relu_scale_add"), "a")
        second = judge.evaluate(example(RELU), candidate("ok_autotuned_heuristics"), "b")
        rotated = judge.evaluate(example(RELU), candidate("ok_relu_scale_add"), "c")
    assert [v.status for v in (first, second, rotated)] == ["correct"] * 3
    assert len({v.evidence["worker"]["pid"] for v in (first, second, rotated)}) == 1
    assert _cache(first)["reference_outputs"] == "computed" and _cache(first)["input_sets_cached"] == 0
    assert _cache(second)["reference_outputs"] == "cached"
    assert _cache(second)["input_sets_generated"] == 0 and _cache(second)["float64_cached"] == 1
    # Trial 0's reference still runs after the candidate, and agrees with the cached copy.
    assert "bitwise" in _cache(second)["trial0_reference"]
    # Per-job values for trial 1 and the extra shape sets: never from the cache.
    assert "trial 1, the extra shape sets" in _cache(second)["fresh_values"]
    assert _cache(second)["input_sets_cached"] == 2  # trials 0 and 2
    assert _cache(rotated)["reference_outputs"] == "computed"  # a new seed after 2 jobs
    assert first.evidence["seed_id"] == second.evidence["seed_id"] != rotated.evidence["seed_id"]
    for v in (first, second, rotated):
        assert v.evidence["seed_source"] == "shared" and "seed" not in v.evidence  # never reported
        assert set(v.evidence["error_budget"]) == {"trial 0", "trial 1", "extra set 0"}


def test_cached_references_give_the_verdicts_of_the_uncached_path(tmp_path) -> None:  # noqa: ANN001
    spec = example(RELU)
    names = ["ok_relu_scale_add", "hardcoded_shape", "ok_relu_scale_add", "wrong_math", "ok_autotuned_heuristics"]
    with Judge(_opts(tmp_path / "plain", seed=1234, cache=NO_CACHE)) as plain:
        expected = [plain.evaluate(spec, candidate(n)) for n in names]
    with Judge(_opts(tmp_path / "cached", seed=1234)) as cached:
        got = [cached.evaluate(spec, candidate(n)) for n in names]
    assert not any(_cache(v)["enabled"] for v in expected)
    assert _cache(got[2])["reference_outputs"] == "cached"
    assert _cache(got[4])["reference_outputs"] == "cached"
    for e, g in zip(expected, got, strict=True):
        assert (g.status, g.reason) == (e.status, e.reason)
        assert g.evidence["seed"] == e.evidence["seed"] == 1234
        if e.correctness is not None:
            assert g.correctness is not None and g.correctness.details == e.correctness.details
        assert g.evidence.get("error_budget") == e.evidence.get("error_budget")
        assert g.evidence.get("deterministic") == e.evidence.get("deterministic")
    assert [v.status for v in got] == ["correct", "incorrect", "correct", "incorrect", "correct"]
    assert "extra shape set" in got[1].reason  # the cached extra sets still catch hard-coded shapes


def test_cheats_are_still_caught_with_cached_references(tmp_path) -> None:  # noqa: ANN001
    """Runtime defenses alone (no static policy), one worker, candidates of one spec back to
    back so every one is served cached inputs and references."""
    writer = candidate("cross_job_store")
    reader = writer.replace("WRITER = True", "WRITER = False")
    assert reader != writer
    with Judge(_opts(tmp_path, enforce_static_policy=False,
                     cache=ReferenceCacheOptions(seed_rotation_jobs=50))) as judge:
        honest = judge.evaluate(example(RELU), candidate("ok_relu_scale_add"))
        ptr1 = judge.evaluate(example(RELU), candidate("pointer_cache"))
        ptr2 = judge.evaluate(example(RELU), candidate("pointer_cache"))
        wrote = judge.evaluate(example(RELU), writer)
        read = judge.evaluate(example(RELU), reader)
        # Right on the benchmark shape only, stored answers for the others: still caught.
        shaped = judge.evaluate(example(RELU), reader.replace("return y * 1.5", "return y if x.shape[0] == 64 "
                                                                               "else y * 1.5"))
        after = judge.evaluate(example(RELU), candidate("ok_relu_scale_add"))
        value = judge.evaluate(example(RELU), candidate("value_cache"))
        tamper = judge.evaluate(example(RELU), candidate("cache_tamper"))
        final = judge.evaluate(example(RELU), candidate("ok_relu_scale_add"))
    run = [honest, ptr1, ptr2, wrote, read, shaped, after]
    assert len({v.evidence["worker"]["pid"] for v in run}) == 1  # one worker, one cache
    for v in run[1:]:
        assert _cache(v)["input_sets_cached"] > 0 and _cache(v)["input_sets_generated"] == 0
    # Address-keyed cache: new values in trial 0's buffers, as without the cache.
    for v in (ptr1, ptr2):
        assert v.status == "incorrect" and "same buffers as trial 0" in v.reason
    # Answers left by an earlier candidate pass the cached sets but not trial 1's fresh values.
    assert wrote.status == "correct", wrote.reason
    assert read.status == "incorrect" and "(trial 1 (same buffers as trial 0, new values))" in read.reason
    assert shaped.status == "incorrect" and "(extra shape set 0)" in shaped.reason
    assert after.status == "correct" and _cache(after)["reference_outputs"] == "cached"
    assert value.status == "rejected" and "same output memory on two calls" in value.reason
    # Writing into the evaluator's cached tensors is seen by their checksums.
    assert tamper.status == "rejected" and "cached inputs or reference changed" in tamper.reason
    assert final.status == "correct", final.reason


def test_cache_cap_is_respected(tmp_path) -> None:  # noqa: ANN001
    with Judge(_opts(tmp_path, cache=ReferenceCacheOptions(limit_bytes=4096))) as judge:  # smaller than one spec's sets
        a = judge.evaluate(example(RELU), candidate("ok_relu_scale_add"))
        b = judge.evaluate(example(RELU), candidate("ok_relu_scale_add"))
    assert a.status == b.status == "correct"
    assert _cache(b)["reference_outputs"] == "computed" and _cache(b)["bytes"] == 0
    assert _cache(a)["kept"].startswith("no")


def test_bad_cache_options_are_refused() -> None:
    with pytest.raises(InvalidArgumentError):
        Judge(EvalOptions(device="cpu", cache=ReferenceCacheOptions(limit_bytes=-1)))
    with pytest.raises(InvalidArgumentError):
        Judge(EvalOptions(device="cpu", cache=ReferenceCacheOptions(seed_rotation_jobs=0)))


@pytest.mark.parametrize("train", [False, True])
def test_a_float64_run_on_the_host_lets_the_device_lock_go_unless_it_replays_draws(train: bool) -> None:
    """The host's float64 run (seconds to minutes) happens with the device lock let go, after
    its copies were made; a run that replays eager's random draws reads them from the
    device during the run, and keeps the lock."""
    import contextlib
    from collections.abc import Iterator

    import torch

    from ke_evaluator.worker import reference_cache

    model = torch.nn.Sequential(torch.nn.Linear(7, 5), torch.nn.Dropout(0.3)).train(train)
    x = torch.randn(3, 7)
    entered: list[int] = []

    @contextlib.contextmanager
    def unlocked() -> Iterator[None]:
        entered.append(1)
        yield

    out = reference_cache.float64_reference(model, [x], torch.device("cpu"), seed=11,
                                            draws_on=torch.device("cpu") if train else None, unlocked=unlocked)
    assert out.dtype == torch.float64 and out.shape == (3, 5)
    assert entered == ([] if train else [1])
    if not train:
        assert torch.allclose(out, model.double()(x.double()))


@pytest.mark.parametrize("shape", [(1,), (7, 33), (1000, 3)])
def test_baseline_times_are_kept_per_spec_shapes_and_device(shape: tuple[int, ...]) -> None:
    """The eager baseline's timing, once per (spec, input shapes and dtypes, device): another
    shape, dtype, spec or device is another entry; least recently used out first."""
    import torch

    from ke_evaluator.worker import reference_cache

    times = reference_cache.BaselineTimes(limit=2)
    x = [torch.zeros(shape), 3]
    key = times.key("spec-a", x, "H200")
    assert times.get(key) is None and times.misses == 1
    times.put(key, {"median_ms": 1.5, "samples_ms": [1.4, 1.5, 1.6]})
    got = times.get(key)
    assert got == {"median_ms": 1.5, "samples_ms": [1.4, 1.5, 1.6]} and times.hits == 1
    got["median_ms"] = 0.0  # a copy: the caller cannot change what is kept
    assert times.get(key) == {"median_ms": 1.5, "samples_ms": [1.4, 1.5, 1.6]}
    # same shapes, new values: the same entry (a timing does not depend on them)
    assert times.key("spec-a", [torch.ones(shape), 3], "H200") == key
    others = [times.key("spec-b", x, "H200"), times.key("spec-a", [torch.zeros(shape, dtype=torch.float16), 3], "H200"),
              times.key("spec-a", x, "H100"), times.key("spec-a", [torch.zeros((*shape, 2)), 3], "H200")]
    assert len({key, *others}) == 5
    times.put(others[0], {"median_ms": 2.0})
    times.get(key)  # used: the other is evicted first
    times.put(others[1], {"median_ms": 3.0})
    assert len(times) == 2 and times.get(others[0]) is None and times.get(key) is not None
    off = reference_cache.BaselineTimes(limit=0)
    off.put(key, {"median_ms": 1.0})
    assert off.get(key) is None
