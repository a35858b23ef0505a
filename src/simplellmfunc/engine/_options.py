"""Engine options: how a run behaves, as one frozen value both decorators accept.

``@llm_function`` and ``@llm_chat`` take ``options=EngineOptions(...)``; for convenience the
same names may also be given as keyword arguments of the decorator (``tool_timeout=5``), and
:func:`split_options` lifts them out of the keyword arguments, so they are never sent to the
provider. What remains must be a body parameter of the provider request (``temperature`` …):
a value that cannot be sent as JSON is refused when the function is decorated.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal

from ..exceptions import DecoratorError
from ._approval import ApprovalPolicy, Approver
from ._termination import TerminationPolicy
from ._window import HistoryWindow

__all__ = ["EngineOptions", "IncompleteAnswerPolicy", "ToolProtocol", "split_options"]

ToolProtocol = Literal["auto", "native", "text", "json"]
IncompleteAnswerPolicy = Literal["raise", "flag"]


@dataclass(frozen=True, slots=True)
class EngineOptions:
    """How the engine runs one decorated function's calls.

    Attributes:
        max_tool_calls: Cap on iterations with tool calls (``None``: no cap); at the cap one
            call without tools extracts the answer.
        tool_timeout: Default per-tool timeout in seconds (a tool's own timeout wins).
        max_tool_concurrency: Cap on concurrently running tools of one batch (``None``: all).
        tool_result_budget: Max tokens of one tool result shown to the model.
        tool_protocol: ``"native"`` function calling, ``"text"`` (tools described in the prompt,
            calls parsed from the reply), ``"json"`` (every step forced by a JSON schema to be
            one call or the answer: for small local models on servers with schema-constrained
            decoding) or ``"auto"``: native when the provider has native tools, else json when
            it has ``json_schema``, else text.
        keyword_heuristic: With the text protocol, also read "use the X tool" prose as a call
            (off by default: it guesses).
        termination: Implicit termination signals and when they apply.
        history_window: Send only the system prompt and recent turns within a token budget
            (``None``: the whole transcript).
        loop_window: How many tool batches in a row that repeat one batch (or alternate two)
            count as a loop: the model is warned, and the run ends with
            ``terminated_by="loop"`` if the next batch repeats again (``0``: off).
        request_timeout: Seconds one LLM request may take (``None``: the provider's own
            setting). The decorators also take it as ``timeout=`` (SimpleLLMFunc's name); it
            is never sent in the request body.
        observation_enabled: Show the model its tools' results (seed 001 §3.2). ``False``: the
            model is told each tool ran but not what it returned; the history keeps the results.
        answer_retries: How many times an empty or truncated (``max_tokens``) final answer is
            asked for again, with a note saying what was wrong.
        incomplete_answer: What an answer still empty or truncated after the retries becomes:
            ``"raise"`` an :class:`~simplellmfunc.exceptions.IncompleteAnswerError` (it carries
            the text and the valid history), or ``"flag"`` it: the run ends with
            ``terminated_by="empty"`` / ``"truncated"`` and that text.
        approval: Which calls wait for a person's approval: a callable ``(tool, arguments)``
            returning falsy (run it) or ``True`` / a reason (ask first); tools marked
            ``requires_approval`` ask whatever it says. See ``docs/human-in-the-loop.md``.
        approval_timeout: Seconds a call waits for its answer (``None``: no limit); then it
            is not run and the model reads that nobody answered.
        approver: Answers approval requests in the run (a callable taking the
            ``ApprovalRequestEvent``, returning an ``ApprovalDecision``, sync or async).
            Without one, answers come by call id (``Run.answer``, ``SessionStore.answer``),
            which needs someone reading the events: a call with no event consumer and no
            approver is denied.
    """

    max_tool_calls: int | None = None
    tool_timeout: float | None = None
    max_tool_concurrency: int | None = None
    tool_result_budget: int = 8000
    tool_protocol: ToolProtocol = "auto"
    keyword_heuristic: bool = False
    termination: TerminationPolicy = field(default_factory=TerminationPolicy)
    history_window: HistoryWindow | None = None
    loop_window: int = 3
    request_timeout: float | None = None
    observation_enabled: bool = True
    answer_retries: int = 1
    incomplete_answer: IncompleteAnswerPolicy = "raise"
    approval: ApprovalPolicy | None = field(default=None, compare=False)
    approval_timeout: float | None = 300.0
    approver: Approver | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.tool_protocol not in ("auto", "native", "text", "json"):
            raise DecoratorError(
                "tool_protocol must be 'auto', 'native', 'text' or 'json', "
                f"got {self.tool_protocol!r}"
            )
        if self.incomplete_answer not in ("raise", "flag"):
            raise DecoratorError(
                f"incomplete_answer must be 'raise' or 'flag', got {self.incomplete_answer!r}"
            )
        for name in (
            "max_tool_calls",
            "max_tool_concurrency",
            "tool_result_budget",
            "loop_window",
            "answer_retries",
        ):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 0):
                raise DecoratorError(f"{name} must be a non-negative int, got {value!r}")
        if self.approval is not None and not callable(self.approval):
            raise DecoratorError(f"approval must be a callable policy, got {self.approval!r}")
        if self.approver is not None and not callable(self.approver):
            raise DecoratorError(f"approver must be a callable, got {self.approver!r}")
        _positive("approval_timeout", self.approval_timeout)
        timeout = self.request_timeout
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0
        ):
            raise DecoratorError(f"request_timeout must be a positive number, got {timeout!r}")

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> EngineOptions:
        """Build options from a mapping (a config file section, keyword arguments).

        Raises:
            DecoratorError: For a name that is not an engine option, or a bad value.
        """
        unknown = sorted(set(values) - OPTION_NAMES)
        if unknown:
            raise DecoratorError(
                f"unknown engine option(s) {', '.join(map(repr, unknown))}; "
                f"known: {', '.join(sorted(OPTION_NAMES))}"
            )
        return cls(**dict(values))


def _positive(name: str, value: object) -> None:
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, int | float) or value <= 0
    ):
        raise DecoratorError(f"{name} must be a positive number, got {value!r}")


OPTION_NAMES = frozenset(f.name for f in fields(EngineOptions))
# Body fields the framework writes itself: a decorator keyword argument cannot set them.
_RESERVED = {
    "stream": "streaming is chosen by the call: @llm_chat(stream=True); a typed call never streams",
    "messages": "the messages come from the docstring, the history and the arguments",
    "tools": "tools go in toolkit=",
    "response_format": "the output format comes from the return annotation",
}


def split_options(
    options: EngineOptions | None, llm_kwargs: Mapping[str, Any], **explicit: Any
) -> tuple[EngineOptions, dict[str, Any]]:
    """Separate engine options from provider body parameters, the same way for every decorator.

    Args:
        options: The ``options=`` argument of the decorator (``None``: defaults).
        llm_kwargs: The decorator's extra keyword arguments.
        **explicit: Engine options the decorator takes as named parameters (``max_tool_calls``,
            ``tool_protocol`` …); ``None`` values are left out.

    Returns:
        The options (``options`` with the named ones applied) and the provider body parameters.

    Raises:
        DecoratorError: For an option given twice, a bad option value, a body field the
            framework writes itself (``stream``, ``messages``, ``tools``, ``response_format``),
            or a body parameter that cannot be sent as JSON (an object meant for the engine, a
            typo'd option name holding one).
    """
    llm_kwargs = _timeout_alias(llm_kwargs)
    lifted = {k: v for k, v in llm_kwargs.items() if k in OPTION_NAMES}
    lifted.update((k, v) for k, v in explicit.items() if v is not None)
    body = {k: v for k, v in llm_kwargs.items() if k not in OPTION_NAMES}
    base = options or EngineOptions()
    if options is not None:
        twice = sorted(k for k in lifted if getattr(options, k) != getattr(EngineOptions(), k))
        if twice:
            raise DecoratorError(
                f"engine option(s) {', '.join(map(repr, twice))} given both in options= and as "
                "keyword arguments"
            )
    for name, value in body.items():
        if name in _RESERVED:
            raise DecoratorError(f"{name}= cannot be a body parameter: {_RESERVED[name]}")
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            raise DecoratorError(
                f"{name}={value!r} is neither an engine option nor a JSON value to send to the "
                f"provider; engine options are: {', '.join(sorted(OPTION_NAMES))}"
            ) from None
    return (replace(base, **lifted) if lifted else base), body


def _timeout_alias(llm_kwargs: Mapping[str, Any]) -> Mapping[str, Any]:
    """``timeout=`` (SimpleLLMFunc's request timeout) as ``request_timeout``, never a body field.

    Raises:
        DecoratorError: When both are given.
    """
    if "timeout" not in llm_kwargs:
        return llm_kwargs
    if "request_timeout" in llm_kwargs:
        raise DecoratorError("give the request timeout once: timeout= or request_timeout=")
    rest = {k: v for k, v in llm_kwargs.items() if k != "timeout"}
    return {**rest, "request_timeout": llm_kwargs["timeout"]}
