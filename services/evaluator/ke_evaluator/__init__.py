"""Evaluator service: judges candidate kernels against an operator spec.

Public surface for other packages: ``kernelevolve.ports.verdict`` (result types) and
``ke_evaluator.judge.Judge`` (keeps sandboxed workers, returns a ``Verdict``).
The GPU/CPU worker (``ke_evaluator.worker``) imports only torch, triton and numpy.
"""
