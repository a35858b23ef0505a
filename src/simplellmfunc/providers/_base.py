"""The provider contract: provider-neutral requests, responses and stream events."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from .._messages import AssistantMessage, Message
from .._resource import AsyncResource
from .._usage import Usage

__all__ = [
    "Capabilities",
    "FinishEvent",
    "LLMInterface",
    "LLMRequest",
    "LLMResponse",
    "ReasoningDelta",
    "ResponseFormat",
    "StreamEvent",
    "TextDelta",
    "ToolCallDelta",
    "ToolSpec",
    "UsageEvent",
]


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a provider (and the server behind it) supports.

    The engine reads these instead of special-casing providers.
    """

    native_tools: bool = True
    parallel_tool_calls: bool = True
    json_schema: bool = True
    streaming: bool = True
    streaming_with_tools: bool = True
    vision: bool = True
    stream_usage: bool = True
    null_assistant_content: bool = True
    stateful_session: bool = False


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as the model sees it: name, description and JSON schema of the arguments."""

    name: str
    description: str
    parameters: Mapping[str, Any]

    def to_openai(self) -> dict[str, Any]:
        """Return the chat-completions ``tools`` entry."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }


@dataclass(frozen=True, slots=True)
class ResponseFormat:
    """Structured-output contract: a JSON schema the reply must satisfy."""

    name: str
    schema: Mapping[str, Any]
    strict: bool = False


@dataclass(frozen=True, slots=True)
class LLMRequest:
    """One model call, provider-neutral.

    Attributes:
        messages: The full transcript to send (system message first, if any).
        tools: Tools the model may call.
        tool_choice: ``"auto"``, ``"none"``, ``"required"`` or a provider-specific dict.
        response_format: Ask for JSON matching a schema (providers without the capability ignore
            it; the engine then puts the contract in the prompt).
        params: Extra body parameters (``temperature``, ``max_tokens``, anything the server takes).
        timeout: Overall deadline for the call in seconds (``None`` = the interface default).
    """

    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: str | Mapping[str, Any] | None = None
    response_format: ResponseFormat | None = None
    params: Mapping[str, Any] = field(default_factory=dict, hash=False)
    timeout: float | None = None


@dataclass(frozen=True, slots=True)
class LLMResponse:
    """A complete model reply.

    Attributes:
        message: The assistant message (text, tool calls, reasoning).
        finish_reason: ``"stop"``, ``"tool_calls"``, ``"length"``, ... as reported.
        usage: Token usage (``usage.estimated`` when counted locally).
        model: The model that answered, as reported.
        request_id: The provider's request id, if any.
        provider: Short name of the interface that answered.
        raw: The provider's raw JSON (non-streaming) or ``None``.
    """

    message: AssistantMessage
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    request_id: str | None = None
    provider: str = ""
    raw: Mapping[str, Any] | None = None

    @property
    def text(self) -> str:
        """The reply text (empty when the model only called tools)."""
        return self.message.content or ""


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of reply text."""

    text: str
    kind: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """A piece of reasoning text (for models that stream it separately)."""

    text: str
    kind: Literal["reasoning"] = "reasoning"


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A piece of a tool call. ``index`` is the normalised position of the call in the reply."""

    index: int
    id: str | None
    name: str | None
    arguments: str
    kind: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True, slots=True)
class UsageEvent:
    """Usage reported by the stream."""

    usage: Usage
    kind: Literal["usage"] = "usage"


@dataclass(frozen=True, slots=True)
class FinishEvent:
    """The last event of every successful stream: the assembled response."""

    response: LLMResponse
    kind: Literal["finish"] = "finish"


StreamEvent: TypeAlias = TextDelta | ReasoningDelta | ToolCallDelta | UsageEvent | FinishEvent


class LLMInterface(AsyncResource):
    """A model behind some API. Subclasses implement :meth:`complete` and :meth:`stream`.

    Interfaces own their connections: use ``async with`` or call :meth:`aclose`. Leaving the
    ``async with`` block closes the interface; an error of :meth:`aclose` propagates from the
    block, unless the block itself raised: then the block's exception is the one that
    propagates, with the close failure logged and added to it as a note.
    """

    model_name: str = ""
    capabilities: Capabilities = Capabilities()
    context_window: int | None = None
    provider_name: str = "llm"

    @abstractmethod
    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Run the request and return the whole reply.

        Raises:
            ProviderError: When the call fails after retries.
        """

    @abstractmethod
    def stream(self, request: LLMRequest) -> AsyncGenerator[StreamEvent, None]:
        """Run the request streaming; the last event is a :class:`FinishEvent`.

        Raises:
            ProviderError: When the call fails; never retried once an event was yielded.
        """

    async def count_tokens(self, messages: Sequence[Message]) -> int:
        """Count the prompt tokens of ``messages`` (tiktoken, or an estimate)."""
        import anyio.to_thread

        from ._tokens import count_message_tokens

        # The first use loads the encoding (hundreds of ms): keep it off the event loop.
        return await anyio.to_thread.run_sync(count_message_tokens, messages, self.model_name)

    async def aclose(self) -> None:
        """Release connections (idempotent)."""
