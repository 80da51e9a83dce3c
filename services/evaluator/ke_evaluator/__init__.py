"""Evaluator service: judges candidate kernels against an operator spec.

Public surface for other packages: ``kernelevolve.ports.verdict`` (result types) and
``ke_evaluator.judge`` (``Judge`` keeps sandboxed workers and returns a ``Verdict``;
``options_from_settings`` builds its options from the typed settings).

Two sides: ``judge/`` runs in the caller's process, ``worker/`` inside each sandboxed
worker process (``python -m ke_evaluator.worker``), which imports only torch, triton, numpy
and the stdlib; ``wire``, ``device_lock`` and ``phase_limits`` are shared by both, and
``kernelevolve.ports.verdict`` (stdlib only) by all three.
"""
