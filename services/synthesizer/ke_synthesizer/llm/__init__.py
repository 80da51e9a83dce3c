"""The LLM synthesizer over any OpenAI-compatible endpoint (see ``synthesizer.py``);
``prompt.build_prompt`` is shared with the ``agent`` synthesizer."""

from ke_synthesizer.llm.client import ChatBackend, Completion, OpenAIChat, read_api_key
from ke_synthesizer.llm.prompt import Prompt, PromptContext, build_prompt, gather_context
from ke_synthesizer.llm.synthesizer import LlmSynthesizer

__all__ = ["ChatBackend", "Completion", "LlmSynthesizer", "OpenAIChat", "Prompt", "PromptContext", "build_prompt",
           "gather_context", "read_api_key"]
