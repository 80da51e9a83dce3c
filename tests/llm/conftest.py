"""Fixtures of the LLM synthesizer tests: a scripted OpenAI-compatible server on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from kernelevolve.config import LlmSettings

from .fake_openai import FakeOpenAI

KEY = "sk-test-7f3a9c2e-never-leak-me"


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI(api_key=KEY).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def keyless() -> Iterator[FakeOpenAI]:
    """A local server that needs no key (vLLM, llama.cpp, Ollama as usually run)."""
    server = FakeOpenAI(api_key="").start()
    try:
        yield server
    finally:
        server.stop()


def llm_settings(fake: FakeOpenAI, **kw: Any) -> LlmSettings:
    base = LlmSettings(base_url=fake.url, models="model-a", backoff_s=0.01, request_timeout_s=10.0,
                       max_retries=2)
    return replace(base, **kw)
