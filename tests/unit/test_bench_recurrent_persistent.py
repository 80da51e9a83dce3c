"""bench/recurrent_persistent.py on CPU: a recurrent example and the hidden-size sweep, the
per-step loop, the persistent and the resident kernel lowered and matching the reference; the knob not
offered past the capacity bound, which ``--max-weights`` moves for one run; nothing timed
without CUDA."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT


@pytest.mark.slow
def test_both_forms_match_the_reference_and_the_bound_moves_per_run(tmp_path: Path) -> None:
    # 300 hidden units: an LSTM (360,000 weights) stays past a bound of 300,000, a GRU
    # (270,000) fits it though past the family's own 65,536
    proc = subprocess.run([sys.executable, "recurrent_persistent.py", "--specs", "model_lstm_decoder_state",
                           "--hidden", "20,300", "--batch", "3", "--steps", "4", "--features", "7",
                           "--max-weights", "300000", "--resident-variants", "BLOCK_B=16,prefetch=off,precision=bogus",
                           "--out", str(tmp_path)], cwd=REPO_ROOT / "bench",
                          capture_output=True, text=True, timeout=600, env=dict(os.environ, TRITON_INTERPRET="1"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads((tmp_path / "recurrent_persistent.json").read_text())
    rows = {r["spec"]: r for r in result["rows"]}
    assert result["max_weights"] == 300000
    assert "not offered" in rows["sweep_lstm_h300"]["note"]
    for name in ("model_lstm_decoder_state", "sweep_lstm_h20", "sweep_gru_h20", "sweep_rnn_h20", "sweep_gru_h300",
                 "sweep_rnn_h300"):
        row = rows[name]
        assert row["timed"] is False, row
        assert row["per_step_max_abs_error"] < 1e-4 and row["persistent_max_abs_error"] < 1e-4, row
    # hidden 20 fits the resident form (timed at 16 rows a program too); 300 does not
    for name in ("model_lstm_decoder_state", "sweep_lstm_h20", "sweep_gru_h20", "sweep_rnn_h20"):
        row = rows[name]
        # a value the knob does not offer is not timed
        assert row["forms"] == ["per_step", "persistent", "resident", "resident_BLOCK_B_16",
                                "resident_prefetch_off"], row
        assert max(row[f"{f}_max_abs_error"] for f in row["forms"]) < 1e-4, row
    assert "resident" not in rows["sweep_gru_h300"]["forms"]
