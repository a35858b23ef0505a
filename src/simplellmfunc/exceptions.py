"""The one exception tree of simplellmfunc.

Every error the library raises derives from :class:`SimpleLLMFuncError`::

    SimpleLLMFuncError
    ├── UserError                  the caller did something wrong; fix the code or the config
    │   ├── ArgumentValueError     a bad argument value (also a ``ValueError``, as in SimpleLLMFunc)
    │   ├── UnboundKeyError        a SelfReference memory key with no history bound (a ``KeyError``)
    │   ├── UnboundAgentError      a SelfReference fork with no agent bound (a ``RuntimeError``)
    │   ├── UnknownPackError       a PyRepl primitive pack name that is not known (a ``KeyError``)
    │   ├── ConfigError            bad provider.json / .env / agent config
    │   ├── ContentError           invalid Text / ImgUrl / ImgPath
    │   ├── InvalidHistoryError    a history that no provider would accept (has ``index``)
    │   ├── ToolDefinitionError    a tool that cannot be exposed to a model
    │   ├── SkillError             a skill folder (SKILL.md) or skill definition that is invalid
    │   ├── DecoratorError         @llm_function / @llm_chat used on the wrong thing
    │   ├── UnsupportedError       a SimpleLLMFunc name with no counterpart (names the replacement)
    │   ├── SharedMemoryTypeError  a change of type of a key of an append-only SharedMemory
    │   ├── InputRefusedError      an answer to input() came too late, twice, or for no request
    │   ├── CassetteError          a cassette that cannot be read, or a request it cannot answer
    │   │   └── CassetteMismatchError  a replayed request drifted from the recording (``diff``)
    │   ├── SessionError           an unknown, busy or closed session, or too many sessions
    │   └── RequestRefusedError    an HTTP request refused at a server's edge (has ``status``)
    ├── RunError                   a run failed for a reason outside the caller's code
    │   ├── ProviderError          the model API failed (status, request id, attempts, retryable)
    │   │   ├── ProviderConnectionError   network failure before a response arrived
    │   │   ├── ProviderTimeoutError      the per-call deadline passed
    │   │   ├── RateLimitError            HTTP 429 after retries
    │   │   ├── AuthenticationError       HTTP 401 / 403
    │   │   ├── NoUsableKeyError          every key of an APIKeyPool is disabled
    │   │   └── StreamError               a broken or malformed stream, or an error sent after 200
    │   │       └── EmptyReplyError       a 200 reply with no text, no tool calls, no reasoning
    │   ├── OutputParseError       the model's reply did not match the return type (has ``raw``)
    │   ├── IncompleteAnswerError  the final answer stayed empty or cut off (``max_tokens``)
    │   │                          after the retries (has ``reason``, ``text``, ``messages``)
    │   ├── LocalModelError        the local model is missing or did not start (``simplellmfunc
    │   │   │                      local``; also a ``RuntimeError``)
    │   │   ├── LocalBuildError        building ``llama-server`` failed (the message quotes its log)
    │   │   └── LocalServerExitedError the server died at start-up (its log's tail, a hint)
    │   ├── ToolExecutionError     a tool failed where no model can see it (direct calls)
    │   ├── KernelError            a PyRepl kernel failed
    │   │   └── KernelDiedError
    │   ├── BridgeError            a kernel → host call failed (kernel code sees it as
    │   │                          ``runtime.BridgeError``; never raised on the host)
    │   ├── WorkspaceError         a path outside a FileToolset workspace, or a stale write
    │   ├── MCPError               an MCP server failed
    │   ├── A2AError               a remote A2A agent failed or answered with an error (has ``url``)
    │   │   └── A2AConnectionError     the remote A2A agent could not be reached
    │   ├── CapacityError          a served agent refused a turn: too many sessions or turns
    │   ├── TeamMemberError        an agent of a team failed (has ``agent``, the ``history`` so
    │   │                          far and the ``usage`` of every call made)
    │   ├── ChannelError           a multi-agent channel failed
    │   │   ├── ChannelClosedError     sent to or received from a closed (and drained) channel
    │   │   └── ChannelTimeoutError    no message (or no room) within the timeout
    │   ├── SandboxViolation       sandboxed code was refused (a path outside, no network, no
    │   │   │                      isolation where ``require_isolation=True``)
    │   │   └── ResourceLimitExceeded   a sandbox limit was hit (has ``limit``)
    │   │       ├── TimeoutViolation        the wall-clock or CPU-time limit
    │   │       ├── MemoryViolation         the memory limit
    │   │       └── OutputViolation         the result was larger than ``max_output_bytes``
    │   ├── AbortedError           the run was aborted through an AbortSignal
    │   └── DurableError           a durable run failed to start, resume or report
    │       └── StepInterruptedError   a non-idempotent tool call cut by a crash: not re-run
    └── ToolSignal                 raised by tools to talk to the loop, never an error
        └── ToolRetry              "tell the model this message and let it try again"

Catch ``UserError`` to report misuse, ``RunError`` to handle failed runs and ``ProviderError``
(``retryable`` tells whether trying later can help) for API trouble.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._usage import Usage

__all__ = [
    "A2AConnectionError",
    "A2AError",
    "AbortedError",
    "AnswerRefusedError",
    "ArgumentValueError",
    "AuthenticationError",
    "BridgeError",
    "CapacityError",
    "CassetteError",
    "CassetteMismatchError",
    "ChannelClosedError",
    "ChannelError",
    "ChannelTimeoutError",
    "ConfigError",
    "ContentError",
    "DecoratorError",
    "DurableError",
    "EmptyReplyError",
    "IncompleteAnswerError",
    "InputRefusedError",
    "InvalidHistoryError",
    "KernelDiedError",
    "KernelError",
    "LocalBuildError",
    "LocalModelError",
    "LocalServerExitedError",
    "MCPError",
    "MemoryViolation",
    "NoUsableKeyError",
    "OutputParseError",
    "OutputViolation",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderTimeoutError",
    "RateLimitError",
    "RequestRefusedError",
    "ResourceLimitExceeded",
    "RunError",
    "SandboxViolation",
    "SessionError",
    "SharedMemoryTypeError",
    "SimpleLLMFuncError",
    "SkillError",
    "StepInterruptedError",
    "StreamError",
    "TeamMemberError",
    "TimeoutViolation",
    "ToolDefinitionError",
    "ToolExecutionError",
    "ToolRetry",
    "ToolSignal",
    "UnboundAgentError",
    "UnboundKeyError",
    "UnknownPackError",
    "UnsupportedError",
    "UserError",
    "WorkspaceError",
]


class SimpleLLMFuncError(Exception):
    """Base of every exception raised by simplellmfunc."""


class UserError(SimpleLLMFuncError):
    """The caller used the library incorrectly (code or configuration)."""


class ArgumentValueError(UserError, ValueError):
    """An argument has a bad value (a non-positive timeout, a working directory that is not a
    directory); both a ``UserError`` and, as SimpleLLMFunc raises it, a ``ValueError``."""


class UnboundAgentError(UserError, RuntimeError):
    """``self_reference.instance.fork(...)`` with no agent bound (as SimpleLLMFunc, a
    ``RuntimeError``): bind one with ``self_reference.bind_agent_instance(agent)``."""


class UnboundKeyError(UserError, KeyError):
    """``self_reference.memory[key]`` for a key with no history bound (as SimpleLLMFunc, a
    ``KeyError``): bind one with ``bind_history(key, ...)`` or run a turn with that
    ``self_reference_key``."""

    def __str__(self) -> str:  # KeyError quotes its message; this one is a sentence
        return str(self.args[0]) if self.args else ""


class UnknownPackError(UserError, KeyError):
    """``repl.install_primitive_pack(name)`` for a name no pack is registered under (as
    SimpleLLMFunc, a ``KeyError``): ``"selfref"`` is the named pack; others are installed as a
    :class:`~simplellmfunc.builtin.pyrepl.PrimitivePack`."""

    def __str__(self) -> str:  # KeyError quotes its message; this one is a sentence
        return str(self.args[0]) if self.args else ""


class ConfigError(UserError):
    """A configuration file or setting is invalid."""


class ContentError(UserError, ValueError):
    """A content part (text or image) is invalid."""


class InvalidHistoryError(UserError, ValueError):
    """A conversation history is malformed.

    Attributes:
        index: Position of the offending message, or ``None`` when the whole history is at fault.
    """

    def __init__(self, message: str, index: int | None = None) -> None:
        super().__init__(message if index is None else f"history[{index}]: {message}")
        self.index = index


class ToolDefinitionError(UserError):
    """A tool cannot be exposed to a model (bad name, unsupported signature)."""


class SkillError(UserError):
    """A skill cannot be used: a ``SKILL.md`` without a valid ``name`` / ``description``, an
    unknown skill name, two skills with one name."""


class DecoratorError(UserError, TypeError):
    """A decorator was applied to something it does not support."""


class UnsupportedError(UserError, NotImplementedError):
    """A SimpleLLMFunc name or feature with no counterpart here; the message names what to use
    instead."""


class SharedMemoryTypeError(UserError, TypeError):
    """A write would change the JSON type of a key of an append-only ``SharedMemory``."""


class CassetteError(UserError):
    """A cassette (``simplellmfunc.testing``) that cannot be read or written, or a request it
    cannot answer in its mode (no network in ``none`` mode)."""


class CassetteMismatchError(CassetteError):
    """A request in replay matched no recorded one; ``diff`` shows how it drifted."""

    def __init__(self, message: str, diff: str = "") -> None:
        super().__init__(f"{message}\n{diff}" if diff else message)
        self.diff = diff


class InputRefusedError(UserError):
    """An answer to a kernel's ``input()`` request was not taken; the message says why (it
    timed out, was already answered, its execution ended, or no request has that id)."""


class AnswerRefusedError(UserError):
    """An answer to a waiting request (a tool approval) was not taken, or is malformed; the
    message says why (no request waits under that id, it was answered or timed out, or the
    answer's form is wrong)."""


class SessionError(UserError):
    """A session cannot be used: an invalid id, a turn already running, a closed store, or the
    session limit reached with every session busy.

    Attributes:
        reason: Which: ``"invalid_id"``, ``"busy"`` (a turn is running), ``"full"`` (every
            session busy at the limit), ``"unknown"`` (no such open session), ``"closed"``
            (the session or its store is closed or not open), ``"no_kernel"`` (no PyRepl
            kernel to answer ``input()``) or ``"other"``. Servers map it to an HTTP status.
    """

    def __init__(self, message: str, *, reason: str = "other") -> None:
        super().__init__(message)
        self.reason = reason


class RequestRefusedError(UserError, ValueError):
    """An HTTP request a server refused at its edge, before any handler ran: a foreign
    ``Host``, a cross-site origin, a body that is too large, too slow, not JSON, malformed or
    nested too deeply, or a missing token.

    Attributes:
        status: The HTTP status it is answered with (400, 401, 403, 408, 413, 415, 421).
        code: A short machine-readable reason (``"invalid_json"``, ``"body_too_large"`` ...).
    """

    def __init__(self, message: str, *, status: int = 400, code: str = "invalid_request") -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class RunError(SimpleLLMFuncError):
    """A run failed for a reason outside the caller's code."""


class ProviderError(RunError):
    """A model provider call failed.

    Attributes:
        status: HTTP status, or ``None`` when no response arrived.
        request_id: The provider's request id, when it sent one.
        attempts: How many attempts were made (1 = no retry).
        retryable: Whether the same request may succeed later.
        body_excerpt: The start of the response body, with secrets redacted.
        provider: Short name of the interface that failed.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        request_id: str | None = None,
        attempts: int = 1,
        retryable: bool = False,
        body_excerpt: str = "",
        provider: str = "",
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.request_id = request_id
        self.attempts = attempts
        self.retryable = retryable
        self.body_excerpt = body_excerpt
        self.provider = provider

    def __str__(self) -> str:
        parts = [self.message]
        if self.status is not None:
            parts.append(f"status={self.status}")
        if self.request_id:
            parts.append(f"request_id={self.request_id}")
        if self.attempts > 1:
            parts.append(f"attempts={self.attempts}")
        if self.body_excerpt:
            parts.append(f"body={self.body_excerpt!r}")
        return " | ".join(parts)


class ProviderConnectionError(ProviderError):
    """The connection failed before a complete response arrived."""


class ProviderTimeoutError(ProviderError):
    """The call's deadline passed."""


class RateLimitError(ProviderError):
    """The provider kept answering 429."""


class AuthenticationError(ProviderError):
    """The provider rejected the key (401 / 403)."""


class NoUsableKeyError(ProviderError):
    """Every key of an :class:`~simplellmfunc.APIKeyPool` is disabled."""


class StreamError(ProviderError):
    """A stream broke, was malformed, or carried an error after a 200 response."""


class EmptyReplyError(StreamError):
    """A 200 response, streamed or not, whose reply has no text, no tool calls and no reasoning.

    The HTTP providers retry it like a 5xx, within their retry policy, when nothing has reached
    the caller; this error means the retries are spent (``retryable`` is true: a later call may
    answer), or the finish reason says why the reply is empty (``"length"``: the reply budget was
    spent first; ``"content_filter"``), which no retry changes (``retryable`` is false).
    """


class OutputParseError(RunError):
    """The model's reply could not be parsed into the declared return type.

    Attributes:
        raw: The model's last reply, verbatim.
        errors: The validation messages of each attempt.
    """

    def __init__(self, message: str, *, raw: str, errors: list[str] | None = None) -> None:
        super().__init__(message)
        self.raw = raw
        self.errors = list(errors or [])


class IncompleteAnswerError(RunError):
    """A run's final answer was empty, or cut off by the output limit, and stayed so after it
    was asked for again (``EngineOptions.answer_retries``).

    Attributes:
        reason: ``"empty"`` or ``"truncated"``.
        text: The last answer as it came (``""`` when empty).
        messages: The run's history as chat dicts, valid for the next call.
    """

    def __init__(
        self,
        message: str,
        *,
        reason: str,
        text: str = "",
        messages: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.text = text
        self.messages = [dict(m) for m in messages]


class LocalModelError(RunError, RuntimeError):
    """The local model (``simplellmfunc local``, llama.cpp's ``llama-server``) is missing, could
    not be built or did not start; the message says what to do."""


class LocalBuildError(LocalModelError):
    """Building ``llama-server`` failed; the message names the build log and quotes its end."""


class LocalServerExitedError(LocalModelError):
    """A local model server died during start-up; the message quotes its log's last lines and
    says what to try."""


class ToolExecutionError(RunError):
    """A tool failed in a direct call (inside a run, failures become tool results)."""


class KernelError(RunError):
    """A PyRepl kernel could not start or failed."""


class KernelDiedError(KernelError):
    """The kernel process died (crash, ``os._exit``, out of memory)."""


class BridgeError(RunError):
    """A call from kernel code back into the host failed.

    Kernel code never imports simplellmfunc, so inside a PyRepl kernel the error is a
    standard-library stand-in of the same name, ``runtime.BridgeError`` (with ``error_type`` and
    ``message``); the host learns of it from the failed cell's error details. This class is the
    name for the concept in the one tree and is not raised on the host.
    """


class WorkspaceError(RunError):
    """A file operation was refused (outside the workspace, stale write, binary file)."""


class MCPError(RunError):
    """An MCP server failed, disconnected or sent something malformed.

    Attributes:
        exit_code: For a stdio server that ended on its own before its session was up, its exit
            status (negative: killed by that signal); ``None`` otherwise.
        stderr_tail: For a stdio server whose session could not be opened, the last lines it
            wrote to stderr (at most 20 lines and 4 KB; the values it was given in ``env`` are
            redacted); ``""`` when there were none.
    """

    def __init__(
        self, message: str, *, exit_code: int | None = None, stderr_tail: str = ""
    ) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.stderr_tail = stderr_tail


class A2AError(RunError):
    """A remote A2A agent failed, answered with an error or ended its task unsuccessfully.

    Attributes:
        url: The remote agent's URL.
        state: The remote task's final state (``"failed"``, ``"canceled"``, ...), if it ended.
    """

    def __init__(self, message: str, *, url: str, state: str | None = None) -> None:
        super().__init__(message)
        self.url = url
        self.state = state


class A2AConnectionError(A2AError):
    """The remote A2A agent could not be reached (refused, unreachable, timed out)."""


class CapacityError(RunError):
    """A served agent refused a turn: the session or turn limit is reached, or it is closing.

    Attributes:
        limit: Which limit: ``"sessions"``, ``"turns"`` or ``"closing"``.
    """

    def __init__(self, message: str, *, limit: str) -> None:
        super().__init__(message)
        self.limit = limit


class TeamMemberError(RunError):
    """An agent of a multi-agent team (``GroupChat``, ``Handoff``) failed: the conversation so
    far is kept. The original exception is the ``__cause__``.

    Attributes:
        agent: The name of the agent that failed.
        history: The conversation up to the failure, as chat dicts valid for a next
            ``run(history=...)`` (what the team's result ``history`` would have been).
        usage: Tokens of every call of the run, the failed agent's calls included.
    """

    def __init__(
        self, message: str, *, agent: str, history: list[dict[str, Any]], usage: Usage
    ) -> None:
        super().__init__(message)
        self.agent = agent
        self.history = history
        self.usage = usage


class ChannelError(RunError):
    """A multi-agent channel failed (its Redis server, a value of the wrong type)."""


class ChannelClosedError(ChannelError):
    """The channel is closed: nothing more can be sent, and everything sent was received."""


class ChannelTimeoutError(ChannelError, TimeoutError):
    """No message arrived (or no room to send) within the timeout."""


class SandboxViolation(RunError):
    """Sandboxed code did something its :class:`~simplellmfunc.sandbox.SandboxPolicy` refuses.

    Raised for a sandboxed tool whose code touched a path outside its sandbox, or for a policy
    with ``require_isolation=True`` where bubblewrap cannot run. Inside a run the model sees it
    as the tool result; the host process is never at risk.
    """


class ResourceLimitExceeded(SandboxViolation):
    """Sandboxed code hit a limit of its policy.

    Attributes:
        limit: Which one: ``"memory"``, ``"cpu_time"``, ``"wall_time"``, ``"processes"``,
            ``"open_files"`` or ``"file_size"``.
    """

    def __init__(self, message: str, *, limit: str) -> None:
        super().__init__(message)
        self.limit = limit


class TimeoutViolation(ResourceLimitExceeded):
    """Sandboxed code ran past its wall-clock (``limit="wall_time"``) or CPU-time limit."""

    def __init__(self, message: str, *, limit: str = "wall_time") -> None:
        super().__init__(message, limit=limit)


class MemoryViolation(ResourceLimitExceeded):
    """Sandboxed code ran out of its memory limit (``limit="memory"``)."""

    def __init__(self, message: str, *, limit: str = "memory") -> None:
        super().__init__(message, limit=limit)


class OutputViolation(ResourceLimitExceeded):
    """A sandboxed tool's result was larger than ``max_output_bytes`` (``limit="output"``)."""

    def __init__(self, message: str, *, limit: str = "output") -> None:
        super().__init__(message, limit=limit)


def limit_exceeded(message: str, limit: str) -> ResourceLimitExceeded:
    """The :class:`ResourceLimitExceeded` subclass for ``limit`` (see its ``limit`` names)."""
    kind = {"wall_time": TimeoutViolation, "cpu_time": TimeoutViolation,
            "memory": MemoryViolation, "output": OutputViolation}.get(limit)  # fmt: skip
    return (
        kind(message, limit=limit)
        if kind is not None
        else ResourceLimitExceeded(message, limit=limit)
    )


class AbortedError(RunError):
    """The run was aborted through an :class:`~simplellmfunc.AbortSignal`."""

    def __init__(self, reason: str = "") -> None:
        super().__init__(f"aborted: {reason}" if reason else "aborted")
        self.reason = reason


class DurableError(RunError):
    """A durable run (``simplellmfunc.runtime.durable``) failed to start, resume or report."""


class StepInterruptedError(DurableError):
    """A non-idempotent tool call began before a crash and may or may not have taken effect;
    a durable run does not run it again (the model is told instead)."""


class ToolSignal(SimpleLLMFuncError):
    """Base of the signals a tool raises to talk to the loop; never an error of the run."""


class ToolRetry(ToolSignal):
    """Raised by a tool to send ``message`` to the model as the tool result and let it retry."""
