"""Ports between the services: what one side asks of the other, as plain types.

Services depend on these, never on each other's packages; every port has a real
implementation and a double that pass one contract suite (``tests/contracts/``).

==================  =====================================================  ==========================
port                what it promises                                       implementations
==================  =====================================================  ==========================
``synthesis``       ``CandidateSynthesizer.propose(ProposalRequest)``:     offline compiler
                    proposals (whole modules defining ``ModelNew``)        (``ke_synthesizer.offline``)
``judge``           ``JudgePort``: ``validate_spec``, ``evaluate``,        ``ke_evaluator`` Judge
                    ``evaluate_many`` -> ``Verdict`` (``verdict``)
``strategy``        ``Strategy.select_parent``: which node to expand       ``ke_search`` strategies
``engine``          ``Engine``: sessions run, candidates judged and runs   the CLI's (``ke_cli.api``),
                    exported for the Python API (``kernelevolve.api``)     found by entry point
==================  =====================================================  ==========================

The infrastructure ports live beside their adapters: the event bus
(``kernelevolve.bus.port``), the object store (``kernelevolve.store.port``) and the
vector index and embedders (``kernelevolve.vector.port``).

Nothing here imports a third-party package: the evaluator's sandboxed worker imports
``verdict`` with torch, triton, numpy and protobuf alone.
"""
