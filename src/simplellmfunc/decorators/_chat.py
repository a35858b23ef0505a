"""``@llm_chat``: an ``async def`` becomes a streaming, tool-using agent with history."""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import aclosing
from typing import Any, Literal

from .._events import ResponseYield
from .._messages import (
    Message,
    SystemMessage,
    UserMessage,
    history_from_dicts,
    history_to_dicts,
)
from .._transcript import Transcript
from ..engine import (
    EngineOptions,
    HistoryWindow,
    Invocation,
    RawItem,
    Run,
    RunHook,
    RunResult,
    TerminationPolicy,
    TextChunk,
    ToolProtocol,
    answer_deferred,
    split_options,
)
from ..exceptions import DecoratorError
from ..providers import LLMInterface
from ._agent_tool import AgentTool
from ._common import (
    CallOptions,
    binder,
    self_reference_hook,
    split_call_kwargs,
    static_tools,
)
from ._prompt import HISTORY_NAMES, docstring_of, fill_template, render_arguments

__all__ = ["llm_chat"]

ReturnMode = Literal["text", "raw"]


def llm_chat(
    llm_interface: LLMInterface,
    toolkit: Iterable[Any] | None = None,
    max_tool_calls: int | None = None,
    stream: bool = False,
    return_mode: ReturnMode = "text",
    enable_event: bool = False,
    self_reference: Any = None,
    self_reference_key: str | None = None,
    *,
    options: EngineOptions | None = None,
    tool_protocol: ToolProtocol | None = None,
    termination: TerminationPolicy | None = None,
    history_window: HistoryWindow | None = None,
    hooks: Sequence[RunHook] = (),
    **llm_kwargs: Any,
) -> Callable[[Callable[..., Any]], Callable[..., AsyncIterator[Any]]]:
    """Turn an ``async def`` into a chat agent that yields ``(text, updated_history)``.

    The docstring is the system prompt (with ``_template_params``). The decorated function takes
    ``history`` (or ``chat_history``), a list of chat dicts, plus any other parameters, which
    form the user message. The returned history always starts with the current system prompt:
    a system message in the incoming history is replaced by it (kept when the function has no
    docstring). The caller's list is never modified.

    Yields:
        Without ``stream``: ``(text, history)`` per model reply with text; with ``stream``:
        ``(delta, history)`` per text delta. The last item's history contains the final reply
        and every tool turn, and is valid for the next call. ``return_mode="raw"`` yields the
        provider's typed responses / stream events instead of text. ``enable_event=True``
        yields ``EventYield`` items and a final ``ResponseYield``.

    Args:
        llm_interface: The model to call.
        toolkit: Tools (``@tool`` functions, ``Tool`` objects, toolsets, MCP toolsets).
        max_tool_calls: Cap on iterations with tool calls (``None``: no cap).
        stream: Stream the reply text.
        return_mode: ``"text"`` or ``"raw"``.
        enable_event: Yield typed events and a final response.
        self_reference: A ``SelfReference`` memory backend.
        self_reference_key: The memory key of this agent; alone, it binds the SelfReference
            of the first PyRepl in the toolkit (attaching one if it has none), else a private
            one.
        options: Engine options (:class:`~simplellmfunc.engine.EngineOptions`);
            ``max_tool_calls``, ``tool_protocol``, ``termination``, ``history_window`` and any
            other option given as a keyword argument are merged in.
        tool_protocol: ``"native"`` function calling, ``"text"`` (tools described in the prompt,
            calls parsed from the reply) or ``"auto"`` (text when the provider has no native
            tools).
        termination: Implicit termination signals (default: on only with the text protocol).
        history_window: Send only the system prompt and recent turns within a token budget.
        hooks: Extra run hooks (memory, checkpoints, ...), called after SelfReference's; toolkit
            items that are run hooks too (skills) come last.
        **llm_kwargs: Body parameters for every call (``temperature`` …); engine option names
            (``tool_timeout``, ``keyword_heuristic`` …) are taken out first.

    Raises:
        DecoratorError: If the function is not ``async def`` or has no history parameter, an
            engine option is given twice or is invalid, or a keyword argument is neither an
            engine option nor a JSON value.
    """
    tools, providers = static_tools(toolkit)
    engine_options, params = split_options(
        options,
        llm_kwargs,
        max_tool_calls=max_tool_calls,
        tool_protocol=tool_protocol,
        termination=termination,
        history_window=history_window,
    )
    raw = return_mode == "raw"

    def decorate(func: Callable[..., Any]) -> Callable[..., AsyncIterator[Any]]:
        if not inspect.iscoroutinefunction(func) and not inspect.isasyncgenfunction(func):
            raise DecoratorError(f"@llm_chat needs an 'async def' function, got {func!r}")
        signature = inspect.signature(func)
        bind = binder(signature)
        history_name = next((n for n in HISTORY_NAMES if n in signature.parameters), None)
        if history_name is None:
            raise DecoratorError("@llm_chat functions need a 'history' or 'chat_history' parameter")
        doc = docstring_of(func)
        memory = self_reference_hook(self_reference, self_reference_key, tools)
        run_hooks = ((memory,) if memory is not None else ()) + tuple(hooks)

        async def build(
            args: tuple[Any, ...], kwargs: dict[str, Any], resumed: Any = None
        ) -> tuple[Invocation, Transcript, CallOptions, Message | None]:
            call = split_call_kwargs(kwargs)
            system = fill_template(doc, call.template_params)
            if resumed is None:
                arguments = bind(args, kwargs)
                history = arguments.pop(history_name, None)
                user: Message | None = await render_arguments(
                    signature, arguments, bare_single_text=True
                )
            elif kwargs:
                raise DecoratorError(f"resume() takes no arguments besides the history: {kwargs}")
            else:
                history, user = resumed, None
            invocation = Invocation(
                llm=llm_interface,
                system_prompt=system,
                tools=await call.resolve_tools(tools, providers),
                session_id=call.session_id,
                stream=stream,
                options=engine_options,
                params=params,
                hooks=run_hooks + call.run_hooks(providers),
                func_name=func.__name__,
            )
            transcript = Transcript(_initial_messages(system, history, user))
            return invocation, transcript, call, user

        async def prepare(
            args: tuple[Any, ...], kwargs: dict[str, Any], resumed: Any = None
        ) -> Run:
            invocation, transcript, call, user = await build(args, kwargs, resumed)
            return Run(
                invocation,
                transcript,
                abort=call.abort,
                pause=call.pause,
                user_input=user.text if isinstance(user, UserMessage) else "",
                events=enable_event,
                text=not enable_event,
                raw=raw and not enable_event,
            )

        async def iterate(run: Run) -> AsyncIterator[Any]:
            view = _HistoryView(run.state.transcript)
            # aclosing: a consumer leaving early closes the run here, in this task.
            async with aclosing(run.__aiter__()) as items:
                async for item in items:
                    yield _output(item, view, enable_event=enable_event, stream=stream)

        @functools.wraps(func)
        async def wrapper(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            # iterate()'s body inline: one async generator less per streamed item.
            run = await prepare(args, kwargs)
            view = _HistoryView(run.state.transcript)
            async with aclosing(run.__aiter__()) as items:
                async for item in items:
                    yield _output(item, view, enable_event=enable_event, stream=stream)

        async def resume(
            history: list[dict[str, Any]],
            results: Mapping[str, Any] | None = None,
            **kwargs: Any,
        ) -> AsyncIterator[Any]:
            """Continue a paused run (``terminated_by="paused"``) from its history, or a
            deferred one (``terminated_by="deferred"``) with ``results``, the app's result of
            each pending call by call id: no new user message; takes ``_template_params``,
            ``_abort_signal`` and ``_pause_signal``.

            Raises:
                InvalidHistoryError: If ``results`` leave a pending call unanswered or answer
                    a call that is not pending.
            """
            if not history:
                raise DecoratorError("resume() needs the history of a paused run")
            if results is not None:
                history = answer_deferred(history, results)
            async for item in iterate(await prepare((), kwargs, history)):
                yield item

        async def prepare_call(
            *args: Any, _resume_history: list[dict[str, Any]] | None = None, **kwargs: Any
        ) -> tuple[Invocation, Transcript]:
            """The invocation and transcript a call with these arguments would run (the
            multi-agent runtime runs them under another run). A missing history is an empty
            one; ``_resume_history`` continues a history without a new user message, as
            :func:`resume` does."""
            if _resume_history is not None:
                invocation, transcript, _, _ = await build((), kwargs, _resume_history)
                return invocation, transcript
            if history_name not in kwargs and len(args) <= _position(signature, history_name):
                kwargs[history_name] = []
            invocation, transcript, _, _ = await build(args, kwargs)
            return invocation, transcript

        def as_tool(name: str | None = None, description: str | None = None) -> AgentTool:
            """This agent as a tool of another agent (see :class:`AgentTool`)."""
            return AgentTool(wrapper, name=name, description=description)

        wrapper.resume = resume  # type: ignore[attr-defined]
        wrapper.prepare_call = prepare_call  # type: ignore[attr-defined]
        wrapper.as_tool = as_tool  # type: ignore[attr-defined]
        return wrapper

    return decorate


def _position(signature: inspect.Signature, name: str) -> int:
    return list(signature.parameters).index(name)


def _output(item: Any, view: _HistoryView, *, enable_event: bool, stream: bool) -> Any:
    """What the decorated function yields for one item of the run (a text delta first: the
    item a streamed reply yields most)."""
    kind = type(item)
    if kind is TextChunk:
        return (item.text, view.dicts())
    if kind is RunResult:
        final = history_to_dicts(item.messages)
        if enable_event:
            return ResponseYield(item.text, final)
        return (item.text if not stream else "", final)
    if kind is RawItem:
        return (item.item, view.dicts())
    return item


def _initial_messages(system: str, history: Any, user: Message | None) -> list[Message]:
    if history is not None and not isinstance(history, list | tuple):
        raise DecoratorError("history must be a list of chat message dicts")
    previous = history_from_dicts(history)
    rest = [m for m in previous if not isinstance(m, SystemMessage)]
    if system:
        head: list[Message] = [SystemMessage(system)]
    else:  # no docstring: the history's own system prompt, if any, stays
        head = [m for m in previous[:1] if isinstance(m, SystemMessage)]
    return [*head, *rest] if user is None else [*head, *rest, user]


class _HistoryView:
    """Chat dicts of the live transcript, rebuilt only when the transcript changed."""

    __slots__ = ("_cache", "_key", "_transcript")

    def __init__(self, transcript: Transcript) -> None:
        self._transcript = transcript
        self._key: object = None
        self._cache: list[dict[str, Any]] = []

    def dicts(self) -> list[dict[str, Any]]:
        messages = self._transcript.messages
        if messages is not self._key:
            self._key = messages
            self._cache = history_to_dicts(messages)
        return list(self._cache)
