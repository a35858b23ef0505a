"""``@llm_function``: a typed, docstring-only ``async def`` becomes a typed LLM call."""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import aclosing
from typing import Any

from .._events import ResponseYield
from .._messages import SystemMessage, history_to_dicts
from .._transcript import Transcript
from ..engine import EngineOptions, Invocation, Run, RunResult, ToolProtocol, split_options
from ..exceptions import AbortedError, OutputParseError
from ..providers import LLMInterface
from ._common import binder, check_async, split_call_kwargs, static_tools
from ._output import OutputSpec
from ._prompt import docstring_of, fill_template, render_arguments

__all__ = ["llm_function"]

_SYSTEM_TEMPLATE_DEFAULT = "{function_description}"


def llm_function(
    llm_interface: LLMInterface,
    toolkit: Iterable[Any] | None = None,
    max_tool_calls: int | None = None,
    system_prompt_template: str | None = None,
    user_prompt_template: str | None = None,
    enable_event: bool = False,
    retries: int = 2,
    *,
    options: EngineOptions | None = None,
    tool_protocol: ToolProtocol | None = None,
    **llm_kwargs: Any,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Turn a typed, docstring-only ``async def`` into an LLM call.

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

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        check_async(func, "llm_function")
        signature = inspect.signature(func)
        bind = binder(signature)
        hints = typing.get_type_hints(func)
        output = OutputSpec.for_annotation(hints.get("return", inspect.Signature.empty))
        native = llm_interface.capabilities.json_schema
        doc = docstring_of(func)

        async def prepare(
            args: tuple[Any, ...], kwargs: dict[str, Any], events: bool
        ) -> tuple[Run, _AnswerParser | None]:
            call = split_call_kwargs(kwargs, pausable=False)
            arguments = bind(args, kwargs)
            description = fill_template(doc, call.template_params)
            system = fill_template(
                system_prompt_template or _SYSTEM_TEMPLATE_DEFAULT,
                {**call.template_params, "function_description": description},
            )
            user = await render_arguments(signature, arguments, bare_single_text=False)
            if user_prompt_template is not None:
                user = type(user)(fill_template(user_prompt_template, {"parameters": user.text}))
            parser = _AnswerParser(output) if output.kind == "json" else None
            invocation = Invocation(
                llm=llm_interface,
                system_prompt=system,
                tools=await call.resolve_tools(tools, providers),
                session_id=call.session_id,
                options=engine_options,
                response_format=output.response_format() if native else None,
                output_contract="" if native else output.contract(),
                params=params,
                answer_check=parser.check if parser is not None else None,
                max_repairs=retries,
                func_name=func.__name__,
                hooks=call.run_hooks(providers),
            )
            transcript = Transcript([SystemMessage(system), user])
            run = Run(invocation, transcript, abort=call.abort, user_input=user.text, events=events)
            return run, parser

        if enable_event:

            @functools.wraps(func)
            async def event_wrapper(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
                run, parser = await prepare(args, kwargs, True)
                # aclosing: a consumer leaving early closes the run here, in this task.
                async with aclosing(run.__aiter__()) as items:
                    async for item in items:
                        if isinstance(item, RunResult):
                            value = _value(item, parser, output)
                            yield ResponseYield(value, history_to_dicts(item.messages))
                        else:
                            yield item

            return event_wrapper

        @functools.wraps(func)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            run, parser = await prepare(args, kwargs, False)
            return _value(await run.result(), parser, output)

        return wrapper

    return decorate


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
