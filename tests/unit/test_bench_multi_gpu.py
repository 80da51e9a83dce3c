"""bench/multi_gpu.py: the check that no timing shared its GPU, read from the device-lock
holds the verdicts record (the GPU run itself needs a host of several GPUs)."""

from __future__ import annotations

import pytest

from tests.bench_scripts import load_bench_script


@pytest.mark.parametrize(
    ("holds", "clashes"),
    [
        # two GPUs timing at the same moment: each has its own lock, no clash
        ([("0", "a", "exclusive", 0.0, 2.0), ("1", "b", "exclusive", 1.0, 3.0)], 0),
        # one GPU: a check (shared) inside another job's timing is a clash, seen from the timing
        ([("0", "a", "exclusive", 0.0, 2.0), ("0", "b", "shared", 1.5, 4.0)], 1),
        # back to back on one GPU (end == start) and the same job's own holds: no clash
        ([("0", "a", "exclusive", 0.0, 2.0), ("0", "b", "exclusive", 2.0, 3.0), ("0", "a", "shared", 0.5, 1.5)], 0),
        # two timings overlapping on one GPU: each sees the other
        ([("0", "a", "exclusive", 0.0, 2.0), ("0", "b", "exclusive", 1.0, 3.0)], 2),
        # shared holds of different jobs overlap freely (checks share a GPU)
        ([("0", "a", "shared", 0.0, 2.0), ("0", "b", "shared", 1.0, 3.0)], 0),
    ],
)
def test_timing_clashes_counts_exclusive_holds_that_meet_another_jobs_hold_of_the_same_gpu(
    holds: list[tuple[str, str, str, float, float]], clashes: int
) -> None:
    multi_gpu = load_bench_script("multi_gpu")
    assert len(multi_gpu.timing_clashes(holds)) == clashes
