"""The LLM endpoint flags of ``optimize``, read in order.

Each ``--llm-base-url`` starts an endpoint; ``--model``, ``--api-key-env`` and
``--no-api-key`` belong to the endpoint whose ``--llm-base-url`` precedes them (those given
before the first one belong to the first). One endpoint (or none: models and key of the
configured endpoint) overrides ``llm.base_url`` / ``llm.models`` / ``llm.api_key_env`` as
these flags always did; two or more replace ``llm.endpoints``, all their models arms of one
bandit:

    --llm-base-url http://127.0.0.1:8000/v1 --no-api-key --model qwen-coder \\
    --llm-base-url https://api.openai.com/v1 --api-key-env OPENAI_API_KEY --model gpt-4o-mini
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

from kernelevolve.config import DEFAULT_LLM_BASE_URL, LlmEndpoint, LlmSettings
from kernelevolve.errors import InvalidArgumentError

DEST = "llm_endpoints"


class _EndpointFlag(argparse.Action):
    """Appends its value to the current endpoint of ``args.llm_endpoints`` (field ``const``)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        groups: list[dict[str, Any]] = [dict(g) for g in (getattr(namespace, DEST, None) or [])]
        field = self.const
        if field == "base_url" and (not groups or groups[-1].get("base_url")):
            groups.append({})
        elif not groups:
            groups.append({})
        current = groups[-1]
        if field == "models":
            current["models"] = [*current.get("models", []), values]
        elif field == "keyless":
            current["keyless"] = True
        else:
            current[field] = values
        setattr(namespace, DEST, groups)


def add_llm_flags(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(**{DEST: None})
    parser.add_argument("--llm-base-url", action=_EndpointFlag, const="base_url", dest=DEST, metavar="URL",
                        help="an OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 (default: llm.base_url, "
                        "then $OPENAI_BASE_URL, then https://api.openai.com/v1); repeat for several endpoints, "
                        "each followed by its --model flags")
    parser.add_argument("--model", action=_EndpointFlag, const="models", dest=DEST, metavar="MODEL",
                        help="LLM model name of the preceding endpoint; repeat for several models (one bandit "
                        "picks among all models of all endpoints per request)")
    parser.add_argument("--api-key-env", action=_EndpointFlag, const="api_key_env", dest=DEST, metavar="NAME",
                        help="the variable holding the preceding endpoint's key (default: $KERNELEVOLVE_LLM_API_KEY, "
                        "llm.api_key_file, then $OPENAI_API_KEY; none set: no key is sent)")
    parser.add_argument("--no-api-key", action=_EndpointFlag, const="keyless", nargs=0, dest=DEST,
                        help="send the preceding endpoint no key, not even $OPENAI_API_KEY (a local server)")


def apply_llm_flags(args: argparse.Namespace, llm: LlmSettings) -> LlmSettings:
    """``llm`` with the endpoint flags of ``args`` over it (flags win over the configuration)."""
    groups: list[dict[str, Any]] = getattr(args, DEST, None) or []
    if len(groups) == 1 and groups[0].get("keyless") and groups[0].get("api_key_env"):
        raise InvalidArgumentError("--no-api-key and --api-key-env name opposite key sources of one endpoint")
    if len(groups) > 1:
        endpoints = []
        for i, g in enumerate(groups, 1):
            if not g.get("base_url") or not g.get("models"):
                raise InvalidArgumentError(f"endpoint {i} of the --llm-base-url flags needs a URL and a --model")
            if g.get("keyless") and g.get("api_key_env"):
                raise InvalidArgumentError(f"endpoint {g['base_url']}: --no-api-key and --api-key-env disagree")
            endpoints.append(LlmEndpoint(name=f"endpoint-{i}", base_url=g["base_url"], models=",".join(g["models"]),
                                         api_key_env=g.get("api_key_env", ""), keyless=bool(g.get("keyless"))))
        return replace(llm, endpoints=tuple(endpoints), base_url="", models="", api_key_env="")
    if not groups:
        return llm
    g = groups[0]
    if llm.endpoints and not g.get("base_url"):
        raise InvalidArgumentError("llm.endpoints is configured: give --model, --api-key-env or --no-api-key after "
                                   "the --llm-base-url it belongs to")
    if g.get("keyless"):
        # One endpoint without a key: the single-endpoint settings have no keyless switch.
        return replace(llm, endpoints=(LlmEndpoint(
            name="default", base_url=g.get("base_url") or llm.base_url or DEFAULT_LLM_BASE_URL,
            models=",".join(g.get("models", [])) or llm.models, keyless=True),), base_url="", models="",
            api_key_env="")
    changes: dict[str, Any] = {}
    if g.get("base_url"):
        changes.update(base_url=g["base_url"], endpoints=())
    if g.get("models"):
        changes["models"] = ",".join(g["models"])
    if g.get("api_key_env"):
        changes["api_key_env"] = g["api_key_env"]
    return replace(llm, **changes)
