"""The LLM synthesizer over OpenAI-compatible endpoints (see ``synthesizer.py``);
``prompt.build_prompt`` is shared with the ``agent`` synthesizer."""

from ke_synthesizer.llm.client import ArmRouter, ChatBackend, Completion, OpenAIChat, connect
from ke_synthesizer.llm.keys import ApiKey, key_for, read_api_key
from ke_synthesizer.llm.prompt import Prompt, PromptContext, build_prompt, gather_context
from ke_synthesizer.llm.synthesizer import LlmSynthesizer

__all__ = ["ApiKey", "ArmRouter", "ChatBackend", "Completion", "LlmSynthesizer", "OpenAIChat", "Prompt",
           "PromptContext", "build_prompt", "connect", "gather_context", "key_for", "read_api_key"]
