"""LLM settings from YAML, the environment and the ``optimize`` flags; the registry of
synthesizers by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from ke_cli.main import _parser, synthesizer_settings
from ke_synthesizer.composite import Hybrid, WithFallback
from ke_synthesizer.llm import LlmSynthesizer
from ke_synthesizer.registry import SYNTHESIZERS, make_synthesizer
from kernelevolve.config import load_settings
from kernelevolve.errors import ConfigError


def test_yaml_then_environment(tmp_path: Path) -> None:
    cfg = tmp_path / "ke.yaml"
    cfg.write_text("synthesizer: {kind: offline+llm}\nllm:\n  base_url: http://127.0.0.1:9/v1\n"
                   "  models: a, b\n  prices: a=1/2,b=3\n  repair_attempts: 3\n")
    s = load_settings(cfg, env={"KE_LLM_TEMPERATURE": "0.2", "KE_LLM_SESSION_TOKEN_BUDGET": "5000"})
    assert s.synthesizer.kind == "offline+llm" and s.llm.model_list == ("a", "b")
    assert s.llm.price_of("a") == (1.0, 2.0) and s.llm.price_of("b") == (3.0, 3.0) and s.llm.price_of("c") == (0, 0)
    assert (s.llm.temperature, s.llm.session_token_budget, s.llm.repair_attempts) == (0.2, 5000, 3)


def test_optimize_flags_override_the_config() -> None:
    args = _parser().parse_args(["optimize", "x.py", "--synthesizer", "llm", "--llm-base-url", "http://h/v1",
                                 "--model", "m1", "--model", "m2", "--fallback", "offline"])
    s = synthesizer_settings(args, load_settings(env={}))
    assert s.synthesizer.kind == "llm" and s.llm.base_url == "http://h/v1"
    assert s.llm.model_list == ("m1", "m2") and s.llm.fallback == "offline"


def test_the_registry_builds_each_kind_by_name() -> None:
    env = {"KE_LLM_BASE_URL": "http://127.0.0.1:9/v1", "KE_LLM_MODELS": "m", "KERNELEVOLVE_LLM_API_KEY": "k"}
    assert {"offline", "llm", "offline+llm"} <= set(SYNTHESIZERS)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KERNELEVOLVE_LLM_API_KEY", "k")
        assert isinstance(make_synthesizer(load_settings(env={**env, "KE_SYNTHESIZER_KIND": "llm"})), LlmSynthesizer)
        assert isinstance(make_synthesizer(load_settings(env={**env, "KE_SYNTHESIZER_KIND": "offline+llm"})), Hybrid)
        both = load_settings(env={**env, "KE_SYNTHESIZER_KIND": "llm", "KE_LLM_FALLBACK": "offline"})
        assert isinstance(make_synthesizer(both), WithFallback)
        mp.delenv("KERNELEVOLVE_LLM_API_KEY")
        mp.delenv("OPENAI_API_KEY", raising=False)
        # No key anywhere: a keyless endpoint (a local server); a variable named on purpose must be set.
        assert isinstance(make_synthesizer(load_settings(env={**env, "KE_SYNTHESIZER_KIND": "llm"})), LlmSynthesizer)
        with pytest.raises(ConfigError, match=r"\$MY_KEY, which is not set"):
            make_synthesizer(load_settings(env={**env, "KE_SYNTHESIZER_KIND": "llm", "KE_LLM_API_KEY_ENV": "MY_KEY"}))
    with pytest.raises(ConfigError, match=r"available: .*offline\+llm"):
        make_synthesizer(load_settings(env={"KE_SYNTHESIZER_KIND": "gpt"}))
