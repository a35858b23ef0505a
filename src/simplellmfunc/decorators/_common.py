"""What both decorators share: toolkits, the per-call keyword arguments, run hooks."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol, runtime_checkable

from .._abort import AbortSignal, PauseSignal
from .._compat import FORK_TASK_PARAM, KEY_OVERRIDE_PARAM, TOOLKIT_OVERRIDE_PARAM
from ..engine import EngineOptions, RunHook
from ..exceptions import DecoratorError, ToolDefinitionError, UnsupportedError
from ..tools import FunctionTool, Tool, ToolProvider

__all__ = [
    "DEFAULT_MEMORY_KEY",
    "CallOptions",
    "MemoryBackend",
    "ToolkitItem",
    "binder",
    "check_async",
    "resolve_tools",
    "self_reference_hook",
    "split_call_kwargs",
    "static_tools",
    "toolkit_hooks",
    "unbound",
]

DEFAULT_MEMORY_KEY = "agent_main"
"""The memory key of an agent given ``self_reference=`` without ``self_reference_key=``."""

ToolkitItem = Tool | ToolProvider | Callable[..., object] | Sequence["ToolkitItem"]
"""What a ``toolkit`` holds: tools, tool providers (MCP servers, skills), plain functions
(wrapped with ``@tool``) and lists of them."""


@runtime_checkable
class MemoryBackend(Protocol):
    """What ``self_reference=`` takes: a SelfReference, or anything that makes the run hook
    binding a turn to a memory key."""

    def run_hook(self, key: str) -> RunHook:
        """The run hook of memory ``key``."""
        ...


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


def unbound(arguments: dict[str, Any], bound: tuple[Any, ...]) -> dict[str, Any]:
    """``arguments`` without the first ``len(bound)`` ones: the instance a decorated method is
    bound to (``self``) is not part of the prompt."""
    if bound:
        for name in list(arguments)[: len(bound)]:
            del arguments[name]
    return arguments


def check_async(func: Callable[..., object], decorator: str) -> None:
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
            raise ToolDefinitionError(_not_a_tool(item))
    _check_unique(tools)
    return tools, providers


def _not_a_tool(item: object) -> str:
    """Why ``item`` cannot be in a toolkit, pointing at its tools when it has some."""
    if isinstance(getattr(type(item), "toolset", None), property):
        name = type(item).__name__
        return (
            f"toolkit item {item!r} is not a tool: a {name} is not a tool itself, pass its "
            f"tools instead (toolkit=repl.toolset, or toolkit=[*repl.toolset, ...] with others)"
        )
    return (
        f"toolkit item {item!r} is not a tool (expected a Tool, an @tool function, a plain "
        f"function or a tool provider with list_tools())"
    )


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
    ``_pause_signal``, ``_toolkit``, ``_session_id``, ``_hooks``, ``_approval``,
    ``_approver``)."""

    __slots__ = (
        "abort",
        "approval",
        "hooks",
        "pause",
        "providers",
        "replace",
        "session_id",
        "template_params",
        "tools",
    )

    def __init__(
        self,
        template_params: Mapping[str, Any] | None,
        abort: AbortSignal | None,
        pause: PauseSignal | None = None,
        *,
        toolkit: Iterable[ToolkitItem] | None = None,
        session_id: str = "",
        hooks: Iterable[RunHook] = (),
    ) -> None:
        self.template_params = dict(template_params or {})
        self.abort = abort
        self.pause = pause
        self.template_params.pop(FORK_TASK_PARAM, None)  # SimpleLLMFunc's forks' plumbing
        if KEY_OVERRIDE_PARAM in self.template_params:
            raise UnsupportedError(
                "SELF_REFERENCE_KEY_OVERRIDE_TEMPLATE_PARAM: the memory key of an agent is its "
                "self_reference_key= (one agent per key); decorate one agent per key instead"
            )
        override = self.template_params.pop(TOOLKIT_OVERRIDE_PARAM, None)
        # SimpleLLMFunc's toolkit override replaces the decorator's toolkit for this call.
        self.replace = override is not None
        if override is not None:
            toolkit = [*override, *(toolkit or ())]
        self.tools, self.providers = static_tools(toolkit)
        self.hooks = tuple(hooks) + toolkit_hooks(self.providers)
        self.session_id = session_id
        self.approval: dict[str, Any] = {}

    def engine_options(self, options: EngineOptions) -> EngineOptions:
        """``options`` with this call's ``_approval`` policy and ``_approver``, if given."""
        return replace(options, **self.approval) if self.approval else options

    def run_hooks(self, providers: Iterable[ToolProvider]) -> tuple[RunHook, ...]:
        """The call's run hooks: those of the decorator's toolkit ``providers`` (skills), unless
        the call replaces that toolkit, then the call's own (``_hooks``, its toolkit's)."""
        if self.replace:
            return self.hooks
        return toolkit_hooks(providers) + self.hooks

    async def resolve_tools(
        self, tools: list[Tool], providers: list[ToolProvider]
    ) -> tuple[Tool, ...]:
        """The tools of this call: the decorator's toolkit plus the call's ``_toolkit``.

        Raises:
            ToolDefinitionError: If two tools share a name.
        """
        if self.replace:
            return await resolve_tools(list(self.tools), list(self.providers))
        return await resolve_tools([*tools, *self.tools], [*providers, *self.providers])


