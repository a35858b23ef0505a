"""What a :class:`~simplellmfunc.serving.SessionStore` hands its agent: one turn as an
:class:`AgentTurn`, to a :class:`SessionAgent` (``ServedAgent``'s engine-run adapter, or a
function as a :class:`CallableAgent`), whose items are an async iterable, an engine ``Run`` or a
:class:`DrivenTurn`; and reading those items (:func:`chat_pair`, the history they carry).
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterable, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .._abort import AbortSignal
from .._events import ResponseYield

__all__ = ["AgentTurn", "CallableAgent", "DrivenTurn", "SessionAgent", "chat_pair", "history_of"]


@dataclass(frozen=True, slots=True)
class AgentTurn:
    """What the store hands its agent for one turn of a session.

    Attributes:
        message: The user's message; ``None``: continue ``history`` as it is.
        history: The session's history before the turn (a copy).
        abort: The turn's abort signal (``Session.abort`` sets it).
        session_id: The session.
        toolkit: The session's own tools (its kernel's), besides the agent's.
        hooks: Run hooks of this turn (the session's SelfReference key, the caller's own).
    """

    message: str | None
    history: list[dict[str, Any]]
    abort: AbortSignal
    session_id: str
    toolkit: tuple[Any, ...] = ()
    hooks: tuple[Any, ...] = ()

    def call_options(self) -> dict[str, Any]:
        """The turn as the per-call options of an ``@llm_chat`` call (the one place their
        underscore names are spelled)."""
        options: dict[str, Any] = {"_abort_signal": self.abort, "_session_id": self.session_id}
        if self.toolkit:
            options["_toolkit"] = list(self.toolkit)
        if self.hooks:
            options["_hooks"] = list(self.hooks)
        return options


@runtime_checkable
class DrivenTurn(Protocol):
    """A turn the store drives in its turn's task: ``drive(send)`` runs it, awaiting ``send``
    with each of its events, and returns its ``ResponseYield`` (a config agent's chain or
    team turn: their engine runs' events go straight to the turn's stream, one pump)."""

    async def drive(self, send: Callable[[Any], Awaitable[Any]]) -> ResponseYield:
        """Run the turn, sending its events to ``send``; its answer and history."""
        ...


@runtime_checkable
class SessionAgent(Protocol):
    """An agent that takes a store's turns as :class:`AgentTurn` s (``ServedAgent``'s).

    ``turn`` returns the turn's items as an async iterable (events, then a ``ResponseYield``
    with the history), which the store iterates in its turn's task. An engine
    :class:`~simplellmfunc.engine.Run` (``await chat_agent.run(...)``) is iterable too; the
    store drives it right in that task, its emitter connected to the turn's stream (its events,
    then a ``ResponseYield`` of its result): one pump per turn, not a run's own inside the
    store's. A :class:`DrivenTurn` (several runs: a chain's stages, a team's members) is
    driven there too.
    """

    async def turn(self, turn: AgentTurn) -> AsyncIterable[Any] | DrivenTurn:
        """The items of ``turn``, in order (a :class:`~simplellmfunc.engine.Run`, a
        :class:`DrivenTurn`, or any async iterable)."""
        ...


class CallableAgent:
    """A function as a :class:`SessionAgent`: an ``@llm_chat`` function (``enable_event=True``
    for events and a final ``ResponseYield``) or any async generator function taking the
    message and ``history=`` (or ``chat_history=``) like one, called with the turn's history
    and :meth:`AgentTurn.call_options`; its items are the turn's, as it yields them.

    Args:
        function: The function.
    """

    def __init__(self, function: Callable[..., Any]) -> None:
        self.function = function
        self._history = _history_parameter(function)

    async def turn(self, turn: AgentTurn) -> AsyncIterable[Any]:
        options = {self._history: turn.history, **turn.call_options()}
        items: AsyncIterable[Any] = self.function(turn.message, **options)
        return items

    def __repr__(self) -> str:
        return f"CallableAgent({self.function!r})"


def _history_parameter(agent: object) -> str:
    if not callable(agent) or isinstance(agent, SessionAgent):
        return "history"
    try:
        parameters = inspect.signature(agent).parameters
    except (TypeError, ValueError):
        return "history"
    return "chat_history" if "chat_history" in parameters else "history"


def chat_pair(item: Any) -> tuple[Any, list[dict[str, Any]]] | None:
    """``item`` as what an ``@llm_chat`` function without events yields, a pair of its text
    (a streamed delta, or the whole reply; a raw item) and the history; else ``None``."""
    if type(item) is tuple and len(item) == 2 and isinstance(item[1], list):
        return item
    return None


def history_of(item: Any, previous: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """The history an item of the agent carries (the last one is the turn's)."""
    if isinstance(item, ResponseYield):
        return list(item.messages)
    pair = chat_pair(item)
    return pair[1] if pair is not None else previous
