"""SimpleLLMFunc's ``utils.tui``: the ``@tui()`` decorator, on our Textual front end.

``@tui()`` over an event-streaming agent (an ``@llm_chat`` function with ``enable_event=True``,
or an async generator function taking the message and ``history``) turns it into a launcher:
calling it opens :class:`~simplellmfunc.chat_ui.ChatApp`. Custom event hooks
(``custom_event_hook=[...]``) receive a :class:`ToolRenderSnapshot` and may return a
:class:`ToolEventRenderUpdate`, as in SimpleLLMFunc.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncGenerator, Callable, Sequence
from functools import wraps
from typing import Any

from ..chat_ui import (
    ChatApp,
    ToolCustomEventHook,
    ToolEventRenderUpdate,
    ToolRenderSnapshot,
)
from ..decorators import ChatAgent

__all__ = ["ToolCustomEventHook", "ToolEventRenderUpdate", "ToolRenderSnapshot", "tui"]

_HISTORY_NAMES = ("history", "chat_history")


def _adapt(
    agent: Callable[..., Any], input_name: str, history_name: str | None, static: dict[str, Any]
) -> Callable[..., AsyncGenerator[Any, None]]:
    """The agent as a session turn: message and history in, the agent's keywords passed on."""
    parameters = inspect.signature(agent).parameters
    # An agent takes the per-call keywords (``_abort_signal``, ``_session_id`` ...) without
    # naming them.
    takes_any = isinstance(agent, ChatAgent) or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
    )

    async def turn(
        message: str, history: list[dict[str, Any]] | None = None, **extra: Any
    ) -> AsyncGenerator[Any, None]:
        kwargs = {**static, input_name: message}
        if history_name is not None:
            kwargs[history_name] = list(history or [])
        kwargs.update({k: v for k, v in extra.items() if takes_any or k in parameters})
        async for item in agent(**kwargs):
            yield item

    return turn


def tui(
    custom_event_hook: Sequence[ToolCustomEventHook] | None = None,
    title: str = "SimpleLLMFunc TUI",
) -> Callable[[Callable[..., Any]], Callable[..., None]]:
    """SimpleLLMFunc's ``@tui()``: calling the decorated agent opens the terminal chat.

    The first parameter that is not ``history`` / ``chat_history`` takes the user's message;
    arguments given to the launcher are passed to every turn (a ``history`` one starts the
    conversation).

    Raises:
        ValueError: If the agent has no parameter for the message, or a required one is not
            given to the launcher.
    """

    def decorate(agent: Callable[..., Any]) -> Callable[..., None]:
        signature = inspect.signature(agent)
        names = [n for n in signature.parameters if not n.startswith("_")]
        history_name = next((n for n in _HISTORY_NAMES if n in signature.parameters), None)
        inputs = [n for n in names if n != history_name]
        if not inputs:
            raise ValueError("tui requires at least one non-history parameter for user input")

        @wraps(agent)
        def launcher(*args: Any, **kwargs: Any) -> None:
            bound = signature.bind_partial(*args, **kwargs).arguments
            history = bound.pop(history_name, None) if history_name else None
            bound.pop(inputs[0], None)
            for name in inputs[1:]:
                parameter = signature.parameters[name]
                variadic = parameter.kind in (parameter.VAR_KEYWORD, parameter.VAR_POSITIONAL)
                if name not in bound and parameter.default is parameter.empty and not variadic:
                    raise ValueError(f"tui launcher missing required parameter: {name}")
            app = ChatApp(
                _adapt(agent, inputs[0], history_name, bound),
                hooks=tuple(custom_event_hook or ()),
                history=list(history or []),
                title=title,
            )
            app.run()

        return launcher

    return decorate