def split_call_kwargs(kwargs: dict[str, Any], *, pausable: bool = True) -> CallOptions:
    """Remove the framework keyword arguments from ``kwargs`` and return them.

    ``_toolkit`` (a list like the decorator's ``toolkit``) adds tools and tool providers to this
    call only; ``_session_id`` labels every event of the call (``EventOrigin.session_id``,
    forks included); ``_hooks`` adds run hooks to this call (a session's SelfReference key).

    Raises:
        ToolDefinitionError: For a ``_toolkit`` item that is not a tool.
        DecoratorError: For a ``_abort_signal`` that is not an :class:`AbortSignal`, a
            ``_pause_signal`` that is not a :class:`PauseSignal`, or one where a call cannot
            pause (``pausable=False``: an ``@llm_function`` has no history to resume from).
    """
    params = kwargs.pop("_template_params", None)
    abort = kwargs.pop("_abort_signal", None)
    pause = kwargs.pop("_pause_signal", None)
    toolkit = kwargs.pop("_toolkit", None)
    session_id = kwargs.pop("_session_id", None) or ""
    if not isinstance(session_id, str):
        raise DecoratorError("_session_id must be a string")
    hooks = kwargs.pop("_hooks", None) or ()
    if not all(isinstance(h, RunHook) for h in hooks):
        raise DecoratorError("_hooks must be a list of RunHook (run.hooks of this call only)")
    if toolkit is not None and not isinstance(toolkit, list | tuple):
        raise DecoratorError("_toolkit must be a list of tools (like the decorator's toolkit)")
    if abort is not None and not isinstance(abort, AbortSignal):
        raise DecoratorError("_abort_signal must be an AbortSignal")
    if pause is not None and not isinstance(pause, PauseSignal):
        raise DecoratorError("_pause_signal must be a PauseSignal")
    if pause is not None and not pausable:
        raise DecoratorError("only @llm_chat calls can pause (they return a history to resume)")
    approval: dict[str, Any] = {}
    for name in ("approval", "approver"):
        value = kwargs.pop(f"_{name}", None)
        if value is not None and not callable(value):
            raise DecoratorError(f"_{name} must be a callable (see docs/human-in-the-loop.md)")
        if value is not None:
            approval[name] = value
    options = CallOptions(params, abort, pause, toolkit=toolkit, session_id=session_id, hooks=hooks)
    options.approval = approval
    return options


def self_reference_hook(
    self_reference: MemoryBackend | None, key: str | None, tools: Iterable[Tool] = ()
) -> RunHook | None:
    """The run hook of a SelfReference memory (``self_reference.run_hook(key)``).

    A key alone binds the SelfReference of the first PyRepl among ``tools`` (its ``selfref``
    backend, attached on first request), else a private one: what SimpleLLMFunc code does. The
    import is deferred so that ``@llm_chat`` without memory never loads the builtins.

    Raises:
        DecoratorError: If ``self_reference`` has no ``run_hook``.
    """
    if self_reference is None and key is None:
        return None
    backend = _toolkit_self_reference(tools) if self_reference is None else self_reference
    if not isinstance(backend, MemoryBackend):
        raise DecoratorError("self_reference must be a SelfReference")
    return backend.run_hook(key or DEFAULT_MEMORY_KEY)


def _toolkit_self_reference(tools: Iterable[Tool]) -> object:
    """The ``selfref`` backend of the first PyRepl whose tool is in ``tools``, else a new
    in-memory SelfReference."""
    from ..builtin import SelfReference
    from ..builtin.pyrepl import ReplTool

    for item in tools:
        if isinstance(item, ReplTool):
            from ..builtin import PyRepl  # loaded already: its tool is here

            if isinstance(item.repl, PyRepl):
                return item.repl.get_runtime_backend(PyRepl.DEFAULT_SELF_REFERENCE_BACKEND_NAME)
    return SelfReference()
