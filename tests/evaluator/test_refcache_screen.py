"""The screen's cached reference (worker/reference_cache.py): where it lives between jobs
(``keep_on_device`` against a fake memory budget, ``JobReferences.keep_on``), and which
checksums a screen recomputes (only what it reads; a host-held float64 reference only when
read) while a changed cached value is still never used."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from ke_evaluator.worker import reference_cache as rc

GIB = 2**30
KEY: rc.CacheKey = ("spec:default", 7, "init")


@pytest.mark.parametrize(("nbytes", "resident", "budget", "available", "reserve", "kept"), [
    (4 * GIB, 0, 34 * GIB, 120 * GIB, 20 * GIB, True),      # a 4 GiB output, an empty device cache
    (4 * GIB, 31 * GIB, 34 * GIB, 120 * GIB, 20 * GIB, False),  # over the cache's share beside what it holds
    (4 * GIB, 30 * GIB, 34 * GIB, 120 * GIB, 20 * GIB, True),   # exactly the share
    (4 * GIB, 0, 34 * GIB, 23 * GIB, 20 * GIB, False),      # would eat into the next job's peak
    (4 * GIB, 0, 34 * GIB, 24 * GIB, 20 * GIB, True),
    (0, 0, 34 * GIB, 120 * GIB, 0, False),                  # nothing to keep
    (1, 0, 0, 120 * GIB, 0, False),                         # no budget (the cache is off)
    (33, 0, 64, 97, 64, True),                              # odd sizes
    (33, 32, 64, 1000, 7, False),
])
def test_the_screen_reference_stays_on_the_device_only_while_it_fits(nbytes: int, resident: int, budget: int,
                                                                     available: int, reserve: int,
                                                                     kept: bool) -> None:
    assert rc.keep_on_device(nbytes, resident_bytes=resident, budget_bytes=budget, available_bytes=available,
                             reserve_bytes=reserve) is kept


def _entry(n: int, ref64: bool = True) -> rc.Entry:
    inputs = [torch.randn(n)]
    ref = torch.randn(n)
    e = rc.Entry(inputs=inputs, inputs_sum=rc.checksum(inputs), ref=ref, ref_sum=rc.checksum(ref))
    if ref64:
        e.ref64, e.ref64_sum = ref.double(), rc.checksum(ref.double())
    return e


def _cache_with(entries: dict[str, rc.Entry]) -> rc.RefCache:
    cache = rc.RefCache(1 << 30)
    assert cache.put(KEY, rc.Bundle(entries=dict(entries)))
    return cache


class Counting:
    """Counts the checksums taken (the work a screen should not repeat)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        real = rc.checksum

        def counted(obj: Any) -> tuple[Any, ...]:
            self.calls += 1
            return real(obj)

        monkeypatch.setattr(rc, "checksum", counted)


