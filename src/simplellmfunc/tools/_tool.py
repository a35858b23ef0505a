"""Tools: ``Tool`` (subclass or wrap a callable) and the ``@tool`` decorator."""

from __future__ import annotations

import copy
import functools
import inspect
import re
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import anyio.to_thread

from .._abort import AbortSignal
from ..exceptions import ToolDefinitionError
from ..providers import ToolSpec
from ._docstring import ParsedDocstring, parse_docstring
from ._emitter import ToolContext, ToolEventEmitter
from ._schema import SignatureSchema, build_schema

__all__ = [
    "ApprovalFlag",
    "FunctionTool",
    "Tool",
    "ToolContext",
    "ToolProvider",
    "check_approval_flag",
    "check_tool_name",
]

_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")

PromptInjectionBuilder = Callable[["Tool"], str]


def check_tool_name(name: str) -> str:
    """Return ``name`` if providers accept it as a tool name.

    Raises:
        ToolDefinitionError: Unless it matches ``^[a-zA-Z0-9_-]{1,64}$``.
    """
    if not _NAME.fullmatch(name):
        raise ToolDefinitionError(
            f"invalid tool name {name!r}: use 1-64 characters from a-z, A-Z, 0-9, '_' and '-'"
        )
    return name


@runtime_checkable
class ToolProvider(Protocol):
    """Anything in a ``toolkit`` that supplies tools at run time (MCP servers, for example)."""

    async def list_tools(self) -> Sequence[Tool]:
        """Return the tools currently available."""
        ...


ApprovalFlag = bool | Callable[[Mapping[str, Any]], bool | str | None]
"""A tool's ``requires_approval``: always, never, or a callable over the call's arguments."""


def check_approval_flag(value: object) -> ApprovalFlag:
    """``value`` if it is a usable ``requires_approval`` (a bool or a callable).

    Raises:
        ToolDefinitionError: For anything else.
    """
    if isinstance(value, bool) or callable(value):
        return value
    raise ToolDefinitionError(f"requires_approval must be a bool or a callable, got {value!r}")


