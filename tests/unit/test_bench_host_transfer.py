"""bench/host_transfer.py on the CPU: every variant is measured and every comparison passes."""

from __future__ import annotations

import pytest

from tests.bench_scripts import load_bench_script


@pytest.mark.parametrize("elements", [4097, 1 << 14])
def test_host_transfer_measures_every_variant(elements: int) -> None:
    bench = load_bench_script("host_transfer")
    rows = bench.run(elements, "cpu")
    assert rows["elements"] == elements and rows["bytes"] == 4 * elements
    assert all(rows[k] >= 0 for k in ("to_host_s", "to_host_again_s", "back_to_device_s", "float64_to_host_s"))
    seen = {(c["reference_on"], c["chunk"], c["float64_pass"]) for c in rows["compare"]}
    assert len(seen) == 12  # host/device x three chunk sizes x with/without the float64 pass
    assert all(c["ok"] for c in rows["compare"])
