"""SimpleLLMFunc's ``interface.llm_interface`` module: ``LLM_Interface`` is
:class:`~simplellmfunc.providers.LLMInterface`, the base of every model interface."""

from ..providers import LLMInterface

__all__ = ["LLMInterface", "LLM_Interface"]

LLM_Interface = LLMInterface
