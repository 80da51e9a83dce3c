"""Seed knowledge, one YAML file per topic or hardware family (package data; see ../README.md)."""
