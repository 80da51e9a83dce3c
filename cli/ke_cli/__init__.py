"""The ``kernelevolve`` command line and Python API.

``ke_cli.client.KernelEvolveClient`` talks to a gateway over gRPC;
``ke_cli.embedded.EmbeddedStack`` runs all five services in one process over a
nats-server it starts itself; ``ke_cli.main`` is the command line on top of both.
"""
