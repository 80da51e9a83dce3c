"""The LLM port and its adapter over OpenAI-compatible endpoints (the ``openai`` SDK).

``ChatBackend`` is what the synthesizer needs: one completion for a model and messages.
``OpenAIChat`` talks to one endpoint: it retries 429, 5xx, timeouts and refused
connections with exponential backoff (the SDK's own retries are off so that ours are the
only ones, and counted), maps a refusal (401/403) to ``LlmAuthError`` and an endpoint that
stays down to ``LlmUnavailable``. ``ArmRouter`` sends each of the bandit's arms to its
endpoint; ``connect`` builds it from the settings, reading every endpoint's key once
(``keys.py``). A key is never logged and never part of an error message.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

import openai

from ke_synthesizer.llm.keys import HOW_TO_SET_A_KEY, ApiKey, key_for
from ke_synthesizer.llm.tokens import count_tokens
from kernelevolve.config import DEFAULT_LLM_BASE_URL, LlmSettings
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


_RETRYABLE = (openai.RateLimitError, openai.InternalServerError, openai.APITimeoutError,
              openai.APIConnectionError)


# The SDK refuses to build a client without a key ("" and None raise, and None would pick up
# OPENAI_API_KEY on its own), so a keyless endpoint gets this stand-in, and each request
# omits the Authorization header it would make of it: the endpoint sees no key at all.
_KEYLESS_PLACEHOLDER = "no-key"


class OpenAIChat:
    """One endpoint; ``api_key`` "" (or ``NO_KEY``) calls it without a key."""

    def __init__(self, settings: LlmSettings, api_key: ApiKey | str, *, base_url: str = "",
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self._s = settings
        self._url = base_url or settings.base_url or DEFAULT_LLM_BASE_URL
        self._key = api_key if isinstance(api_key, ApiKey) else ApiKey(api_key, "the caller" if api_key else "none")
        self._sleep = sleep

    def __repr__(self) -> str:  # never the key
        return f"OpenAIChat(base_url={self._url!r}, key={self._key.source})"

    async def complete(self, model: str, messages: list[dict[str, str]]) -> Completion:
        s = self._s
        async with openai.AsyncOpenAI(base_url=self._url, api_key=self._key.value or _KEYLESS_PLACEHOLDER,
                                      timeout=s.request_timeout_s, max_retries=0) as client:
            last = ""
            for attempt in range(1, s.max_retries + 2):
                started = time.monotonic()
                try:
                    text, usage = await self._call(client, model, messages)
                except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
                    raise self._refused(exc.status_code, model) from None
                except _RETRYABLE as exc:
                    last = _describe(exc)
                    log.warning("llm request failed; retrying", extra={"base_url": self._url, "model": model,
                                                                       "attempt": attempt, "error": last})
                    if attempt <= s.max_retries:
                        await self._sleep(s.backoff_s * 2 ** (attempt - 1))
                    continue
                except openai.APIStatusError as exc:
                    raise SynthesisError(f"LLM endpoint {self._url} rejected the request for model {model}: "
                                         f"HTTP {exc.status_code}") from None
                latency = time.monotonic() - started
                if usage is None:
                    prompt_tokens = sum(count_tokens(m["content"]) for m in messages)
                    return Completion(text, model, prompt_tokens, count_tokens(text), latency, attempt, True)
                return Completion(text, model, usage[0], usage[1], latency, attempt)
            raise LlmUnavailable(f"LLM endpoint {self._url} unavailable after {s.max_retries + 1} attempts "
                                 f"for model {model}: {last}")

    def _refused(self, code: int, model: str) -> LlmAuthError:
        if not self._key:
            return LlmAuthError(f"the endpoint at {self._url} refused the request ({code}): it needs an API key; "
                                f"{HOW_TO_SET_A_KEY}")
        return LlmAuthError(f"the endpoint at {self._url} refused the API key ({code}, key from {self._key.source}) "
                            f"for model {model}")

    async def _call(self, client: openai.AsyncOpenAI, model: str,
                    messages: list[dict[str, str]]) -> tuple[str, tuple[int, int] | None]:
        s = self._s
        common: dict[str, Any] = {"model": model, "messages": messages, "temperature": s.temperature,
                                  "top_p": s.top_p, "max_tokens": s.max_tokens}
        if not self._key:
            common["extra_headers"] = {"Authorization": openai.Omit()}  # not even the placeholder
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


class ArmRouter:
    """The bandit's arms over their endpoints: ``complete(arm)`` asks the arm's endpoint for
    the arm's model; the completion names the arm (prices and the bandit know arms)."""

    def __init__(self, routes: Mapping[str, tuple[ChatBackend, str]]) -> None:
        self._routes = dict(routes)

    def __repr__(self) -> str:
        return f"ArmRouter({sorted(self._routes)})"

    async def complete(self, model: str, messages: list[dict[str, str]]) -> Completion:
        route = self._routes.get(model)
        if route is None:
            raise ConfigError(f"no LLM endpoint serves {model!r} (arms: {', '.join(sorted(self._routes))})")
        backend, wire_model = route
        return replace(await backend.complete(wire_model, messages), model=model)


def connect(settings: LlmSettings, env: Mapping[str, str] | None = None) -> ArmRouter:
    """Every configured endpoint, its key read once, behind one router of all their arms."""
    arms = settings.arms()
    if not arms:
        raise ConfigError("the LLM synthesizer needs at least one model (llm.models, --model)")
    clients: dict[str, ChatBackend] = {}
    for endpoint in settings.endpoint_list():
        key = key_for(endpoint, settings, env)
        log.info("llm endpoint", extra={"endpoint": endpoint.name, "base_url": endpoint.base_url,
                                        "models": ",".join(endpoint.model_list), "key_source": key.source})
        clients[endpoint.name] = OpenAIChat(settings, key, base_url=endpoint.base_url)
    return ArmRouter({a.arm: (clients[a.endpoint.name], a.model) for a in arms})


def _describe(exc: Exception) -> str:
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}"
    if isinstance(exc, openai.APITimeoutError):
        return "request timed out"
    return "connection refused or reset"
