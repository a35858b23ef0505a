"""``@llm_function``: a typed, docstring-only ``async def`` becomes an :class:`LLMFunction`, a
typed LLM call."""

from __future__ import annotations

import inspect
import typing
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, Generic, ParamSpec, TypeVar

from .._events import EventYield, LLMChunkArriveEvent, ResponseYield
from .._messages import SystemMessage, history_to_dicts
from .._transcript import Transcript
from ..engine import EngineOptions, Invocation, Run, RunResult, ToolProtocol, split_options
from ..exceptions import AbortedError, OutputParseError
from ..providers import LLMInterface
from ..tools import Tool, ToolProvider
from ._common import ToolkitItem, check_async, split_call_kwargs, static_tools, unbound
from ._decorated import Decorated
from ._output import OutputSpec, PartialParser
from ._prompt import fill_template, render_arguments

__all__ = ["LLMFunction", "llm_function"]

P = ParamSpec("P")
R = TypeVar("R")

_SYSTEM_TEMPLATE_DEFAULT = "{function_description}"


def llm_function(
    llm_interface: LLMInterface,
    toolkit: Iterable[ToolkitItem] | None = None,
    max_tool_calls: int | None = None,
    system_prompt_template: str | None = None,
    user_prompt_template: str | None = None,
    enable_event: bool = False,
    retries: int = 2,
    *,
    options: EngineOptions | None = None,
    tool_protocol: ToolProtocol | None = None,
    **llm_kwargs: object,
) -> Callable[[Callable[P, Awaitable[R]]], LLMFunction[P, R]]:
    """Turn a typed, docstring-only ``async def`` into an :class:`LLMFunction`.

    The docstring is the prompt (``{name}`` placeholders filled from ``_template_params``), the
    arguments form the user message, and the return annotation is the output contract: the
    reply is parsed and validated into it, and a reply that does not validate is sent back to
    the model with the error, up to ``retries`` times.

    Args:
        llm_interface: The model to call.
        toolkit: Tools the model may call (``@tool`` functions, ``Tool`` objects, toolsets).
        max_tool_calls: Cap on iterations with tool calls (``None``: no cap).
        system_prompt_template: Template of the system prompt; placeholders
            ``{function_description}`` and any ``_template_params``.
        user_prompt_template: Template of the user message; placeholder ``{parameters}``.
        enable_event: Return an async iterator of ``EventYield`` and one final ``ResponseYield``.
        retries: Repair attempts when the reply does not match the return type.
        options: Engine options (:class:`~simplellmfunc.engine.EngineOptions`);
            ``max_tool_calls``, ``tool_protocol`` and any other option given as a keyword
            argument are merged in.
        tool_protocol: ``"native"``, ``"text"`` (prompted tool calls) or ``"auto"`` (text when
            the provider has no native function calling).
        **llm_kwargs: Body parameters for every call (``temperature`` …); engine option names
            (``tool_timeout`` …) are taken out first.

    Raises:
        DecoratorError: If the decorated function is not ``async def``, an engine option is
            given twice or is invalid, or a keyword argument is neither an engine option nor a
            JSON value.
    """
    tools, providers = static_tools(toolkit)
    engine_options, params = split_options(
        options, llm_kwargs, max_tool_calls=max_tool_calls, tool_protocol=tool_protocol
    )
    settings = _FunctionSettings(
        llm=llm_interface,
        tools=tuple(tools),
        providers=tuple(providers),
        options=engine_options,
        params=params,
        system_template=system_prompt_template or _SYSTEM_TEMPLATE_DEFAULT,
        user_template=user_prompt_template,
        enable_event=enable_event,
        retries=retries,
    )

    def decorate(func: Callable[P, Awaitable[R]]) -> LLMFunction[P, R]:
        return LLMFunction(func, settings)

    return decorate


@dataclass(frozen=True, slots=True)
class _FunctionSettings:
    """What ``@llm_function(...)`` was given, shared by the functions it decorates."""

    llm: LLMInterface
    tools: tuple[Tool, ...]
    providers: tuple[ToolProvider, ...]
    options: EngineOptions
    params: dict[str, Any]
    system_template: str
    user_template: str | None
    enable_event: bool
    retries: int


