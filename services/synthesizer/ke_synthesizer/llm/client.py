"""The LLM port and its adapter over any OpenAI-compatible endpoint (the ``openai`` SDK).

``ChatBackend`` is what the synthesizer needs: one completion for a model and messages.
``OpenAIChat`` retries 429, 5xx, timeouts and refused connections with exponential
backoff (the SDK's own retries are off so that ours are the only ones, and counted),
maps a refused key to ``LlmAuthError`` and an endpoint that stays down to
``LlmUnavailable``. The key is passed in, read once by ``read_api_key``; it is never
logged and never part of an error message.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import openai

from ke_synthesizer.llm.tokens import count_tokens
from kernelevolve.config import LlmSettings
from kernelevolve.errors import ConfigError, LlmAuthError, LlmUnavailable, SynthesisError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Completion:
    text: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    attempts: int = 1
    # True when the endpoint reported no usage and tokens were estimated (tokens.py).
    estimated_usage: bool = False

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class ChatBackend(Protocol):
    async def complete(self, model: str, messages: list[dict[str, str]]) -> Completion:
        ...


def read_api_key(settings: LlmSettings, env: Mapping[str, str] | None = None) -> str:
    """The key from ``llm.api_key_file`` (a mounted Secret) or the ``llm.api_key_env`` variable."""
    if settings.api_key_file:
        path = Path(settings.api_key_file)
        if not path.is_file():
            raise ConfigError(f"llm.api_key_file {path} does not exist")
        return path.read_text().strip()
    env = os.environ if env is None else env
    key = env.get(settings.api_key_env, "")
    if not key:
        raise ConfigError(f"the LLM synthesizer needs an API key in ${settings.api_key_env} "
                          "(or llm.api_key_file)")
    return key


_RETRYABLE = (openai.RateLimitError, openai.InternalServerError, openai.APITimeoutError,
              openai.APIConnectionError)


class OpenAIChat:
    def __init__(self, settings: LlmSettings, api_key: str, *,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        if not settings.base_url:
            raise ConfigError("the LLM synthesizer needs llm.base_url (--llm-base-url)")
        self._s = settings
        self._key = api_key
        self._sleep = sleep

    def __repr__(self) -> str:  # never the key
        return f"OpenAIChat(base_url={self._s.base_url!r})"

    async def complete(self, model: str, messages: list[dict[str, str]]) -> Completion:
        s = self._s
        async with openai.AsyncOpenAI(base_url=s.base_url, api_key=self._key, timeout=s.request_timeout_s,
                                      max_retries=0) as client:
            last = ""
            for attempt in range(1, s.max_retries + 2):
                started = time.monotonic()
                try:
                    text, usage = await self._call(client, model, messages)
                except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
                    raise LlmAuthError(f"LLM endpoint {s.base_url} refused the API key "
                                       f"(HTTP {exc.status_code}) for model {model}") from None
                except _RETRYABLE as exc:
                    last = _describe(exc)
                    log.warning("llm request failed; retrying", extra={"model": model, "attempt": attempt,
                                                                       "error": last})
                    if attempt <= s.max_retries:
                        await self._sleep(s.backoff_s * 2 ** (attempt - 1))
                    continue
                except openai.APIStatusError as exc:
                    raise SynthesisError(f"LLM endpoint {s.base_url} rejected the request for model {model}: "
                                         f"HTTP {exc.status_code}") from None
                latency = time.monotonic() - started
                if usage is None:
                    prompt_tokens = sum(count_tokens(m["content"]) for m in messages)
                    return Completion(text, model, prompt_tokens, count_tokens(text), latency, attempt, True)
                return Completion(text, model, usage[0], usage[1], latency, attempt)
            raise LlmUnavailable(f"LLM endpoint {s.base_url} unavailable after {s.max_retries + 1} attempts "
                                 f"for model {model}: {last}")

    async def _call(self, client: openai.AsyncOpenAI, model: str,
                    messages: list[dict[str, str]]) -> tuple[str, tuple[int, int] | None]:
        s = self._s
        common: dict[str, Any] = {"model": model, "messages": messages, "temperature": s.temperature,
                                  "top_p": s.top_p, "max_tokens": s.max_tokens}
        if not s.stream:
            resp = await client.chat.completions.create(**common)
            text = (resp.choices[0].message.content or "") if resp.choices else ""
            usage = (resp.usage.prompt_tokens, resp.usage.completion_tokens) if resp.usage else None
            return text, usage
        parts: list[str] = []
        got: tuple[int, int] | None = None
        stream = await client.chat.completions.create(**common, stream=True,
                                                      stream_options={"include_usage": True})
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta and chunk.choices[0].delta.content:
                parts.append(chunk.choices[0].delta.content)
            if chunk.usage:
                got = (chunk.usage.prompt_tokens, chunk.usage.completion_tokens)
        return "".join(parts), got


def _describe(exc: Exception) -> str:
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}"
    if isinstance(exc, openai.APITimeoutError):
        return "request timed out"
    return "connection refused or reset"
