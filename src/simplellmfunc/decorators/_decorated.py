"""What ``ChatAgent`` and ``LLMFunction`` share: the decorated function's identity and state,
the decorator's settings, and binding to an instance when the function is a method."""

from __future__ import annotations

import copy
import functools
import inspect
import types
from collections.abc import Callable
from typing import Any, Protocol, Self, cast

from ..engine import EngineOptions
from ..providers import LLMInterface
from ._common import binder
from ._prompt import docstring_of

__all__ = ["Decorated"]


class _Settings(Protocol):
    @property
    def llm(self) -> LLMInterface: ...

    @property
    def options(self) -> EngineOptions: ...


class Decorated:
    """The base of both decorators' objects.

    State is in slots: ``functools.update_wrapper`` copies a wrapped object's ``__dict__``, so a
    ``@tool`` over one of these must not take it with it.
    """

    __slots__ = (
        "__dict__",
        "__weakref__",
        "_bind",
        "_bound",
        "_doc",
        "_func",
        "_settings",
        "_signature",
    )

    # set by functools.update_wrapper
    __wrapped__: Callable[..., Any]
    __name__: str
    __qualname__: str

    def __init__(self, func: Callable[..., object], settings: _Settings) -> None:
        functools.update_wrapper(cast(Any, self), func)  # both subclasses are callable
        self._func = func
        self._settings = settings
        self._signature = inspect.signature(func)
        self._bind = binder(self._signature)
        self._doc = docstring_of(func)
        self._bound: tuple[Any, ...] = ()

    @property
    def options(self) -> EngineOptions:
        """The engine options the decorator was given."""
        return self._settings.options

    @property
    def llm(self) -> LLMInterface:
        """The model it calls."""
        return self._settings.llm

    def __get__(self, instance: object, owner: type | None = None) -> Self:
        # A method of a class: the instance is bound to the first parameter (not sent to the
        # model), and the signature seen from outside has no ``self``.
        if instance is None:
            return self
        bound = copy.copy(self)
        bound._bound = (*self._bound, instance)
        bound.__wrapped__ = types.MethodType(self.__wrapped__, instance)
        return bound

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.__qualname__}>"
