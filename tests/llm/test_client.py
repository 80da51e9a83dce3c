"""The OpenAI-compatible adapter against a real HTTP server on loopback: plain and
streamed replies, retries with backoff on 429/5xx/timeouts, a refused key, a dead endpoint."""

from __future__ import annotations

import socket

import pytest

from ke_synthesizer.llm.client import OpenAIChat
from ke_synthesizer.llm.keys import read_api_key
from kernelevolve.config import LlmSettings
from kernelevolve.errors import ConfigError, LlmAuthError, LlmUnavailable

from .conftest import KEY, llm_settings
from .fake_openai import FakeOpenAI, Hang, Status, Text

MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "write a kernel"}]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_reply_and_its_usage_come_back(fake: FakeOpenAI, stream: bool) -> None:
    fake.script(Text("```python\nclass ModelNew: ...\n```" * 3, prompt_tokens=321, completion_tokens=45))
    settings = llm_settings(fake, stream=stream, temperature=0.3, top_p=0.9, max_tokens=777)
    done = await OpenAIChat(settings, KEY).complete("model-a", MESSAGES)
    assert done.text == "```python\nclass ModelNew: ...\n```" * 3
    assert (done.prompt_tokens, done.completion_tokens, done.attempts) == (321, 45, 1)
    (req,) = fake.requests
    assert req.body["model"] == "model-a" and req.body["messages"] == MESSAGES
    assert (req.body["temperature"], req.body["top_p"], req.body["max_tokens"]) == (0.3, 0.9, 777)
    assert bool(req.body.get("stream")) is stream
    assert req.authorization == f"Bearer {KEY}"


@pytest.mark.parametrize("code", [429, 500, 503])
async def test_overload_and_server_errors_are_retried_with_backoff(fake: FakeOpenAI, code: int) -> None:
    fake.script(Status(code), Status(code), Text("ok"))
    slept: list[float] = []

    async def sleep(s: float) -> None:
        slept.append(s)

    done = await OpenAIChat(llm_settings(fake, backoff_s=0.5), KEY, sleep=sleep).complete("model-a", MESSAGES)
    assert done.text == "ok" and done.attempts == 3
    assert slept == [0.5, 1.0]  # exponential backoff


async def test_a_timeout_is_retried_then_the_endpoint_is_called_unavailable(fake: FakeOpenAI) -> None:
    fake.script(Hang(1.5), Hang(1.5))
    settings = llm_settings(fake, request_timeout_s=0.3, max_retries=1)
    with pytest.raises(LlmUnavailable, match="timed out"):
        await OpenAIChat(settings, KEY).complete("model-a", MESSAGES)
    assert len(fake.requests) == 2


async def test_a_refused_key_is_permanent_and_never_echoed(fake: FakeOpenAI) -> None:
    with pytest.raises(LlmAuthError) as err:
        await OpenAIChat(llm_settings(fake), "sk-wrong-key-123").complete("model-a", MESSAGES)
    assert "401" in str(err.value) and "sk-wrong-key-123" not in str(err.value)
    assert len(fake.requests) == 1  # no retry can help


async def test_a_dead_endpoint_is_unavailable_after_the_retries() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = LlmSettings(base_url=f"http://127.0.0.1:{port}/v1", models="m", max_retries=2, backoff_s=0.01)
    with pytest.raises(LlmUnavailable, match="after 3 attempts"):
        await OpenAIChat(settings, KEY).complete("m", MESSAGES)


def test_the_key_comes_from_the_named_variable_or_a_mounted_file(tmp_path) -> None:  # noqa: ANN001
    settings = LlmSettings(api_key_env="MY_LLM_KEY")
    assert read_api_key(settings, {"MY_LLM_KEY": "k1"}) == "k1"
    with pytest.raises(ConfigError, match=r"\$MY_LLM_KEY"):
        read_api_key(settings, {})
    (tmp_path / "key").write_text("k2\n")
    assert read_api_key(LlmSettings(api_key_file=str(tmp_path / "key")), {}) == "k2"
