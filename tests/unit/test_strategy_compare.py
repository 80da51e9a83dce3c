"""The strategy-comparison benchmark (bench/strategy_compare.py) on CPU: a tiny budget on
one example with the doubles (fast), and with the real judge and offline synthesizer
(slow: the Triton interpreter)."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from tests.bench_scripts import load_bench_script
from tests.unit.fakes import FakeJudge, FakeSynthesizer


def _bench_module() -> ModuleType:
    return load_bench_script("strategy_compare")


def test_compare_reports_best_and_evaluations_to_95_percent_per_strategy() -> None:
    bench = _bench_module()
    rows = bench.compare(["gelu_residual"],
                         ["greedy", "one-shot"], 4, judge=FakeJudge(), synthesizer=FakeSynthesizer(max_children=2),
                         hardware_kind="cpu")
    assert [r["strategy"] for r in rows] == ["greedy", "one-shot"]
    for r in rows:
        assert "bench_error" not in r, r.get("bench_error")
        assert r["best_speedup"] > 0 and 1 <= r["evals_to_95"] <= r["evaluated"] <= 4
    # one-shot stops when the root has no more seeds; greedy spends the whole budget.
    assert rows[0]["evaluated"] == 4 and rows[1]["end_reason"] == "search space exhausted"
    summary = bench.per_strategy(rows)
    # FakeJudge: speedup grows with the block; greedy doubles it along a chain, one-shot cannot.
    assert summary["greedy"]["mean_best_speedup"] > summary["one-shot"]["mean_best_speedup"]


@pytest.mark.slow
def test_cpu_smoke_with_the_real_judge_writes_its_json(tmp_path: Path) -> None:
    bench = _bench_module()
    bench.main(["--out", str(tmp_path), "--budget", "2", "--strategies", "greedy,mcts", "--specs",
                "gelu_residual", "--device", "cpu"])
    data = json.loads((tmp_path / "strategy_compare.json").read_text())
    assert data["device"] == "cpu" and data["fingerprint"]["torch"] and data["date"]
    assert {r["strategy"] for r in data["rows"]} == {"greedy", "mcts"}
    assert all("bench_error" not in r for r in data["rows"]), data["rows"]
    assert set(data["per_strategy"]) == {"greedy", "mcts"}