@pytest.mark.parametrize("n", [1, 7, 33, 1000])
def test_a_screen_verifies_only_the_set_it_reads(n: int, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = _cache_with({rc.SCREEN_SET: _entry(n), "trial 2": _entry(n), "extra shape set 0": _entry(n)})
    count = Counting(monkeypatch)
    screen = rc.JobReferences(cache, KEY, shared=True, reads=(rc.SCREEN_SET,))
    # The screen set's inputs and eager output; its host-held float64 output waits until read.
    assert count.calls == 2 and screen.bundle is not None
    assert screen.unchanged(rc.SCREEN_SET) and count.calls == 4
    count.calls = 0
    full = rc.JobReferences(cache, KEY, shared=True)
    assert count.calls == 9 and full.bundle is not None  # a full job: every cached tensor, as before


@pytest.mark.parametrize("n", [1, 33, 1000])
def test_a_change_to_a_set_the_screen_does_not_read_is_caught_by_the_next_job_that_reads_it(n: int) -> None:
    cache = _cache_with({rc.SCREEN_SET: _entry(n), "extra shape set 0": _entry(n)})
    screen = rc.JobReferences(cache, KEY, shared=True, reads=(rc.SCREEN_SET,))
    screen.bundle.entries["extra shape set 0"].ref.add_(1.0)  # type: ignore[union-attr]  # a stray write
    assert screen.unchanged(rc.SCREEN_SET)  # the screen's own values are intact
    screen.finish()
    full = rc.JobReferences(cache, KEY, shared=True)
    assert full.stats["dropped"] == "a cached tensor changed since it was stored" and len(cache) == 0
    assert full.bundle is not None and not full.bundle.entries  # nothing of the changed bundle is used


@pytest.mark.parametrize(("n", "dtype"), [(1, torch.float32), (7, torch.float16), (1000, torch.bfloat16)])
def test_a_screen_reads_a_changed_float64_reference_never(n: int, dtype: torch.dtype) -> None:
    entry = _entry(n)
    entry.ref64 = entry.ref.to(dtype).double()
    entry.ref64_sum = rc.checksum(entry.ref64)
    cache = _cache_with({rc.SCREEN_SET: entry})
    screen = rc.JobReferences(cache, KEY, shared=True, reads=(rc.SCREEN_SET,))
    entry.ref64[0] += 1.0  # changed while the candidate ran
    assert screen.unchanged(rc.SCREEN_SET)  # not checked after the call (host-held, maybe never read)...
    fresh = torch.full((n,), 3.0, dtype=torch.float64)
    got = screen.float64(rc.SCREEN_SET, lambda: fresh)
    assert got is fresh  # ...but checked when read: recomputed, the bundle dropped
    assert "float64 reference changed" in screen.stats["dropped"] and len(cache) == 0
    intact = _cache_with({rc.SCREEN_SET: _entry(n)})
    again = rc.JobReferences(intact, KEY, shared=True, reads=(rc.SCREEN_SET,))
    kept = intact.get(KEY).entries[rc.SCREEN_SET].ref64  # type: ignore[union-attr]
    assert again.float64(rc.SCREEN_SET, lambda: fresh) is kept


def test_a_full_job_still_rejects_a_change_to_the_float64_reference_after_the_call() -> None:
    entry = _entry(33)
    cache = _cache_with({rc.SCREEN_SET: entry})
    full = rc.JobReferences(cache, KEY, shared=True)
    entry.ref64[3] = -1.0  # type: ignore[index]
    assert not full.unchanged(rc.SCREEN_SET)


@pytest.mark.parametrize("n", [1, 7, 33, 1000])
def test_keep_on_moves_a_verified_copy_within_budget(n: int) -> None:
    entry = _entry(n)
    host_ref = entry.ref
    cache = _cache_with({rc.SCREEN_SET: entry})
    refs = rc.JobReferences(cache, KEY, shared=True, reads=(rc.SCREEN_SET,))
    moved: list[torch.Tensor] = []

    def move(t: torch.Tensor) -> torch.Tensor:  # the device copy (a clone: there is no GPU here)
        moved.append(t.clone())
        return moved[-1]

    asked: list[tuple[int, int]] = []
    assert refs.keep_on(rc.SCREEN_SET, lambda b, r: asked.append((b, r)) is None and False, move) \
        == "on the host (does not fit the device budget)"
    assert asked == [(4 * n, 0)] and not moved and entry.ref is host_ref
    assert refs.keep_on(rc.SCREEN_SET, lambda b, r: True, move) == "moved to the device"
    assert entry.ref is moved[0] and torch.equal(entry.ref, host_ref) and refs.unchanged(rc.SCREEN_SET)
    assert refs.keep_on("trial 1", lambda b, r: True, move) == ""  # no such entry: nothing to do


def test_keep_on_never_moves_a_value_changed_on_the_host() -> None:
    entry = _entry(64)
    cache = _cache_with({rc.SCREEN_SET: entry})
    refs = rc.JobReferences(cache, KEY, shared=True, reads=(rc.SCREEN_SET,))
    entry.ref[5] = 123.0  # changed since it was stored (and since the job verified it)
    assert refs.keep_on(rc.SCREEN_SET, lambda b, r: True, lambda t: t.clone()) == "dropped (changed on the host)"
    assert len(cache) == 0 and refs.bundle is None


def test_the_cache_counts_its_device_bytes_apart() -> None:
    entry = _entry(10, ref64=False)
    cache = _cache_with({rc.SCREEN_SET: entry})
    assert cache.device_bytes() == 0  # all on the host here
    assert rc.on_host([entry.ref]) and not rc.on_host([1, "x"])


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_a_gpu_screens_read_the_eager_output_kept_on_the_device(tmp_path) -> None:  # noqa: ANN001
    from ke_evaluator.judge import EvalOptions, Judge, TimingOptions

    from .sources import candidate, example

    # 131072 x 257 float32: 134 MB, above memory.HOST_SPILL_BYTES, so its eager output
    # would wait on the host without the placement.
    spec = example("relu_scale_add").replace("BATCH, FEATURES = 64, 257", "BATCH, FEATURES = 131072, 257")
    assert "131072" in spec
    with Judge(EvalOptions(device="cuda", correctness_trials=3, scratch_dir=str(tmp_path),
                           timing=TimingOptions(max_trials=10))) as judge:
        full = judge.evaluate(spec, candidate("ok_relu_scale_add"), "full")
        assert full.status == "correct", full.reason
        assert full.evidence["reference_cache"].get("screen_reference") == "moved to the device", \
            full.evidence["reference_cache"]
        screens = [judge.evaluate(spec, candidate("ok_relu_scale_add"), f"s{i}", tier="screen") for i in range(2)]
    for s in screens:
        assert s.status == "correct" and s.tier == "screen", s.reason
        cache = s.evidence["reference_cache"]
        assert cache["reference_outputs"] == "cached" and "screen_reference" not in cache, cache
