"""``@llm_chat``: an ``async def`` becomes a :class:`ChatAgent`, a streaming, tool-using agent
with history."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Sequence
from typing import Literal

from ..engine import (
    EngineOptions,
    HistoryWindow,
    RunHook,
    TerminationPolicy,
    ToolProtocol,
    split_options,
)
from ..exceptions import DecoratorError
from ..providers import LLMInterface
from ._agent import ChatAgent, ChatSettings
from ._common import (
    DEFAULT_MEMORY_KEY,
    MemoryBackend,
    ToolkitItem,
    self_reference_hook,
    static_tools,
)

__all__ = ["llm_chat"]


ReturnMode = Literal["text", "raw"]


def llm_chat(
    llm_interface: LLMInterface,
    toolkit: Iterable[ToolkitItem] | None = None,
    max_tool_calls: int | None = None,
    stream: bool = False,
    return_mode: ReturnMode = "text",
    enable_event: bool = False,
    self_reference: MemoryBackend | None = None,
    self_reference_key: str | None = None,
    *,
    options: EngineOptions | None = None,
    tool_protocol: ToolProtocol | None = None,
    termination: TerminationPolicy | None = None,
    history_window: HistoryWindow | None = None,
    hooks: Sequence[RunHook] = (),
    strict_signature: bool = False,
    **llm_kwargs: object,
) -> Callable[[Callable[..., object]], ChatAgent]:
    """Turn an ``async def`` into a :class:`ChatAgent` that yields ``(text, updated_history)``.

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
        self_reference: A ``SelfReference`` memory backend; the agent is bound to it as the
            agent its forks call (``bind_agent_instance``; the last agent decorated wins).
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
        strict_signature: Require SimpleLLMFunc's canonical shape
            ``async def agent(history, message: str, _template_params=None)``.
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
    memory = self_reference_hook(self_reference, self_reference_key, tools)
    settings = ChatSettings(
        llm=llm_interface,
        tools=tuple(tools),
        providers=tuple(providers),
        options=engine_options,
        params=params,
        stream=stream,
        raw=return_mode == "raw",
        enable_event=enable_event,
        hooks=((memory,) if memory is not None else ()) + tuple(hooks),
    )

    def decorate(func: Callable[..., object]) -> ChatAgent:
        if strict_signature:
            _check_strict_signature(func)
        agent = ChatAgent(func, settings)
        # SimpleLLMFunc's binding: the agent is what ``self_reference.instance.fork(...)``
        # (and a kernel fork outside a turn) calls, on this agent's key by default.
        bind = getattr(self_reference, "bind_agent_instance", None)
        if callable(bind):
            bind(agent, self_reference_key or DEFAULT_MEMORY_KEY)
        return agent

    return decorate


def _check_strict_signature(func: Callable[..., object]) -> None:
    """SimpleLLMFunc's ``strict_signature=True``: ``(history, message: str[, _template_params])``.

    Raises:
        DecoratorError: (a ``TypeError``) naming the first parameter that does not fit.
    """
    shape = "`async def agent(history, message: str, _template_params=None)`"
    parameters = list(inspect.signature(func).parameters.values())
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    if len(parameters) < 2 or any(p.kind in variadic for p in parameters):
        raise DecoratorError(f"llm_chat(strict_signature=True) requires {shape}")
    history, message, *extra = parameters
    if history.name not in ("history", "chat_history"):
        raise DecoratorError(
            f"llm_chat(strict_signature=True) requires the first parameter to be `history` "
            f"or `chat_history`: {shape}"
        )
    if message.annotation not in (str, "str"):
        raise DecoratorError(
            f"llm_chat(strict_signature=True) requires the second parameter to be annotated "
            f"`str` (the user message): {shape}"
        )
    if message.name != "message":
        raise DecoratorError(
            f"llm_chat(strict_signature=True) requires the second parameter name to be "
            f"`message`: {shape}"
        )
    for item in extra:
        if item.name != "_template_params":
            raise DecoratorError(
                f"llm_chat(strict_signature=True) only allows `_template_params` besides "
                f"(history, message: str), not {item.name!r}"
            )
