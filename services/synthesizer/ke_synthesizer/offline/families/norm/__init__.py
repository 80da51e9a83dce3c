"""Functional batch / instance norm with running statistics as inputs."""
