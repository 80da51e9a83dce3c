"""LLM endpoints configured the way openai-SDK users do: OPENAI_API_KEY / OPENAI_BASE_URL,
keyless local servers, several endpoints (YAML, KE_LLM_ENDPOINTS, repeated flags) whose
models are arms of one bandit, and the order in which keys and base URLs are found. The
endpoints are scripted OpenAI-compatible servers on loopback."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from ke_cli import commands
from ke_cli.main import _parser, synthesizer_settings
from ke_synthesizer.llm import LlmSynthesizer, OpenAIChat, connect
from ke_synthesizer.llm.keys import NO_KEY, ApiKey, key_for
from kernelevolve.config import DEFAULT_LLM_BASE_URL, LlmEndpoint, LlmSettings, load_settings
from kernelevolve.errors import ConfigError, InvalidArgumentError, LlmAuthError
from kernelevolve.ports.synthesis import ProposalRequest

from .conftest import KEY
from .fake_openai import FakeOpenAI, Text
from .ops import CORRECT, SPEC, fenced

MESSAGES = [{"role": "user", "content": "write a kernel"}]
FAST = {"KE_LLM_BACKOFF_S": "0.01", "KE_LLM_MAX_RETRIES": "1", "KE_LLM_REQUEST_TIMEOUT_S": "10"}


# -- where the key comes from -----------------------------------------------------------------


def test_key_sources_in_order(tmp_path: Path) -> None:
    secret = tmp_path / "llm-key"
    secret.write_text("from-file\n")
    own_file = tmp_path / "own-key"
    own_file.write_text("own-file")
    everything = {"NAMED": "named", "KERNELEVOLVE_LLM_API_KEY": "product", "OPENAI_API_KEY": "sdk"}
    shared = LlmSettings(api_key_file=str(secret))
    ep = LlmEndpoint(name="e", base_url="http://127.0.0.1:9/v1", models="m")

    def key(endpoint: LlmEndpoint, env: dict[str, str], settings: LlmSettings = shared) -> tuple[str, str]:
        k = key_for(endpoint, settings, env)
        return k.value, k.source

    # 1. the variable named on purpose (--api-key-env, llm.api_key_env, an endpoint's own)
    assert key(LlmEndpoint(api_key_env="NAMED"), everything) == ("named", "$NAMED")
    with pytest.raises(ConfigError, match=r"\$NAMED, which is not set"):
        key(LlmEndpoint(api_key_env="NAMED"), {"OPENAI_API_KEY": "sdk"})  # never silently another key
    # 2. the endpoint's own Secret file
    assert key(LlmEndpoint(api_key_file=str(own_file)), everything) == ("own-file", f"file {own_file}")
    # 3. the product's variable, 4. llm.api_key_file, 5. OPENAI_API_KEY, 6. none
    assert key(ep, everything) == ("product", "$KERNELEVOLVE_LLM_API_KEY")
    assert key(ep, {"OPENAI_API_KEY": "sdk"}) == ("from-file", f"file {secret}")
    assert key(ep, {"OPENAI_API_KEY": "sdk"}, LlmSettings()) == ("sdk", "$OPENAI_API_KEY")
    assert key_for(ep, LlmSettings(), {}) is NO_KEY
    # keyless: none of the shared keys goes to a local server
    assert key_for(LlmEndpoint(keyless=True), shared, everything) is NO_KEY
    with pytest.raises(ConfigError, match="does not exist"):
        key(ep, {}, LlmSettings(api_key_file=str(tmp_path / "missing")))
    # the single endpoint of --llm-base-url/--model reads llm.api_key_env as its own
    (single,) = LlmSettings(api_key_env="NAMED").endpoint_list()
    assert key(single, everything) == ("named", "$NAMED")
    assert "product" not in repr(ApiKey("product", "$KERNELEVOLVE_LLM_API_KEY"))


def test_base_url_precedence_flag_then_config_then_openai_base_url_then_default() -> None:
    sdk = {"OPENAI_BASE_URL": "http://sdk:1/v1"}
    assert load_settings(env={}).llm.endpoint_list()[0].base_url == DEFAULT_LLM_BASE_URL
    assert load_settings(env=sdk).llm.base_url == "http://sdk:1/v1"
    assert load_settings(env={**sdk, "KE_LLM_BASE_URL": "http://conf:2/v1"}).llm.base_url == "http://conf:2/v1"
    args = _parser().parse_args(["optimize", "x.py", "--llm-base-url", "http://flag:3/v1"])
    assert synthesizer_settings(args, load_settings(env={**sdk, "KE_LLM_BASE_URL": "http://conf:2/v1"})
                                ).llm.base_url == "http://flag:3/v1"
    # A configured list of endpoints is not joined by OPENAI_BASE_URL.
    listed = load_settings(env={**sdk, "KE_LLM_ENDPOINTS": "[{base_url: 'http://a:4/v1', models: m}]"})
    assert listed.llm.base_url == "" and [e.base_url for e in listed.llm.endpoint_list()] == ["http://a:4/v1"]


# -- one endpoint, configured as openai-SDK users do ------------------------------------------------


async def test_openai_api_key_alone_is_sent(fake: FakeOpenAI) -> None:
    fake.script(Text("ok"))
    settings = load_settings(env={"OPENAI_BASE_URL": fake.url, "KE_LLM_MODELS": "model-a", **FAST}).llm
    done = await connect(settings, {"OPENAI_API_KEY": KEY}).complete("model-a", MESSAGES)
    assert done.text == "ok" and [r.authorization for r in fake.requests] == [f"Bearer {KEY}"]


async def test_openai_base_url_alone_reaches_a_keyless_server(keyless: FakeOpenAI) -> None:
    keyless.script(Text("ok"))
    settings = load_settings(env={"OPENAI_BASE_URL": keyless.url, "KE_LLM_MODELS": "local", **FAST}).llm
    done = await connect(settings, {}).complete("local", MESSAGES)  # no key variable at all
    assert done.text == "ok"
    (req,) = keyless.requests
    assert req.authorization == "" and req.model == "local"  # not even the SDK's placeholder


async def test_a_keyless_request_refused_says_how_to_set_a_key(fake: FakeOpenAI) -> None:
    settings = LlmSettings(base_url=fake.url, models="model-a", max_retries=2, backoff_s=0.01)
    with pytest.raises(LlmAuthError) as err:
        await connect(settings, {}).complete("model-a", MESSAGES)
    assert str(err.value) == (f"the endpoint at {fake.url} refused the request (401): it needs an API key; "
                              "set OPENAI_API_KEY, KERNELEVOLVE_LLM_API_KEY or --api-key-env")
    assert len(fake.requests) == 1 and fake.requests[0].authorization == ""


async def test_a_refused_key_names_its_source_never_its_value(fake: FakeOpenAI) -> None:
    chat = OpenAIChat(LlmSettings(base_url=fake.url), ApiKey("sk-wrong-1234", "$OPENAI_API_KEY"))
    with pytest.raises(LlmAuthError) as err:
        await chat.complete("model-a", MESSAGES)
    assert "refused the API key (401, key from $OPENAI_API_KEY)" in str(err.value)
    assert "sk-wrong-1234" not in str(err.value)
    assert "sk-wrong-1234" not in repr(chat)


# -- several endpoints, one bandit ---------------------------------------------------------------------


def _two_endpoints(local: FakeOpenAI, hosted: FakeOpenAI, tmp_path: Path) -> LlmSettings:
    cfg = tmp_path / "ke.yaml"
    cfg.write_text(f"""
