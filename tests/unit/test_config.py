from __future__ import annotations

from pathlib import Path

import pytest

from kernelevolve.config import load_settings
from kernelevolve.errors import ConfigError


def test_defaults_then_yaml_then_env(tmp_path: Path) -> None:
    cfg = tmp_path / "ke.yaml"
    cfg.write_text("bus:\n  url: nats://from-yaml:4222\nsearch:\n  default_budget: 16\n"
                   "store:\n  secret_key: ${S3_SECRET}\n")
    s = load_settings(cfg, env={"S3_SECRET": "s3cr3t", "KE_SEARCH_DEFAULT_BUDGET": "32", "KE_LOG_LEVEL": "debug"})
    assert s.bus.url == "nats://from-yaml:4222"
    assert s.search.default_budget == 32  # env beats yaml
    assert s.store.secret_key == "s3cr3t"
    assert s.log_level == "debug"
    assert s.grpc.gateway_port == 50051  # default kept


@pytest.mark.parametrize(
    ("yaml_text", "env", "message"),
    [
        ("store:\n  secret_key: ${UNSET_VAR}\n", {}, "UNSET_VAR is not set"),
        ("bus:\n  nope: 1\n", {}, "unknown config key bus.nope"),
        ("search:\n  default_budget: many\n", {}, "not a valid int"),
        ("- a list\n", {}, "mapping at top level"),
        ("bus: 3\n", {}, "must be a mapping"),
        ("", {"KE_STORE_SECURE": "perhaps"}, "not a valid bool"),
    ],
)
def test_bad_config_fails_loudly(tmp_path: Path, yaml_text: str, env: dict[str, str], message: str) -> None:
    cfg = tmp_path / "ke.yaml"
    cfg.write_text(yaml_text)
    with pytest.raises(ConfigError, match=message):
        load_settings(cfg, env=env)


def test_missing_config_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "absent.yaml", env={})


def test_nested_sections_from_yaml_and_env(tmp_path: Path) -> None:
    """Sections inside sections (the evaluator's timing, cache, sandbox, pool) are read from
    YAML and from ``KE_<SECTION>_<SUBSECTION>_<FIELD>``; env beats YAML; "none" is None."""
    cfg = tmp_path / "ke.yaml"
    cfg.write_text("evaluator:\n  parallel_workers: 3\n  timing:\n    max_trials: 40\n    ci_target: 0.05\n"
                   "  sandbox:\n    memory_limit_bytes: null\n  pool:\n    spare_worker: false\n")
    s = load_settings(cfg, env={"KE_EVALUATOR_TIMING_MAX_TRIALS": "60", "KE_EVALUATOR_CACHE_LIMIT_BYTES": "4096",
                                "KE_EVALUATOR_POOL_REUSE_WORKER_AFTER_FAILURE": "true",
                                "KE_EVALUATOR_POOL_LOCK_WAIT_TIMEOUT_S": "none"})
    ev = s.evaluator
    assert ev.parallel_workers == 3
    assert ev.timing.max_trials == 60 and ev.timing.ci_target == 0.05 and ev.timing.min_trials is None
    assert ev.cache.limit_bytes == 4096 and ev.cache.fraction == 0.25
    assert ev.sandbox.memory_limit_bytes is None and ev.sandbox.network_isolation is True
    assert ev.pool.spare_worker is False and ev.pool.reuse_worker_after_failure is True
    assert ev.pool.lock_wait_timeout_s is None


@pytest.mark.parametrize(
    ("yaml_text", "env", "message"),
    [
        ("evaluator:\n  timing:\n    nope: 1\n", {}, "unknown config key evaluator.timing.nope"),
        ("evaluator:\n  timing: 3\n", {}, "evaluator.timing must be a mapping"),
        ("", {"KE_EVALUATOR_TIMING_MAX_TRIALS": "lots"}, "evaluator.timing.max_trials='lots' is not a valid int"),
    ],
)
def test_bad_nested_config_fails_loudly(tmp_path: Path, yaml_text: str, env: dict[str, str], message: str) -> None:
    cfg = tmp_path / "ke.yaml"
    cfg.write_text(yaml_text)
    with pytest.raises(ConfigError, match=message):
        load_settings(cfg, env=env)


@pytest.mark.parametrize(("env", "yaml", "screen"), [
    ({}, "", True),                                   # the default: every candidate screened first
    ({"KE_EVALUATOR_SCREEN": "false"}, "", False),    # the full protocol for every candidate
    ({"KE_EVALUATOR_SCREEN": "0"}, "", False),
    ({}, "evaluator:\n  screen: false\n", False),
    ({"KE_EVALUATOR_SCREEN": "true"}, "evaluator:\n  screen: false\n", True),  # the environment wins
])
def test_screening_is_on_by_default_and_can_be_turned_off(tmp_path: Path, env: dict[str, str], yaml: str,
                                                          screen: bool) -> None:
    cfg = tmp_path / "ke.yaml"
    cfg.write_text(yaml)
    assert load_settings(cfg, env=env).evaluator.screen is screen
