"""SimpleLLMFunc's ``llm_decorator.llm_function_decorator`` module: ``llm_function``
(:func:`simplellmfunc.decorators.llm_function`) and its older name ``async_llm_function``."""

from ..decorators import llm_function

__all__ = ["async_llm_function", "llm_function"]

async_llm_function = llm_function