llm:
  seed: 3
  endpoints:
    - name: local
      base_url: {local.url}
      models: drafter
      keyless: true
    - name: hosted
      base_url: {hosted.url}
      models: refiner, shared
      api_key_env: HOSTED_KEY
      prices: refiner=0.15/0.6
    - name: other
      base_url: {local.url}
      models: shared
      keyless: true
""")
    return load_settings(cfg, env=FAST).llm


def test_every_model_of_every_endpoint_is_an_arm_with_its_price(fake: FakeOpenAI, keyless: FakeOpenAI,
                                                                 tmp_path: Path) -> None:
    settings = _two_endpoints(keyless, fake, tmp_path)
    arms = {a.arm: (a.endpoint.name, a.model, a.price_in, a.price_out) for a in settings.arms()}
    assert arms == {"drafter": ("local", "drafter", 0.0, 0.0), "refiner": ("hosted", "refiner", 0.15, 0.6),
                    "shared@hosted": ("hosted", "shared", 0.0, 0.0), "shared@other": ("other", "shared", 0.0, 0.0)}
    assert settings.price_of("refiner") == (0.15, 0.6)


def test_two_endpoints_answer_one_bandit_each_with_its_own_key(fake: FakeOpenAI, keyless: FakeOpenAI,
                                                               tmp_path: Path) -> None:
    fake.responder = keyless.responder = lambda body: Text(fenced(CORRECT), prompt_tokens=1000,
                                                           completion_tokens=1000)
    settings = _two_endpoints(keyless, fake, tmp_path)
    # OPENAI_API_KEY is set too: the keyless endpoints must not receive it.
    synth = LlmSynthesizer(settings, connect(settings, {"HOSTED_KEY": KEY, "OPENAI_API_KEY": "sk-other"}))
    chosen = []
    for _ in range(8):
        (p,) = synth.propose(ProposalRequest(SPEC, "affine_relu", session_id="s"))
        assert p.rejected == ""
        synth.observe(p.genome, "correct", 1.2)
        chosen.append(p.genome["llm_model"])
    assert set(chosen) == {"drafter", "refiner", "shared@hosted", "shared@other"}
    assert {r.authorization for r in keyless.requests} == {""}
    assert {r.authorization for r in fake.requests} == {f"Bearer {KEY}"}
    assert {r.model for r in keyless.requests} == {"drafter", "shared"}
    assert {r.model for r in fake.requests} == {"refiner", "shared"}
    # the hosted refiner's price was charged: 1000 in + 1000 out at 0.15/0.6 per million
    assert synth.session_usage("s")["usd"] == pytest.approx(chosen.count("refiner") * 0.00075)


def test_an_endpoint_that_is_down_rests_while_the_other_answers(fake: FakeOpenAI) -> None:
    with socket.socket() as s:  # a local server that is not running
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    fake.responder = lambda body: Text(fenced(CORRECT))
    settings = LlmSettings(endpoints=(LlmEndpoint(name="local", base_url=dead, models="drafter", keyless=True),
                                      LlmEndpoint(name="hosted", base_url=fake.url, models="refiner")),
                           max_retries=1, backoff_s=0.01)
    synth = LlmSynthesizer(settings, connect(settings, {"KERNELEVOLVE_LLM_API_KEY": KEY}))
    for _ in range(3):
        (p,) = synth.propose(ProposalRequest(SPEC, "affine_relu", session_id="s"))
        assert p.genome["llm_model"] == "refiner" and p.rejected == ""
    assert synth.bandit.arms["drafter"].pulls == 1  # tried once, then left out
    assert len(fake.requests) == 3


def test_with_every_endpoint_down_the_error_is_the_sessions(fake: FakeOpenAI) -> None:
    settings = LlmSettings(endpoints=(LlmEndpoint(name="a", base_url=fake.url, models="m1", keyless=True),
                                      LlmEndpoint(name="b", base_url=fake.url, models="m2", keyless=True)))
    synth = LlmSynthesizer(settings, connect(settings, {}))
    with pytest.raises(LlmAuthError, match="needs an API key"):
        synth.propose(ProposalRequest(SPEC, "affine_relu", session_id="s"))
    assert sorted(r.model for r in fake.requests) == ["m1", "m2"]  # each endpoint asked once


def test_endpoint_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match="not both"):
        LlmSettings(base_url="http://a/v1", endpoints=(LlmEndpoint(base_url="http://b/v1"),)).endpoint_list()
    with pytest.raises(ConfigError, match="has no base_url"):
        LlmSettings(endpoints=(LlmEndpoint(name="x", models="m"),)).endpoint_list()
    with pytest.raises(ConfigError, match="keyless but names a key source"):
        LlmSettings(endpoints=(LlmEndpoint(base_url="http://b/v1", keyless=True, api_key_env="K"),)).endpoint_list()
    with pytest.raises(ConfigError, match="list of mappings"):
        load_settings(env={"KE_LLM_ENDPOINTS": "http://a/v1"})
    with pytest.raises(ConfigError, match=r"unknown config key llm.endpoints\[0\].url"):
        load_settings(env={"KE_LLM_ENDPOINTS": "[{url: 'http://a/v1'}]"})


# -- the flags ---------------------------------------------------------------------------------------


def _flags(*argv: str, env: dict[str, str] | None = None) -> LlmSettings:
    args = _parser().parse_args(["optimize", "x.py", "--synthesizer", "llm", *argv])
    return synthesizer_settings(args, load_settings(env=env or {})).llm


def test_repeated_base_url_flags_make_several_endpoints() -> None:
    llm = _flags("--model", "qwen", "--llm-base-url", "http://127.0.0.1:8000/v1", "--no-api-key",
                 "--llm-base-url", "https://api.example.com/v1", "--api-key-env", "HOSTED", "--model", "big",
                 "--model", "small")
    eps = [(e.base_url, e.models, e.api_key_env, e.keyless) for e in llm.endpoint_list()]
    assert eps == [("http://127.0.0.1:8000/v1", "qwen", "", True), ("https://api.example.com/v1", "big,small",
                                                                     "HOSTED", False)]
    assert llm.model_list == ("qwen", "big", "small")


def test_one_endpoint_flags_keep_their_meaning() -> None:
    llm = _flags("--llm-base-url", "http://h/v1", "--model", "m1", "--model", "m2", "--api-key-env", "MINE",
                 env={"KE_LLM_MODELS": "configured"})
    assert (llm.base_url, llm.models, llm.api_key_env, llm.endpoints) == ("http://h/v1", "m1,m2", "MINE", ())
    # --model alone keeps the configured (or OPENAI_BASE_URL) endpoint
    assert _flags("--model", "m", env={"OPENAI_BASE_URL": "http://sdk/v1"}).base_url == "http://sdk/v1"
    (ep,) = _flags("--no-api-key", "--model", "m", env={"OPENAI_BASE_URL": "http://sdk/v1"}).endpoint_list()
    assert (ep.base_url, ep.models, ep.keyless) == ("http://sdk/v1", "m", True)
    with pytest.raises(InvalidArgumentError, match="needs a URL and a --model"):
        _flags("--llm-base-url", "http://a/v1", "--llm-base-url", "http://b/v1", "--model", "m")
    with pytest.raises(InvalidArgumentError, match="belongs to"):
        _flags("--model", "m", env={"KE_LLM_ENDPOINTS": "[{base_url: 'http://a/v1', models: x}]"})


def test_config_show_lists_endpoints_and_no_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "ke.yaml"
    cfg.write_text("llm:\n  endpoints:\n    - {name: local, base_url: 'http://127.0.0.1:8000/v1', models: q, "
                   "keyless: true}\n    - {name: hosted, base_url: 'https://u:pw@api.example.com/v1', models: g, "
                   "api_key_env: HOSTED_KEY}\n")
    env = {"HOSTED_KEY": "sk-hosted-secret", "OPENAI_API_KEY": "sk-sdk-secret",
           "KERNELEVOLVE_LLM_API_KEY": "sk-product-secret"}
    settings = load_settings(cfg, env=env)
    args = _parser().parse_args(["config", "show", "--json"])
    assert commands.run(args, settings) == 0
    out = capsys.readouterr().out
    shown = json.loads(out)["llm"]["endpoints"]
    assert [e["name"] for e in shown] == ["local", "hosted"] and shown[0]["keyless"] is True
    assert shown[1]["base_url"] == "https://u:****@api.example.com/v1"
    assert shown[1]["api_key_env"] == "HOSTED_KEY"  # where the key is read, never the key
    assert not any(secret in out for secret in env.values())
