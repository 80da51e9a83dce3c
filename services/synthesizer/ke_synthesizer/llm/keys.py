"""Where an endpoint's API key comes from, read once at start-up.

First found wins, per endpoint:

1. the variable the endpoint names (``--api-key-env NAME``, ``llm.api_key_env``,
   ``llm.endpoints[].api_key_env``): named on purpose, so it must be set;
2. the endpoint's own Secret file (``llm.endpoints[].api_key_file``);
3. ``KERNELEVOLVE_LLM_API_KEY``, the product's variable;
4. ``llm.api_key_file``, a mounted Kubernetes Secret;
5. ``OPENAI_API_KEY``, what every openai-SDK user already has set;
6. none: the endpoint is called without a key (vLLM, llama.cpp and Ollama servers need none).

An endpoint marked ``keyless`` skips 3-5, so that a key meant for a hosted API is never sent
to a local server. The key lives in ``ApiKey.value`` only: its ``repr`` and the log name the
source, never the value.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kernelevolve.config import LlmEndpoint, LlmSettings
from kernelevolve.errors import ConfigError

PRODUCT_KEY_ENV = "KERNELEVOLVE_LLM_API_KEY"
SDK_KEY_ENV = "OPENAI_API_KEY"
# Named in the error of an endpoint that refused a request sent without a key.
HOW_TO_SET_A_KEY = f"set {SDK_KEY_ENV}, {PRODUCT_KEY_ENV} or --api-key-env"


@dataclass(frozen=True)
class ApiKey:
    value: str = field(repr=False)
    source: str  # "$NAME", "file PATH" or "none"

    def __bool__(self) -> bool:
        return bool(self.value)


NO_KEY = ApiKey("", "none")


def _from_file(path_text: str, setting: str) -> ApiKey:
    path = Path(path_text)
    if not path.is_file():
        raise ConfigError(f"{setting} {path} does not exist")
    key = path.read_text().strip()
    if not key:
        raise ConfigError(f"{setting} {path} is empty")
    return ApiKey(key, f"file {path}")


def key_for(endpoint: LlmEndpoint, settings: LlmSettings, env: Mapping[str, str] | None = None) -> ApiKey:
    """The key ``endpoint`` is called with (``NO_KEY``: none is sent)."""
    env = os.environ if env is None else env
    if endpoint.api_key_env:
        key = env.get(endpoint.api_key_env, "")
        if not key:
            raise ConfigError(f"the LLM endpoint {endpoint.base_url} reads its API key from "
                              f"${endpoint.api_key_env}, which is not set")
        return ApiKey(key, f"${endpoint.api_key_env}")
    if endpoint.api_key_file:
        return _from_file(endpoint.api_key_file, f"llm.endpoints[{endpoint.name}].api_key_file")
    if endpoint.keyless:
        return NO_KEY
    if env.get(PRODUCT_KEY_ENV):
        return ApiKey(env[PRODUCT_KEY_ENV], f"${PRODUCT_KEY_ENV}")
    if settings.api_key_file:
        return _from_file(settings.api_key_file, "llm.api_key_file")
    if env.get(SDK_KEY_ENV):
        return ApiKey(env[SDK_KEY_ENV], f"${SDK_KEY_ENV}")
    return NO_KEY


def read_api_key(settings: LlmSettings, env: Mapping[str, str] | None = None) -> str:
    """The key of the single endpoint (``llm.base_url``); "" when none is configured."""
    return key_for(settings.endpoint_list()[0], settings, env).value