class LLMFunction(Decorated, Generic[P, R]):
    """An ``@llm_function``: a typed LLM call.

    ``await f(...)`` is the parsed return value (with ``enable_event=True``, ``f(...)`` is an
    async iterator of ``EventYield`` and one final ``ResponseYield``); :meth:`stream` yields
    validated partial values while the reply streams, then the final one; :meth:`run` is the
    engine's :class:`~simplellmfunc.engine.Run` of a call (its events and result). The object
    keeps the decorated function's name, docstring and signature; decorating a method works
    (the instance is bound to the first parameter and is not sent to the model).

    Raises:
        DecoratorError: (at decoration) If the function is not ``async def``.
    """

    __slots__ = ("_native", "_output")

    _settings: _FunctionSettings

    def __init__(self, func: Callable[P, Awaitable[R]], settings: _FunctionSettings) -> None:
        check_async(func, "llm_function")
        super().__init__(func, settings)
        hints = typing.get_type_hints(func)
        self._output = OutputSpec.for_annotation(hints.get("return", inspect.Signature.empty))
        self._native = settings.llm.capabilities.json_schema

    def __call__(self, *args: object, **kwargs: object) -> Any:
        """Call the model: a coroutine of the parsed value, or with ``enable_event=True`` an
        async iterator of events and one final ``ResponseYield``.

        Raises:
            OutputParseError: If the reply does not parse after the retries.
            AbortedError: If the call was aborted.
        """
        if self._settings.enable_event:
            return self.events(*args, **kwargs)
        return self._value(args, kwargs)

    async def run(self, *args: object, **kwargs: object) -> Run:
        """The run of a call with these arguments, not started: iterate it for its
        ``EventYield`` items and the :class:`~simplellmfunc.engine.RunResult` last (the
        reply's text; the parsed value is what :meth:`__call__` returns)."""
        run, _ = await self._prepare(args, kwargs, events=True)
        return run

    async def stream(self, *args: object, **kwargs: object) -> AsyncIterator[R]:
        """Call the model with the reply streamed: yields the value parsed so far each time
        it grows (pydantic's partial validation: a list without its unfinished last item, a
        model once its required fields are there, a string cut short), then the final,
        fully validated value, last.

        Raises:
            OutputParseError: If the final reply does not parse after the retries.
            AbortedError: If the call was aborted.
        """
        run, parser = await self._prepare(args, kwargs, events=True, stream=True)
        partial = PartialParser(self._output)
        result: RunResult | None = None
        async with aclosing(run.__aiter__()) as items:
            async for item in items:
                if isinstance(item, RunResult):
                    result = item
                    continue
                if (
                    isinstance(item, EventYield)
                    and isinstance(item.event, LLMChunkArriveEvent)
                    and item.origin.fork_depth == 0  # the call's own reply, not a sub-agent's
                    and partial.feed(item.event.accumulated_text)
                ):
                    yield partial.value
        assert result is not None  # a run always ends with its result
        yield _value(result, parser, self._output)

    async def _value(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> R:
        run, parser = await self._prepare(args, kwargs, events=False)
        value: R = _value(await run.result(), parser, self._output)
        return value

    async def events(self, *args: object, **kwargs: object) -> AsyncGenerator[Any, None]:
        """A call with its events, whatever ``enable_event`` says: every ``EventYield`` as it
        happens, then one ``ResponseYield`` with the parsed value and the history.

        Raises:
            OutputParseError: If the reply does not parse after the retries.
            AbortedError: If the call was aborted.
        """
        run, parser = await self._prepare(args, kwargs, events=True)
        # aclosing: a consumer leaving early closes the run here, in this task.
        async with aclosing(run.__aiter__()) as items:
            async for item in items:
                if isinstance(item, RunResult):
                    value = _value(item, parser, self._output)
                    yield ResponseYield(value, history_to_dicts(item.messages))
                else:
                    yield item

    async def _prepare(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], *, events: bool, stream: bool = False
    ) -> tuple[Run, _AnswerParser | None]:
        settings, output = self._settings, self._output
        call = split_call_kwargs(kwargs, pausable=False)
        arguments = unbound(self._bind((*self._bound, *args), kwargs), self._bound)
        description = fill_template(self._doc, call.template_params)
        system = fill_template(
            settings.system_template,
            {**call.template_params, "function_description": description},
        )
        user = await render_arguments(self._signature, arguments, bare_single_text=False)
        if settings.user_template is not None:
            user = type(user)(fill_template(settings.user_template, {"parameters": user.text}))
        parser = _AnswerParser(output) if output.kind == "json" else None
        invocation = Invocation(
            llm=settings.llm,
            system_prompt=system,
            tools=await call.resolve_tools(list(settings.tools), list(settings.providers)),
            session_id=call.session_id,
            stream=stream,
            options=call.engine_options(settings.options),
            response_format=output.response_format() if self._native else None,
            output_contract="" if self._native else output.contract(),
            params=settings.params,
            answer_check=parser.check if parser is not None else None,
            max_repairs=settings.retries,
            func_name=self.__name__,
            hooks=call.run_hooks(settings.providers),
        )
        transcript = Transcript([SystemMessage(system), user])
        run = Run(invocation, transcript, abort=call.abort, user_input=user.text, events=events)
        return run, parser


class _AnswerParser:
    """Parses each final answer during the run; a failure becomes the model's repair prompt."""

    __slots__ = ("errors", "output", "parsed", "value")

    def __init__(self, output: OutputSpec) -> None:
        self.output = output
        self.errors: list[str] = []
        self.parsed = False
        self.value: Any = None

    def check(self, text: str) -> str | None:
        """Parse ``text``; return ``None`` if it is usable, else the feedback for the model."""
        try:
            self.value = self.output.parse(text)
        except ValueError as exc:
            self.parsed = False
            self.errors.append(str(exc))
            return (
                f"Your reply could not be used: {exc}. "
                "Reply again with only the required JSON, nothing else."
            )
        self.parsed = True
        return None


def _value(result: RunResult, parser: _AnswerParser | None, output: OutputSpec) -> Any:
    """The typed value of a finished run; answers that did not parse were already sent back
    within the run (``retries``).

    Raises:
        AbortedError: If the call was aborted (never a stale or partial value).
        OutputParseError: If the reply still does not parse after the retries.
    """
    if result.aborted:
        raise AbortedError(result.abort_reason)
    if parser is None:
        return output.parse(result.text)
    if not parser.parsed:
        last = parser.errors[-1] if parser.errors else "no answer"
        raise OutputParseError(
            f"the reply could not be parsed after {len(parser.errors)} attempt(s): {last}",
            raw=result.text,
            errors=list(parser.errors),
        )
    return parser.value
