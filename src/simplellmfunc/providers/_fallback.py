"""FallbackLLM: try the next interface when one is unavailable."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from dataclasses import fields, replace

from .._messages import Message
from ..exceptions import (
    AuthenticationError,
    NoUsableKeyError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
    UserError,
)
from ._base import Capabilities, FinishEvent, LLMInterface, LLMRequest, LLMResponse, StreamEvent

__all__ = ["FallbackLLM", "is_fallback_error"]

_AVAILABILITY = (ProviderConnectionError, ProviderTimeoutError, RateLimitError, NoUsableKeyError)


def is_fallback_error(error: ProviderError) -> bool:
    """Whether another interface may succeed where this one failed (after its own retries).

    Yes for availability trouble (connection failures, timeouts, rate limits, no usable key,
    5xx, anything marked ``retryable``); no for rejected credentials (401 / 403) and requests
    the server refused (400, 404, 422 ...): those would fail the same way elsewhere or need a
    fix.
    """
    if isinstance(error, AuthenticationError):
        return False
    if isinstance(error, _AVAILABILITY) or error.retryable:
        return True
    return error.status is not None and error.status >= 500


def _intersection(members: Sequence[LLMInterface]) -> Capabilities:
    """The most conservative capabilities: a feature only when every member has it."""
    values = {
        f.name: all(getattr(m.capabilities, f.name) for m in members) for f in fields(Capabilities)
    }
    return Capabilities(**values)


class FallbackLLM(LLMInterface):
    """An interface over several: each call goes to the first, then to the next when one fails
    with an availability error (see :func:`is_fallback_error`) after its own retries.

    A stream falls back only before its first event; once an event was yielded, errors
    propagate (the caller has already seen part of a reply). Which member answered is in the
    response's ``provider`` (its ``provider_name``, which the engine's ``LLMCallEndEvent``
    reports) and in :attr:`last_used`. Every call starts again with the first member.

    Closing a ``FallbackLLM`` closes its members.

    Args:
        members: The interfaces, in order of preference.

    Raises:
        UserError: When ``members`` is empty.
    """

    def __init__(self, members: Sequence[LLMInterface]) -> None:
        if not members:
            raise UserError("FallbackLLM needs at least one interface")
        self.members = tuple(members)
        primary = self.members[0]
        self.model_name = primary.model_name
        self.provider_name = "fallback"
        self.capabilities = _intersection(self.members)
        windows = [m.context_window for m in self.members if m.context_window is not None]
        self.context_window = min(windows) if windows else None
        self.last_used: LLMInterface | None = None

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Ask each member in turn until one answers.

        Raises:
            ProviderError: The first error that is not an availability error, or the last
                member's error (earlier failures are attached as notes).
        """
        failures: list[str] = []
        for index, member in enumerate(self.members):
            try:
                response = await member.complete(request)
            except ProviderError as error:
                self._give_up_unless_next(error, index, member, failures)
                continue
            self.last_used = member
            return replace(response, provider=member.provider_name)
        raise AssertionError("unreachable: the last member's error propagates")

    async def stream(self, request: LLMRequest) -> AsyncGenerator[StreamEvent, None]:
        """Stream from the first member that starts answering.

        Raises:
            ProviderError: As :meth:`complete`, or any error after the first event.
        """
        failures: list[str] = []
        for index, member in enumerate(self.members):
            started = False
            try:
                async with aclosing(member.stream(request)) as events:
                    async for event in events:
                        if not started:
                            started = True
                            self.last_used = member
                        if isinstance(event, FinishEvent):
                            response = replace(event.response, provider=member.provider_name)
                            event = FinishEvent(response)
                        yield event
                return
            except ProviderError as error:
                if started:
                    raise
                self._give_up_unless_next(error, index, member, failures)

    def _give_up_unless_next(
        self, error: ProviderError, index: int, member: LLMInterface, failures: list[str]
    ) -> None:
        """Re-raise ``error`` unless another member should be tried.

        Raises:
            ProviderError: ``error``, with the earlier failures as notes.
        """
        label = f"{member.provider_name} ({member.model_name or '?'})"
        if index == len(self.members) - 1 or not is_fallback_error(error):
            for note in failures:
                error.add_note(note)
            raise error
        failures.append(f"fallback: {label} failed first: {type(error).__name__}: {error}")

    async def count_tokens(self, messages: Sequence[Message]) -> int:
        """Count with the first member (members may count differently)."""
        return await self.members[0].count_tokens(messages)

    async def aclose(self) -> None:
        """Close every member, even when closing one fails (the first failure is re-raised)."""
        failures: list[Exception] = []
        for member in self.members:
            try:
                await member.aclose()
            except Exception as exc:  # boundary: the other members must still be closed
                failures.append(exc)
        if failures:
            raise failures[0]

    def __repr__(self) -> str:
        inner = ", ".join(repr(m) for m in self.members)
        return f"FallbackLLM([{inner}])"
