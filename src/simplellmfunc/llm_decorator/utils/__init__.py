"""SimpleLLMFunc's ``llm_decorator.utils`` package; ``utils.tools.process_tools`` has a
counterpart here."""

from __future__ import annotations

from .tools import process_tools

__all__ = ["process_tools"]
