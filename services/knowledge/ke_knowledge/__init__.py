"""The knowledge service: hierarchical optimisation knowledge retrieved by meaning.

Domain objects (``Doc``, ``Skill``) are plain dataclasses; the gRPC servicer and NATS
handler translate them to and from ``kernelevolve.v1`` messages.
"""
