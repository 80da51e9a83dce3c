"""The static policy now lives in ``kernelevolve.static_policy`` so that a synthesizer can
refuse a reply before spending an evaluation without importing the evaluator's package."""

from __future__ import annotations

from kernelevolve.static_policy import _MODULE_METHODS, ALLOWED_IMPORTS, Finding, StaticReport, check_candidate

__all__ = ["ALLOWED_IMPORTS", "Finding", "StaticReport", "_MODULE_METHODS", "check_candidate"]