class Tool:
    """A tool the model can call.

    Subclass and implement ``async def run(self, ...)`` with typed parameters, or pass ``func``;
    sync functions and sync ``run`` methods run in a worker thread. A subclass's name defaults
    to its class name in snake_case, its description to its ``run`` or class docstring, and its
    parameter descriptions to the ``Args:`` of both. Calling the tool (``await t(**kwargs)``)
    validates the arguments and returns the raw result; :meth:`render` turns a raw result into
    what the model sees.

    Args:
        name: Tool name (defaults to the class attribute or the function name).
        description: What the tool does (defaults to the docstring description).
        func: A callable to wrap instead of overriding :meth:`run`.
        best_practices: Usage advice added to the system prompt's tool guidance.
        prompt_injection_builder: Builds extra tool guidance text for the system prompt.
        too_long_to_file: Save oversized results to a file and tell the model its path.
        timeout: Per-call timeout in seconds (``None``: the run's default).
        result_budget: Max tokens of one result shown to the model (``None``: the run's
            default); tools that fit their own output, like PyRepl, raise it.
        abort_grace: Seconds an aborted run waits for this tool to return before cancelling
            it (default 0: cancelled at once). For tools that take ``abort_signal``, stop on
            their own and return what they have: PyRepl's ``execute_code`` returns the output
            a cell printed before it was interrupted, and the model reads it.
        idempotent: Running the tool twice with the same arguments does no harm. A durable
            run re-runs an idempotent call that a crash interrupted (at least once); a call
            of a non-idempotent tool is not re-run, the model is told it was interrupted.
        requires_approval: A call waits for a person's approval before it runs: ``True``,
            or a callable over the call's arguments returning falsy (run it) or ``True`` / a
            reason (ask). See ``docs/human-in-the-loop.md``.

    Raises:
        ToolDefinitionError: For an invalid name, an unsupported signature, or neither
            ``func`` nor a ``run`` override.
    """

    name: str = ""
    description: str = ""
    idempotent: bool = True
    requires_approval: ApprovalFlag = False

    def __init__(
        self,
        name: str | None = None,
        description: str | None = None,
        func: Callable[..., Any] | None = None,
        *,
        best_practices: Sequence[str] = (),
        prompt_injection_builder: PromptInjectionBuilder | None = None,
        too_long_to_file: bool = False,
        timeout: float | None = None,
        result_budget: int | None = None,
        abort_grace: float = 0.0,
        idempotent: bool = True,
        requires_approval: ApprovalFlag = False,
    ) -> None:
        if func is None and not self._overrides_run():
            raise ToolDefinitionError(f"{type(self).__name__}: pass func= or override run()")
        self._func = func
        target = func if func is not None else self.run
        default_name = str(getattr(func, "__name__", "")) if func else _snake(type(self).__name__)
        self.name = check_tool_name(name or self.name or default_name)
        self.schema: SignatureSchema = build_schema(target, self.name, self._doc_text(func))
        self.description = description or self.description or self.schema.description
        self.best_practices = tuple(best_practices)
        self.prompt_injection_builder = prompt_injection_builder
        self.too_long_to_file = too_long_to_file
        self.timeout = timeout
        self.result_budget = result_budget
        self.abort_grace = abort_grace
        self.idempotent = idempotent
        if requires_approval is not False:  # else the class attribute stands
            self.requires_approval = check_approval_flag(requires_approval)

    def _doc_text(self, func: Callable[..., Any] | None) -> ParsedDocstring:
        """The docstring that documents the tool: the function's, or the subclass's + run()'s."""
        if func is not None:
            return parse_docstring(getattr(func, "__doc__", None))
        # A subclass's own docstrings only: class ``__doc__`` is not inherited, and run()'s
        # is read from the override, never from Tool.run.
        parsed_class = parse_docstring(type(self).__doc__)
        parsed_run = parse_docstring(type(self).run.__doc__)
        return ParsedDocstring(
            parsed_run.description or parsed_class.description,
            {**parsed_class.args, **parsed_run.args},
        )

    def _overrides_run(self) -> bool:
        return type(self).run is not Tool.run

    @property
    def func(self) -> Callable[..., Any]:
        """The callable the tool runs: the wrapped function, or the bound :meth:`run`.

        Calling it skips argument validation; framework parameters (``event_emitter`` ...) are
        passed explicitly or left to their defaults. ``await tool(**kwargs)`` validates.
        """
        return self._func if self._func is not None else self.run

    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON schema of the arguments."""
        return self.schema.parameters

    def spec(self) -> ToolSpec:
        """The tool as providers receive it."""
        return ToolSpec(self.name, self.description, self.parameters)

    def guidance(self) -> str:
        """Tool guidance for the system prompt (best practices and injected text)."""
        lines = [f"- {p}" for p in self.best_practices]
        injected = self.build_system_prompt_injection()
        if injected is not None:
            lines.append(injected)
        return "\n".join(line for line in lines if line)

    # --- SimpleLLMFunc's names for the same facts ------------------------------------------

    def to_openai_tool(self) -> dict[str, Any]:
        """The tool as an entry of OpenAI's ``tools`` list (SimpleLLMFunc's name):
        ``{"type": "function", "function": {"name", "description", "parameters"}}``."""
        return self.spec().to_openai()

    @staticmethod
    def serialize_tools(tools: Sequence[Tool]) -> list[dict[str, Any]]:
        """:meth:`to_openai_tool` of each tool, in order (SimpleLLMFunc's ``Tool.serialize_tools``;
        a function decorated with ``@tool`` is a ``Tool`` here).

        Raises:
            ToolDefinitionError: For an entry that is not a tool (a plain function, say).
        """
        out = []
        for entry in tools:
            if not isinstance(entry, Tool):
                raise ToolDefinitionError(
                    f"serialize_tools takes tools (a Tool, or a function decorated with @tool), "
                    f"got {entry!r}"
                )
            out.append(entry.to_openai_tool())
        return out

    @property
    def tool_spec(self) -> dict[str, Any]:
        """``{"name", "description", "best_practices"}``: what the system prompt's tool guidance
        is built from (SimpleLLMFunc's ``Tool.tool_spec``; the provider's view is :meth:`spec`)."""
        return {
            "name": self.name,
            "description": self.description,
            "best_practices": list(self.best_practices),
        }

    def build_system_prompt_injection(self, context: Mapping[str, Any] | None = None) -> str | None:
        """The text ``prompt_injection_builder`` adds to the system prompt, stripped; ``None``
        without a builder or when it gives no text (SimpleLLMFunc's method of the same name).

        Args:
            context: Accepted for SimpleLLMFunc's signature; a builder here is given the tool
                (``builder(tool)``), not a context dict, so it is not read.
        """
        del context  # a builder here reads the tool, see above
        if self.prompt_injection_builder is None:
            return None
        text = self.prompt_injection_builder(self)
        if not isinstance(text, str):
            return None
        return text.strip() or None

    async def run(self, *args: Any, **kwargs: Any) -> Any:
        """Do the work: override with typed keyword parameters (sync or async).

        This gradual signature lets overrides declare any parameters without type errors.
        """
        raise NotImplementedError(f"tool {self.name!r} has neither func nor run()")

    async def invoke(self, arguments: Mapping[str, Any], context: ToolContext | None = None) -> Any:
        """Validate model ``arguments``, inject framework parameters and run the tool.

        Raises:
            ArgumentsError: When the arguments do not match the schema.
        """
        schema = self.schema
        kwargs = schema.validate(arguments)
        if schema.injected:  # else there is nothing to inject: no context is read
            kwargs.update(self._injections(context or self._direct_context({})))
        return await self._call(kwargs)

    def _direct_context(self, passed: Mapping[str, Any]) -> ToolContext:
        """A context for calls outside a run, built from explicitly passed framework values."""
        by_kind = {self.schema.injected[name]: value for name, value in passed.items()}
        context = by_kind.get("context")
        if isinstance(context, ToolContext):
            return context
        emitter = by_kind.get("event_emitter")
        signal = by_kind.get("abort_signal")
        return ToolContext(
            tool_call_id="direct",
            tool_name=self.name,
            event_emitter=emitter if emitter is not None else ToolEventEmitter(live=False),
            abort_signal=signal if signal is not None else AbortSignal(),
        )

    def _injections(self, context: ToolContext) -> dict[str, Any]:
        values = {
            "event_emitter": context.event_emitter,
            "abort_signal": context.abort_signal,
            "context": context,
        }
        return {name: values[kind] for name, kind in self.schema.injected.items()}

    async def _call(self, kwargs: dict[str, Any]) -> Any:
        target = self._func if self._func is not None else self.run
        if inspect.iscoroutinefunction(target):
            return await target(**kwargs)
        # Sync tools run in a worker thread so they never block the event loop. A thread cannot
        # be interrupted: on abort or timeout the run goes on without it (the scheduler says so
        # in the cancellation record) instead of waiting for the thread to finish.
        call = functools.partial(target, **kwargs)
        result = await anyio.to_thread.run_sync(call, abandon_on_cancel=True)
        if inspect.isawaitable(result):
            return await result
        return result

    async def __call__(self, **kwargs: Any) -> Any:
        """Call the tool directly with keyword arguments; returns the raw result.

        Framework parameters (``event_emitter``, ...) may be passed explicitly.

        Raises:
            ArgumentsError: When the arguments do not match the schema.
        """
        passed = {k: kwargs.pop(k) for k in list(kwargs) if k in self.schema.injected}
        call_kwargs = self.schema.validate(kwargs)
        call_kwargs.update(self._injections(self._direct_context(passed)))
        call_kwargs.update(passed)
        return await self._call(call_kwargs)

    def render(self, result: Any) -> Any:
        """Turn a raw result into what the model should see (override to summarise)."""
        return result

    def failed(self, result: Any) -> bool:
        """Whether a raw result reports a failure the tool returned rather than raised (a code
        run that raised, say): servers flag it (MCP's ``isError``). Default: never."""
        return False

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


class FunctionTool(Tool):
    """A tool made by ``@tool``: still callable exactly like the decorated function."""

    # Set by functools.update_wrapper; declared so that type checkers know them.
    __name__: str
    __qualname__: str
    __wrapped__: Callable[..., Any]

    def __init__(self, func: Callable[..., Any], **options: Any) -> None:
        super().__init__(func=func, **options)
        functools.update_wrapper(self, func)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the original function unchanged."""
        return self.func(*args, **kwargs)

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        """On an instance, return a copy of the tool bound to it (``self`` is not in the schema).

        The copy shares the schema, so accessing a method tool costs no schema rebuild.
        """
        if instance is None:
            return self
        bound = copy.copy(self)
        bound._func = types.MethodType(self.func, instance)
        bound.__wrapped__ = bound.func  # inspect.signature then omits self
        return bound


def _snake(class_name: str) -> str:
    """``WebSearchTool`` → ``web_search_tool``: the default name of a ``Tool`` subclass."""
    return _CAMEL.sub("_", class_name).lower()
