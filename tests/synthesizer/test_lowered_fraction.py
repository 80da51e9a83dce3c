"""bench/lowered_fraction.py: the accounting of compute nodes lowered to Triton versus
left to library calls is consistent, and every example whose reference runs is captured
(no "cannot be traced" refusal: at worst a library-call candidate)."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from ke_synthesizer.offline.frontend.capture import capture
from tests.bench_scripts import load_bench_script
from tests.conftest import REPO_ROOT

EXAMPLE_FILES = sorted((REPO_ROOT / "examples" / "ops").glob("*.py")) + \
    sorted((REPO_ROOT / "examples" / "styles").glob("*.py"))
VALUE_BRANCH = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) if x.mean() > 0 else torch.tanh(x)


def get_inputs():
    return [torch.randn(5, 3)]


def get_init_inputs():
    return []
'''


def _bench() -> ModuleType:
    return load_bench_script("lowered_fraction")


def test_the_accounting_is_consistent(tmp_path: Path) -> None:
    value_branch = tmp_path / "value_branch.py"
    value_branch.write_text(VALUE_BRANCH)
    ops, styles = REPO_ROOT / "examples" / "ops", REPO_ROOT / "examples" / "styles"
    paths = [ops / "model_lstm_unrolled.py", styles / "model_dense_block.py", ops / "cross_entropy.py", value_branch]
    result = _bench().run(paths)
    rows = {r["spec"]: r for r in result["per_spec"]}
    assert set(rows) == {p.stem for p in paths}
    for row in rows.values():
        assert row["lowered"] + len(row["library"]) == row["compute"]
        assert 0 <= row["fraction"] <= 1
    assert result["compute_nodes"] == sum(r["compute"] for r in rows.values())
    assert result["lowered_nodes"] == sum(r["lowered"] for r in rows.values())
    # the dense block's convolutions, norms and activations are all Triton kernels, and so
    # are its concatenations now (the index family): no data movement is left to the library
    assert rows["model_dense_block"]["fraction"] == 1.0
    assert not rows["model_dense_block"]["data_movement_library"]
    # a forward no tracer takes counts as one compute node left to the library
    assert rows["value_branch"] == {**rows["value_branch"], "tracer": "library", "compute": 1, "lowered": 0,
                                    "library": ["forward"]}
    assert result["library_call_specs"] == ["value_branch"]


# Every k-th example, in the bench's own order: a fixed sample that moves over the whole
# set as examples come and go, cheap enough for the default run.
SAMPLE_EVERY = 20


def _committed() -> dict[str, object]:
    return json.loads((REPO_ROOT / "bench" / "results" / "lowered_fraction.json").read_text())  # type: ignore[no-any-return]


def test_the_committed_result_is_consistent_and_above_target() -> None:
    result = _committed()
    assert result["specs"] == len(result["per_spec"]) >= len(EXAMPLE_FILES) - 5  # type: ignore[arg-type]
    assert result["lowered_nodes"] == sum(r["lowered"] for r in result["per_spec"])  # type: ignore[attr-defined]
    assert result["lowered_fraction"] > 0.95  # type: ignore[operator]


def test_the_committed_result_is_what_the_code_computes_now() -> None:
    """The committed file is the bench's output for today's examples and today's code, not
    an old run: it lists exactly the current examples, and a sample of them recomputed now
    gives the committed rows (a lowering that regressed or a stale file fails here)."""
    bench = _bench()
    paths = sorted(p for d in bench.DEFAULT_DIRS for p in d.glob("*.py"))
    committed = {r["spec"]: r for r in _committed()["per_spec"]}  # type: ignore[attr-defined]
    assert sorted(committed) == sorted(p.stem for p in paths), \
        "bench/results/lowered_fraction.json is stale: run python bench/lowered_fraction.py"
    sample = paths[::SAMPLE_EVERY]
    assert len(sample) >= 5
    now = {r["spec"]: r for r in bench.run(sample)["per_spec"]}
    stale = {spec: (committed[spec], row) for spec, row in now.items() if row != committed[spec]}
    assert not stale, f"committed rows differ from what the code computes now (committed, now): {stale}"


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_example_is_captured_by_a_tracer(path: Path) -> None:
    spec = capture(path.read_text(), path.stem)  # raises InvalidSpecError on a refusal
    assert spec.tracer != "library", spec.library_reason
