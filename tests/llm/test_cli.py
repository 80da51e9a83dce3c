"""``kernelevolve optimize --synthesizer llm`` as a user runs it, against the scripted
endpoint: the repair loop end to end, the record of every prompt in the run folder, and
the API key nowhere (output, logs, run folder with the bus's JetStream data, sandbox)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ke_evaluator.judge.worker_environment import child_environment

from .conftest import KEY
from .fake_openai import FakeOpenAI, Text
from .ops import BROKEN, CORRECT, SPEC, fenced


def _user_env(**extra: str) -> dict[str, str]:
    """This environment without any LLM key or endpoint variable, plus ``extra``."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPENAI_", "KERNELEVOLVE_LLM_", "KE_LLM_", "KE_SYNTHESIZER_"))}
    return dict(env, KE_KNOWLEDGE_EMBEDDER="hash", KE_EVALUATOR_CORRECTNESS_TRIALS="2", **extra)


def _optimize(tmp_path: Path, env: dict[str, str], *flags: str) -> subprocess.CompletedProcess[str]:
    spec = tmp_path / "affine_relu.py"
    spec.write_text(SPEC)
    return subprocess.run([sys.executable, "-m", "ke_cli.main", "optimize", str(spec), "--budget", "2",
                           "--max-inflight", "1", "--json", "--out", str(tmp_path / "run"), "--synthesizer", "llm",
                           *flags], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=420)


@pytest.mark.e2e
def test_optimize_against_a_keyless_local_server_named_by_openai_base_url(tmp_path: Path,
                                                                          keyless: FakeOpenAI) -> None:
    keyless.script(Text(fenced(CORRECT)), Text(fenced(CORRECT + "\n_SECOND = 2\n")))
    proc = _optimize(tmp_path, _user_env(OPENAI_BASE_URL=keyless.url), "--model", "local-coder")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["status"] == "completed" and out["evaluated"] == 2 and out["best"]["status"] == "correct"
    assert [(r.model, r.authorization) for r in keyless.requests] == [("local-coder", "")] * 2


@pytest.mark.e2e
def test_optimize_against_an_endpoint_that_wants_a_key_says_how_to_set_one(tmp_path: Path,
                                                                           fake: FakeOpenAI) -> None:
    proc = _optimize(tmp_path, _user_env(OPENAI_BASE_URL=fake.url), "--model", "model-a")
    assert proc.returncode == 1
    assert (f"the endpoint at {fake.url} refused the request (401): it needs an API key; set OPENAI_API_KEY, "
            "KERNELEVOLVE_LLM_API_KEY or --api-key-env") in proc.stdout + proc.stderr


@pytest.mark.e2e
def test_optimize_with_the_llm_repairs_records_prompts_and_never_leaks_the_key(tmp_path: Path,
                                                                                fake: FakeOpenAI) -> None:
    fake.script(Text(fenced(BROKEN)), Text(fenced(CORRECT)))
    spec = tmp_path / "affine_relu.py"
    spec.write_text(SPEC)
    run = tmp_path / "run"
    env = dict(os.environ, KE_KNOWLEDGE_EMBEDDER="hash", KE_EVALUATOR_CORRECTNESS_TRIALS="2",
               KERNELEVOLVE_LLM_API_KEY=KEY, KE_LLM_BACKOFF_S="0.01")
    proc = subprocess.run([sys.executable, "-m", "ke_cli.main", "-v", "optimize", str(spec), "--budget", "2",
                           "--max-inflight", "1", "--json", "--out", str(run), "--synthesizer", "llm",
                           "--llm-base-url", fake.url, "--model", "model-a"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=420)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["status"] == "completed" and out["evaluated"] == 2
    assert out["best"]["status"] == "correct" and out["best"]["candidate_id"] == "r2-1"
    assert out["best"]["transformation"] == "llm_repair"
    lineage = json.loads((run / "lineage.json").read_text())
    text = json.dumps(lineage)
    assert "llm_repair" in text and "r1-1" in text
    record = json.loads((run / "llm" / "r2-1.json").read_text())
    assert record["template"] == "repair.v1" and record["model"] == "model-a"
    assert "maximmum" in record["messages"][1]["content"] and record["reply"] == fenced(CORRECT)
    assert [r.authorization for r in fake.requests] == [f"Bearer {KEY}"] * 2
    usage = json.loads((run / "llm" / "usage.json").read_text())
    assert (usage["requests"], usage["tokens"]) == (2, 300)  # two scripted replies of 100 + 50 tokens
    # The key: not in the output or the logs (-v), not in any file of the run folder,
    # which holds the bus's JetStream data (every message published) under .nats.
    assert KEY not in proc.stdout and KEY not in proc.stderr
    assert any((run / ".nats").rglob("*"))
    leaks = [p for p in run.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]
    assert leaks == []


def test_the_key_never_reaches_the_evaluators_sandbox(tmp_path: Path) -> None:
    parent = dict(os.environ, KERNELEVOLVE_LLM_API_KEY=KEY, KE_LLM_API_KEY_ENV="KERNELEVOLVE_LLM_API_KEY")
    env = child_environment(parent, scratch_dir=str(tmp_path), device="cpu", cuda_visible_devices=None,
                            pythonpath="")
    assert "KERNELEVOLVE_LLM_API_KEY" not in env and KEY not in "".join(env.values())
