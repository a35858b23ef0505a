"""Tool-call protocols as strategy objects: one class per way a model calls tools.

The loop never asks *which* protocol a run uses; it asks the run's protocol object (resolved
once, :attr:`Invocation.protocol`) to do the protocol's part of each step:

* **render**: the system-prompt section that describes the tools (:meth:`catalogue`), the
  transcript as the provider is sent it (:meth:`to_wire`), the request's native tools and
  ``response_format`` (:meth:`request_tools`, :meth:`response_format`);
* **parse**: what a reply asks for (:meth:`plan`, the engine's one entry, hands the reply and
  where the run stands to the protocol's :meth:`read` as a :class:`ReplyContext` and gets a
  :class:`ReplyPlan`) and what the history keeps of it (:meth:`stored`);
* **stream**: what a reader sees of a reply while it arrives (:meth:`stream_view`) and once it is
  read (:meth:`visible`, :meth:`rest_of_answer`);
* **repeat handling**: whether a batch that repeats the previous one is answered, not run
  (:attr:`answers_repeats`).

Three subclasses: :class:`NativeProtocol` (here: the provider's function calling),
``TextProtocol`` (``._text_protocol``: tools in the prompt, calls parsed from prose) and
``JSONProtocol`` (``._json_protocol``: each step forced by a JSON schema). The shape follows
pydantic-ai's output schemas, one subclass per output mode.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from .._events import TerminatedBy
from .._messages import AssistantMessage, Message, ToolCall
from .._mutations import ContextMutation
from ..providers import ResponseFormat, ToolSpec
from ._options import EngineOptions

__all__ = [
    "NativeProtocol",
    "ReplyContext",
    "ReplyPlan",
    "StepInfo",
    "StreamView",
    "ToolCallProtocol",
    "final_answer_after",
    "implicit_stop",
    "scan_json",
    "tidy",
]


@dataclass(frozen=True, slots=True)
class ReplyPlan:
    """What a reply means for the run.

    Attributes:
        calls: The tool calls to run.
        answer: The answer, when there are no calls (or the one to give once they ran, see
            ``stop_after``).
        terminated_by: Why the run stops with ``answer``.
        feedback: A message sent back instead (a malformed call): the run goes on.
        stop_after: The reply called tools *and* announced its final answer ("Final answer:
            …"): the tools run, then the run ends with ``answer`` (seed 001 §3.3, phase 7).
        truncated: The answer was read from a reply that was cut off (a repaired JSON step),
            whatever the provider's finish reason says.
    """

    calls: tuple[ToolCall, ...] = ()
    answer: str = ""
    terminated_by: TerminatedBy = "answer"
    feedback: ContextMutation | None = None
    stop_after: bool = False
    truncated: bool = False


@dataclass(frozen=True, slots=True)
class ReplyContext:
    """A reply to read, and where the run stands (what :meth:`ToolCallProtocol.read` gets).

    Attributes:
        message: The reply.
        tools: The names of the tools the model may call.
        options: The run's engine options.
        iteration: The run's iteration (call ids are numbered by it).
        final: Why this was a forced final-answer call (``None``: an ordinary step).
    """

    message: AssistantMessage
    tools: Sequence[str]
    options: EngineOptions
    iteration: int
    final: TerminatedBy | None

    @property
    def text(self) -> str:
        """The reply's text (``""`` when it has none)."""
        return self.message.content or ""


@dataclass(frozen=True, slots=True)
class StepInfo:
    """Where the run stands: ``step`` of ``steps`` (``None``: no cap) tool rounds."""

    step: int
    steps: int | None = None

    def render(self) -> str:
        """The seed's ``[Step k/N, remaining: r]`` line (with a warning when few are left)."""
        if self.steps is None:
            return f"[Step {self.step}]"
        remaining = max(0, self.steps - self.step)
        line = f"[Step {self.step}/{self.steps}, remaining: {remaining}]"
        if remaining <= 3:
            line += "\nRunning low on steps: wrap up or give your final answer."
        return line


class StreamView:
    """What a reader is shown of one reply while it streams (one per LLM call)."""

    def feed(self, delta: str) -> str:
        """The part of ``delta`` to show (the whole delta here)."""
        return delta


class ToolCallProtocol(ABC):
    """One way of calling tools: rendering, parsing, streaming and repeat handling.

    Attributes:
        name: The ``tool_protocol`` value this class implements.
        answers_repeats: A batch repeating the previous one is answered "already done" instead
            of run, and the next step must be the answer (small models repeat calls).
        implicit_signals: Whether implicit termination phrases apply by default
            (``TerminationPolicy.implicit=None``).
    """

    name: ClassVar[Literal["native", "text", "json"]]
    answers_repeats: ClassVar[bool] = False
    implicit_signals: ClassVar[bool] = False

    def catalogue(self, tools: Sequence[ToolSpec], step: StepInfo | None) -> str:
        """The system-prompt section describing ``tools`` (``""``: none)."""
        return ""

    def to_wire(self, messages: Sequence[Message]) -> Sequence[Message]:
        """The transcript as the provider is sent it."""
        return messages

    def request_tools(self, tools: Sequence[ToolSpec], *, final: bool) -> tuple[ToolSpec, ...]:
        """The request's native tools (none when the answer is due)."""
        return ()

    def response_format(
        self, base: ResponseFormat | None, tools: Sequence[ToolSpec], *, final: bool
    ) -> ResponseFormat | None:
        """The request's ``response_format`` (``base``: the answer's own, if any)."""
        return base

    def plan(
        self,
        message: AssistantMessage,
        *,
        tools: Sequence[str],
        options: EngineOptions,
        iteration: int,
        final: TerminatedBy | None,
    ) -> ReplyPlan:
        """What ``message`` asks for (``final``: why this was a forced final-answer call); the
        protocol's :meth:`read` decides."""
        return self.read(ReplyContext(message, tools, options, iteration, final))

    @abstractmethod
    def read(self, reply: ReplyContext) -> ReplyPlan:
        """What ``reply`` asks for: calls to run, the answer, or feedback."""

    def stored(self, message: AssistantMessage, plan: ReplyPlan) -> AssistantMessage:
        """What the history keeps of the reply (the reply itself here)."""
        return message

    def stream_view(self) -> StreamView | None:
        """A filter of this call's text deltas (``None``: they are shown as they come)."""
        return None

    def visible(self, text: str) -> str:
        """What a reader is shown of a whole reply ``text`` (its prose, never the protocol)."""
        return text

    def rest_of_answer(self, answer: str, shown: str) -> str:
        """What of ``answer`` is still to be shown once ``shown`` streamed (``""``: nothing)."""
        return ""

    def repeat_result(self, name: str) -> str:
        """What a repeated call is answered with when :attr:`answers_repeats` (not run again)."""
        return (
            f"Not run again: you already called {name} with these arguments and its result is "
            "above. Give your final answer now."
        )


def implicit_stop(options: EngineOptions, text: str, default: bool) -> bool:
    """Whether ``text`` carries a termination phrase that applies (``default``: the
    protocol's own answer when the policy leaves it open)."""
    return options.termination.implicit_stop(text, text_protocol=default)


def final_answer_after(text: str, signals: Sequence[str]) -> str:
    """The answer announced in ``text``: what follows the last termination phrase, else the
    whole text (the caller removes the calls first)."""
    lowered = text.lower()
    best = -1
    end = 0
    for signal in signals:
        at = lowered.rfind(signal.lower())
        if at > best:
            best, end = at, at + len(signal)
    tail = text[end:].strip() if best >= 0 else ""
    return tail or text.strip()


@dataclass(frozen=True, slots=True)
class JSONScan:
    """Where a JSON value starting at ``begin`` ends (``end``: the index after its closing
    bracket, ``-1`` if it does not close), and what is still open if it does not: the
    closing brackets due, innermost last, and whether it stops inside a string (after a
    backslash: ``escaped``)."""

    end: int
    closers: tuple[str, ...] = ()
    in_string: bool = False
    escaped: bool = False


def scan_json(text: str, begin: int) -> JSONScan:
    """Scan the bracketed JSON value at ``text[begin]``, skipping brackets inside strings."""
    closers: list[str] = []
    in_string = escaped = False
    for index in range(begin, len(text)):
        char = text[index]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            closers.append("}" if char == "{" else "]")
        elif char in "}]" and closers:
            closers.pop()
            if not closers:
                return JSONScan(index + 1)
    return JSONScan(-1, tuple(closers), in_string, escaped)


_SPACES = re.compile(r"\n{3,}")


def tidy(text: str) -> str:
    """``text`` with the blank lines left by a removed block squeezed."""
    return _SPACES.sub("\n\n", text).strip()


class NativeProtocol(ToolCallProtocol):
    """The provider's own function calling: tools go in the request, calls come back typed."""

    name = "native"

    def request_tools(self, tools: Sequence[ToolSpec], *, final: bool) -> tuple[ToolSpec, ...]:
        return () if final else tuple(tools)

    def read(self, reply: ReplyContext) -> ReplyPlan:
        text, calls, options = reply.text, reply.message.tool_calls, reply.options
        if reply.final is not None:
            return ReplyPlan(answer=text, terminated_by=reply.final)
        if not calls:
            return ReplyPlan(answer=text)
        if implicit_stop(options, text, self.implicit_signals):
            answer = final_answer_after(text, options.termination.signals)
            return ReplyPlan(calls, answer, "implicit", stop_after=True)
        return ReplyPlan(calls=calls)
