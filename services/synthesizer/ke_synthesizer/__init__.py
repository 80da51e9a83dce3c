"""Synthesizer service: proposes candidate kernels for an operator spec.

Public surface: ``kernelevolve.ports.synthesis`` (request/proposal types and the
``CandidateSynthesizer`` protocol). Implementations: the offline compiler-style
synthesizer (``ke_synthesizer.offline``), later an LLM synthesizer, same interface.
"""
