"""What both decorators share: toolkits, the per-call keyword arguments, run hooks."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .._abort import AbortSignal, PauseSignal
from ..engine import RunHook
from ..exceptions import DecoratorError, ToolDefinitionError
from ..tools import FunctionTool, Tool, ToolProvider

__all__ = [
    "CallOptions",
    "binder",
    "check_async",
    "resolve_tools",
    "self_reference_hook",
    "split_call_kwargs",
    "static_tools",
    "toolkit_hooks",
]

ToolkitItem = Any

_PLAIN_KINDS = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def binder(
    signature: inspect.Signature,
) -> Callable[[tuple[Any, ...], dict[str, Any]], dict[str, Any]]:
    """``bind(args, kwargs)``: the call's arguments by name, in parameter order, defaults
    applied: what ``signature.bind(...)`` + ``apply_defaults()`` give, computed once per call
    on the hot path without building a ``BoundArguments``.

    Anything out of the ordinary (``*args``, ``**kwargs``, positional-only parameters, a
    missing, duplicate or unknown argument) goes through ``signature.bind``, so errors read
    exactly as Python's.

    Raises:
        TypeError: (from ``bind``) when the arguments do not fit the signature.
    """
    parameters = list(signature.parameters.values())
    names = tuple(p.name for p in parameters)
    known = frozenset(names)
    positional = len([p for p in parameters if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD])
    defaults = {p.name: p.default for p in parameters if p.default is not p.empty}

    def slow(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return dict(bound.arguments)

    if any(p.kind not in _PLAIN_KINDS for p in parameters):
        return slow

    def bind(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        if len(args) > positional:
            return slow(args, kwargs)
        given = dict(zip(names, args, strict=False))
        for name, value in kwargs.items():
            if name in given or name not in known:
                return slow(args, kwargs)
            given[name] = value
        arguments = {}
        for name in names:
            if name in given:
                arguments[name] = given[name]
            elif name in defaults:
                arguments[name] = defaults[name]
            else:
                return slow(args, kwargs)  # missing: Python's own error
        return arguments

    return bind


def check_async(func: Callable[..., Any], decorator: str) -> None:
    """Refuse anything but an ``async def``.

    Raises:
        DecoratorError: For a sync function or a non-function.
    """
    if not inspect.iscoroutinefunction(func):
        raise DecoratorError(f"@{decorator} needs an 'async def' function, got {func!r}")


def _flatten(toolkit: Iterable[ToolkitItem] | None) -> list[ToolkitItem]:
    items: list[ToolkitItem] = []
    for item in toolkit or ():
        if isinstance(item, list | tuple):
            items.extend(_flatten(item))
        else:
            items.append(item)
    return items


def static_tools(toolkit: Iterable[ToolkitItem] | None) -> tuple[list[Tool], list[ToolProvider]]:
    """Split a toolkit into tools known now and providers asked at each call.

    Plain functions are wrapped with ``@tool``.

    Raises:
        ToolDefinitionError: For an item that is not a tool, a function or a tool provider.
    """
    tools: list[Tool] = []
    providers: list[ToolProvider] = []
    for item in _flatten(toolkit):
        if isinstance(item, Tool):
            tools.append(item)
        elif isinstance(item, ToolProvider):
            providers.append(item)
        elif callable(item):
            tools.append(FunctionTool(item))
        else:
            raise ToolDefinitionError(f"toolkit item {item!r} is not a tool")
    _check_unique(tools)
    return tools, providers


def _check_unique(tools: Iterable[Tool]) -> None:
    seen: set[str] = set()
    for item in tools:
        if item.name in seen:
            raise ToolDefinitionError(f"two tools are named {item.name!r}")
        seen.add(item.name)


async def resolve_tools(tools: list[Tool], providers: list[ToolProvider]) -> tuple[Tool, ...]:
    """The tools of one call: the static ones plus what each provider lists now.

    Raises:
        ToolDefinitionError: If two tools share a name.
    """
    if not providers:
        return tuple(tools)
    resolved = list(tools)
    for provider in providers:
        resolved.extend(await provider.list_tools())
    _check_unique(resolved)
    return tuple(resolved)


def toolkit_hooks(providers: Iterable[ToolProvider]) -> tuple[RunHook, ...]:
    """The toolkit items that are run hooks too (skills: they enable tools during a run)."""
    return tuple(p for p in providers if isinstance(p, RunHook))


class CallOptions:
    """The framework keyword arguments of one call (``_template_params``, ``_abort_signal``,
    ``_pause_signal``)."""

    __slots__ = ("abort", "pause", "template_params")

    def __init__(
        self,
        template_params: Mapping[str, Any] | None,
        abort: AbortSignal | None,
        pause: PauseSignal | None = None,
    ) -> None:
        self.template_params = dict(template_params or {})
        self.abort = abort
        self.pause = pause


def split_call_kwargs(kwargs: dict[str, Any], *, pausable: bool = True) -> CallOptions:
    """Remove the framework keyword arguments from ``kwargs`` and return them.

    Raises:
        DecoratorError: For a ``_abort_signal`` that is not an :class:`AbortSignal`, a
            ``_pause_signal`` that is not a :class:`PauseSignal`, or one where a call cannot
            pause (``pausable=False``: an ``@llm_function`` has no history to resume from).
    """
    params = kwargs.pop("_template_params", None)
    abort = kwargs.pop("_abort_signal", None)
    pause = kwargs.pop("_pause_signal", None)
    if abort is not None and not isinstance(abort, AbortSignal):
        raise DecoratorError("_abort_signal must be an AbortSignal")
    if pause is not None and not isinstance(pause, PauseSignal):
        raise DecoratorError("_pause_signal must be a PauseSignal")
    if pause is not None and not pausable:
        raise DecoratorError("only @llm_chat calls can pause (they return a history to resume)")
    return CallOptions(params, abort, pause)


def self_reference_hook(self_reference: Any, key: str | None) -> RunHook | None:
    """The run hook of a SelfReference memory (``self_reference.run_hook(key)``).

    A key alone creates a private ``SelfReference`` (what SimpleLLMFunc code does); the import
    is deferred so that ``@llm_chat`` without memory never loads the builtins.

    Raises:
        DecoratorError: If ``self_reference`` has no ``run_hook``.
    """
    if self_reference is None and key is None:
        return None
    if self_reference is None:
        from ..builtin import SelfReference

        self_reference = SelfReference()
    factory = getattr(self_reference, "run_hook", None)
    if factory is None:
        raise DecoratorError("self_reference must be a SelfReference")
    hook: RunHook = factory(key or "agent_main")
    return hook
