"""``@llm_chat``: an ``async def`` becomes a streaming, tool-using agent with history."""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import aclosing
from typing import Any, Literal

from .._abort import AbortSignal
from .._events import EventOrigin, ResponseYield
from .._messages import Message, SystemMessage, history_from_dicts, history_to_dicts
from .._transcript import Transcript
from ..engine._emit import Emitter
from ..engine._invocation import Invocation, RunHook
from ..engine._llm_step import RawItem, TextChunk
from ..engine._loop import ReactRun, run_react
from ..engine._pump import Finished, Send, event_pump
from ..engine._state import RunResult
from ..engine._termination import TerminationPolicy
from ..engine._window import HistoryWindow
from ..exceptions import DecoratorError
from ..providers._base import LLMInterface
from ._common import (
    ToolProtocol,
    new_call_id,
    resolve_protocol,
    resolve_tools,
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
    tool_protocol: ToolProtocol = "auto",
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
        self_reference_key: The memory key of this agent.
        tool_protocol: ``"native"`` function calling, ``"text"`` (tools described in the prompt,
            calls parsed from the reply) or ``"auto"`` (text when the provider has no native
            tools).
        termination: Implicit termination signals (default: on only with the text protocol).
        history_window: Send only the system prompt and recent turns within a token budget.
        hooks: Extra run hooks (memory, checkpoints, ...), called after SelfReference's.
        **llm_kwargs: Body parameters for every call; engine options ``tool_timeout``,
            ``max_tool_concurrency`` and ``tool_result_budget`` are taken out first.

    Raises:
        DecoratorError: If the function is not ``async def`` or has no history parameter.
    """
    tools, providers = static_tools(toolkit)
    raw = return_mode == "raw"
    engine_options = {
        k: llm_kwargs.pop(k)
        for k in ("tool_timeout", "max_tool_concurrency", "tool_result_budget")
        if k in llm_kwargs
    }

    def decorate(func: Callable[..., Any]) -> Callable[..., AsyncIterator[Any]]:
        if not inspect.iscoroutinefunction(func) and not inspect.isasyncgenfunction(func):
            raise DecoratorError(f"@llm_chat needs an 'async def' function, got {func!r}")
        signature = inspect.signature(func)
        history_name = next((n for n in HISTORY_NAMES if n in signature.parameters), None)
        if history_name is None:
            raise DecoratorError("@llm_chat functions need a 'history' or 'chat_history' parameter")
        doc = docstring_of(func)
        hook = _self_reference_hook(self_reference, self_reference_key)

        async def prepare(args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Call:
            options = split_call_kwargs(kwargs)
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            arguments = dict(bound.arguments)
            history = arguments.pop(history_name, None)
            system = fill_template(doc, options.template_params)
            user = await render_arguments(signature, arguments, bare_single_text=True)
            transcript = Transcript(_initial_messages(system, history, user))
            invocation = Invocation(
                llm=llm_interface,
                system_prompt=system,
                tools=await resolve_tools(tools, providers),
                stream=stream,
                max_tool_calls=max_tool_calls,
                params=llm_kwargs,
                hooks=((hook,) if hook is not None else ()) + tuple(hooks),
                tool_protocol=resolve_protocol(tool_protocol, llm_interface),
                termination=termination or TerminationPolicy(),
                history_window=history_window,
                **engine_options,
            )
            return _Call(invocation, transcript, options.abort, user.text, enable_event, raw)

        @functools.wraps(func)
        async def wrapper(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            call = await prepare(args, kwargs)
            view = _HistoryView(call.transcript)
            if enable_event or stream or _needs_task_group(call.invocation):
                # Live events and stream deltas need the run in its own task: the event pump.
                # So do hooks with background work (forks): run_react gives them a task group.
                # aclosing: a consumer leaving early closes the pump here, in this task.
                async with aclosing(event_pump(call.run)) as items:
                    async for item in items:
                        yield _output(item, view, enable_event=enable_event, stream=stream)
                return
            # Plain mode only yields between phases: the run is driven here, in this task.
            buffer: list[Any] = []
            async with call.react_run(buffer) as run:
                going = True
                while going:
                    going = await run.step()
                    while buffer:
                        yield _output(buffer.pop(0), view, enable_event=False, stream=False)
            yield _output(Finished(run.state.result()), view, enable_event=False, stream=False)

        return wrapper

    return decorate


class _Call:
    """One call of an ``@llm_chat`` function, ready to run."""

    __slots__ = ("abort", "enable_event", "invocation", "origin", "raw", "transcript", "user_text")

    def __init__(
        self,
        invocation: Invocation,
        transcript: Transcript,
        abort: AbortSignal | None,
        user_text: str,
        enable_event: bool,
        raw: bool,
    ) -> None:
        self.invocation = invocation
        self.transcript = transcript
        self.abort = abort
        self.user_text = user_text
        self.enable_event = enable_event
        self.raw = raw
        self.origin = EventOrigin(agent_call_id=new_call_id())

    async def run(self, send: Send) -> RunResult:
        """Run to the end, sending items and events to ``send`` (the event pump's body)."""
        emitter = self.emitter(send)
        return await run_react(
            self.invocation, self.transcript, emitter, self.abort, user_input=self.user_text
        )

    def react_run(self, buffer: list[Any]) -> ReactRun:
        """The run as steps, its items appended to ``buffer``."""

        async def send(item: Any) -> None:
            buffer.append(item)

        emitter = self.emitter(send)
        return ReactRun(
            self.invocation, self.transcript, emitter, self.abort, user_input=self.user_text
        )

    def emitter(self, send: Send) -> Emitter:
        """The run's emitter, sending to ``send``."""
        events = self.enable_event
        return Emitter(
            send,
            self.origin,
            wants_events=events,
            wants_text=not events,
            wants_raw=self.raw and not events,
        )


def _output(item: Any, view: _HistoryView, *, enable_event: bool, stream: bool) -> Any:
    """What the decorated function yields for one item of the pump."""
    if isinstance(item, Finished):
        result: RunResult = item.value
        final = history_to_dicts(result.messages)
        if enable_event:
            return ResponseYield(result.text, final)
        return (result.text if not stream else "", final)
    if isinstance(item, TextChunk):
        return (item.text, view.dicts())
    if isinstance(item, RawItem):
        return (item.item, view.dicts())
    return item


def _initial_messages(system: str, history: Any, user: Message) -> list[Message]:
    if history is not None and not isinstance(history, list | tuple):
        raise DecoratorError("history must be a list of chat message dicts")
    previous = history_from_dicts(history)
    rest = [m for m in previous if not isinstance(m, SystemMessage)]
    if system:
        head: list[Message] = [SystemMessage(system)]
    else:  # no docstring: the history's own system prompt, if any, stays
        head = [m for m in previous[:1] if isinstance(m, SystemMessage)]
    return [*head, *rest, user]


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


def _needs_task_group(invocation: Invocation) -> bool:
    return any(hook.needs_task_group for hook in invocation.hooks)


def _self_reference_hook(self_reference: Any, key: str | None) -> RunHook | None:
    """The run hook of a SelfReference backend (created implicitly from a key alone)."""
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
