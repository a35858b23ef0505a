"""SimpleLLMFunc's ``interface.llm_interface`` module: ``LLM_Interface`` is
:class:`~simplellmfunc.providers.LLMInterface`, the base of every model interface.

``DEFAULT_CONTEXT_WINDOW`` is SimpleLLMFunc's placeholder size (200 000 tokens); here an
interface built without a ``context_window`` reports ``None`` (unknown) instead of a guess.
"""

from ..providers import LLMInterface

__all__ = ["DEFAULT_CONTEXT_WINDOW", "LLMInterface", "LLM_Interface"]

DEFAULT_CONTEXT_WINDOW = 200_000
LLM_Interface = LLMInterface
