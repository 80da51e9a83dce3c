"""bench/agreement.py: the comparison it draws (judge vs a fresh-process re-time), the
examples it takes, its fresh-process pieces on a tiny spec, and a CPU smoke run of the whole
script (the real judge, the offline seed, the child process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.bench_scripts import load_bench_script
from tests.conftest import REPO_ROOT

TINY_CONV = '''
import torch
import torch.nn as nn

torch.backends.cudnn.benchmark = True


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x))


def get_inputs():
    return [torch.randn(2, 3, 9, 7)]


def get_init_inputs():
    return []
'''


@pytest.fixture(scope="module")
def bench():  # noqa: ANN201 - a module loaded from a script
    return load_bench_script("agreement")


def test_every_default_spec_exists_and_the_issue_cases_are_in_it(bench) -> None:  # noqa: ANN001
    common = load_bench_script("common")
    for name in bench.DEFAULT_SPECS:
        assert (common.LARGE_DIR / f"{name}.py").exists() or common.example_path(name).exists(), name
    assert {"conv_transpose2d_upsample", "lstm_bidirectional"} <= set(bench.DEFAULT_SPECS)


@pytest.mark.parametrize(("judge", "fresh", "off"), [(1.55, 1.55, 0.0), (1.1, 1.0, 0.1), (0.9, 1.0, 0.1),
                                                     (6.0, 2.5, 1.4), (0.0, 1.0, None), (1.0, 0.0, None)])
def test_disagreement_is_relative_to_the_fresh_figure(bench, judge: float, fresh: float, off: float | None) -> None:  # noqa: ANN001
    got = bench.disagreement(judge, fresh)
    assert (got is None) if off is None else got == pytest.approx(off)


@pytest.mark.parametrize(("source", "bound"), [("nn.Conv2d(3, 4, 3)", True), ("nn.ConvTranspose2d(1, 1, 2)", True),
                                               ("F.conv1d(x, w)", True), ("nn.LSTM(8, 8)", True),
                                               ("nn.GRUCell(4, 4)", True), ("torch.softmax(x, -1)", False),
                                               ("nn.Linear(4, 4)", False)])
def test_cudnn_bound_examples_are_convolutions_and_recurrent_layers(bench, source: str, bound: bool) -> None:  # noqa: ANN001
    assert bench.cudnn_bound(source) is bound


def test_differences_name_what_the_two_timings_did_differently(bench) -> None:  # noqa: ANN001
    judge = {"precision": {"flags": {"cudnn.allow_tf32": "False", "cudnn.benchmark": "False"}},
             "timing_evidence": {"input_sets": 3, "fresh_values_each_round": True, "l2_flush": 40}}
    fresh = {"flags": {"cudnn.allow_tf32": "True", "cudnn.benchmark": "False"}, "inputs": {"same_layout": True}}
    d = bench.differences(judge, fresh)
    assert d["flags"] == {"cudnn.allow_tf32": {"judge": "False", "fresh": "True"}}
    assert d["input_sets"]["judge"] == 3 and d["input_sets"]["fresh"] == 1
    assert d["input_layouts_equal"] is True and d["grad_mode"] == {"judge": "no_grad", "fresh": "no_grad"}


def test_line_flags_a_disagreement(bench) -> None:  # noqa: ANN001
    row = {"spec": "lstm_bidirectional", "judge_speedup": 6.0, "fresh_speedup": 2.5, "disagreement": 1.4,
           "agree": False, "precision": "default", "fresh": {"strict_over_default": 1.7},
           "judge_strict": {"speedup": 6.1}}
    text = bench.line(row)
    assert "DISAGREE" in text and "judge 6.000x fresh 2.500x" in text and "strict/default 1.70x" in text
    assert "no comparison" in bench.line({"spec": "x", "spec_error": "reference raised"})


def test_fresh_pieces_on_a_tiny_conv_keep_the_process_flags(bench) -> None:  # noqa: ANN001
    from ke_evaluator.worker import precision as wp

    before = wp.read_flags()
    try:
        layouts = bench.input_layouts(TINY_CONV, "cpu")
        assert layouts["same_layout"] is True and layouts["fresh"][0]["shape"] == [2, 3, 9, 7]
        timed = bench.eager_under_contracts(TINY_CONV, "cpu")
        assert timed["eager_default_ms"] > 0 and timed["eager_strict_ms"] > 0
        assert timed["strict_flags"]["cudnn.allow_tf32"] == "False"
        # the spec's own flag (set at its import) is what "default" timed with, and what is left
        assert wp.read_flags()["cudnn.benchmark"] == "True"
    finally:
        wp.apply_flags(before)
    assert torch.backends.cudnn.benchmark is (before["cudnn.benchmark"] == "True")


@pytest.mark.slow
def test_cpu_smoke_run_compares_judge_and_fresh_process(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "agreement.py", "--device", "cpu", "--specs", "conv2d_bias_relu",
                           "--out", str(tmp_path)], cwd=REPO_ROOT / "bench", capture_output=True, text=True,
                          timeout=600, env=dict(os.environ, TRITON_INTERPRET="1"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads((tmp_path / "agreement.json").read_text())
    assert result["compared"] == 1 and result["disagree"] == [] and result["precision"] == "default"
    row = result["rows"][0]
    assert row["judge"]["status"] == "correct" and row["judge"]["precision"]["name"] == "default"
    assert row["judge_speedup"] > 0 and row["fresh_speedup"] > 0 and row["disagreement"] is not None
    assert "agree" not in row  # interpreter timings: compared, never judged
    assert row["cudnn_bound"] and row["judge_strict"]["precision"]["name"] == "strict"
    assert row["fresh"]["eager_strict_ms"] > 0 and row["differences"]["flags"] == {}
    assert "judge" in proc.stdout and "fresh" in proc.stdout


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_judge_and_fresh_process_agree_on_a_gpu(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "agreement.py", "--specs", "relu_scale_add,conv2d_bias_relu",
                           "--out", str(tmp_path)], cwd=REPO_ROOT / "bench", capture_output=True, text=True,
                          timeout=900)
    result = json.loads((tmp_path / "agreement.json").read_text())
    assert result["compared"] == 2, proc.stdout + proc.stderr[-2000:]
    assert proc.returncode == 0 and result["disagree"] == [], proc.stdout
    assert all(r["agree"] for r in result["rows"])
