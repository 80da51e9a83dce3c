"""The ``agent`` synthesizer: each synthesis request is published in the agent ledger and
answered from outside (an external coding agent or a person, through ``kernelevolve agent
next/submit`` or the gateway's AgentNext/AgentSubmit)."""

from ke_synthesizer.agent.prompt import build_prompt
from ke_synthesizer.agent.synthesizer import AgentSynthesizer

__all__ = ["AgentSynthesizer", "build_prompt"]
