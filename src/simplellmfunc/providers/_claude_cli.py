"""ClaudeCodeCLI: the ``claude`` command-line tool (Claude Code) as an LLM interface.

Each call runs ``claude -p <prompt> --output-format json`` as a subprocess (seed 001 §2.6,
§6.3). The first call of a session sends the whole transcript and keeps the ``session_id`` of the
JSON result; later calls add ``--resume <session_id>`` and send only the messages that are new
since the last call, because the CLI replays the earlier turns itself.

How "new" is decided: the engine always passes the full transcript. The interface remembers the
transcript of its last successful call; when the next request starts with exactly those messages,
the rest (minus the assistant reply the CLI produced, which its session already holds) is sent.
Anything else (an edited or shortened history, a changed system prompt, a request with nothing
new, a failed or cancelled previous call) starts a fresh session with the full transcript, so the
CLI never sees a conversation other than the one the caller holds.

Tools are not native: the engine renders the tool catalogue and the call format into the prompt
(the text tool protocol) and this interface renders tool calls and results as text.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, Final

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream, Process
from pydantic import BaseModel, ConfigDict

from .._content import ContentPart, ImgPath, ImgUrl, Text
from .._messages import AssistantMessage, Message, SystemMessage, ToolMessage, UserMessage
from .._unicode import loads_reply, replace_surrogates
from .._usage import Usage
from ..exceptions import ConfigError, ProviderError, ProviderTimeoutError
from ._base import (
    Capabilities,
    FinishEvent,
    LLMInterface,
    LLMRequest,
    LLMResponse,
    StreamEvent,
    TextDelta,
)
from ._redact import redact
from ._tokens import count_message_tokens, count_text_tokens

__all__ = ["CLAUDE_CLI_CAPABILITIES", "ClaudeCodeCLI"]

CLAUDE_CLI_CAPABILITIES: Final = Capabilities(
    native_tools=False,
    parallel_tool_calls=False,
    json_schema=False,
    streaming=False,
    streaming_with_tools=False,
    vision=False,
    stream_usage=False,
    stateful_session=True,
)
# Linux refuses a single argument longer than 128 KiB (MAX_ARG_STRLEN); longer prompts, and
# prompts the CLI's option parser would take for an option, go through stdin instead.
_ARGV_LIMIT: Final = 100_000
_EXCERPT: Final = 500
_STDERR_KEEP: Final = 64 * 1024  # bytes of stderr kept (the end, where errors are)
_POLL: Final = 0.01
_CLEANUP: Final = 5.0  # bound on the shielded wait for a killed process
# The CLI reports API trouble only as text: these words mark an error a later call may not hit.
_TRANSIENT = re.compile(
    r"\b(?:429|5\d\d|overloaded|rate.?limit|timed?.?out|ECONNRESET|ECONNREFUSED)\b", re.I
)


class _CLIResult(BaseModel):
    """The JSON object ``claude -p --output-format json`` prints."""

    model_config = ConfigDict(extra="allow")

    is_error: bool = False
    subtype: str = ""
    result: str = ""
    session_id: str | None = None
    usage: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class _Plan:
    """One CLI invocation: the command line, stdin, and what it sends."""

    argv: list[str]
    stdin: bytes | None
    sent: tuple[Message, ...]


class ClaudeCodeCLI(LLMInterface):
    """Claude Code's ``claude`` CLI, run as a subprocess, with its native session resumption.

    Calls on one instance run one at a time (the session is shared state); use one instance
    per conversation. A call's process runs in its own process group, which is killed when the
    call ends, times out or is cancelled, so nothing it started outlives the call.

    Args:
        executable: The ``claude`` command (a name looked up in ``PATH``, or a path).
        model: ``--model`` value (``None``: the CLI's default).
        permission_mode: ``--permission-mode`` value (``default``, ``acceptEdits``, ``plan``,
            ``bypassPermissions`` ...); ``None`` passes no flag. Nothing is granted implicitly.
        allowed_tools: ``--allowedTools`` entries (e.g. ``["Read", "Bash(git log:*)"]``), joined
            with commas; ``None`` or empty passes no flag.
        extra_args: More arguments appended to every command line (e.g. ``--max-turns 3``).
        cwd: Working directory of the CLI (``None``: the current one).
        env: Environment variables added to the inherited environment.
        timeout: Seconds a call may take (``LLMRequest.timeout`` overrides it per call).
        context_window: The model's context size in tokens.
        provider_name: Label used in responses, events and errors.
    """

    def __init__(
        self,
        executable: str | os.PathLike[str] = "claude",
        model: str | None = None,
        permission_mode: str | None = None,
        allowed_tools: Sequence[str] | None = None,
        extra_args: Sequence[str] = (),
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float = 600.0,
        *,
        context_window: int | None = 200_000,
        provider_name: str = "claude-code",
    ) -> None:
        self.executable = os.fspath(executable)
        self.model = model
        self.model_name = model or ""
        self.permission_mode = permission_mode
        self.allowed_tools = tuple(allowed_tools or ())
        self.extra_args = tuple(extra_args)
        self.cwd = None if cwd is None else os.fspath(cwd)
        self.env = dict(env or {})
        self.timeout = timeout
        self.context_window = context_window
        self.provider_name = provider_name
        self.capabilities = CLAUDE_CLI_CAPABILITIES
        self._session_id: str | None = None
        self._seen: tuple[Message, ...] = ()
        self._lock = anyio.Lock()

    @property
    def session_id(self) -> str | None:
        """The CLI session the next call resumes (``None``: the next call starts one)."""
        return self._session_id

    @property
    def seen_count(self) -> int:
        """How many messages of the caller's transcript the current session has seen."""
        return len(self._seen) if self._session_id else 0

    def reset_session(self) -> None:
        """Forget the session: the next call starts a new one with the full transcript."""
        self._session_id = None
        self._seen = ()

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Run the CLI on the messages the session has not seen and return its reply.

        ``request.tools``, ``tool_choice`` and ``response_format`` are not sent: the engine
        puts tools and output contracts in the prompt for interfaces without native support.

        Raises:
            ConfigError: When the executable cannot be found.
            ProviderTimeoutError: When the call takes longer than its timeout.
            ProviderError: When the CLI exits with an error or prints no valid result.
        """
        async with self._lock:
            plan = self._plan(request.messages)
            # A failed or cancelled call leaves the session in an unknown state: start over.
            self.reset_session()
            completed = await self._run(plan, request.timeout or self.timeout)
            result = self._result(completed)
            response = await self._response(result, plan)
            if result.session_id:
                self._session_id = result.session_id
                self._seen = tuple(request.messages)
            return response

    async def stream(self, request: LLMRequest) -> AsyncGenerator[StreamEvent, None]:
        """Run :meth:`complete` and yield its text as one delta, then the finish event.

        Raises:
            ProviderError: As :meth:`complete`; always before the first event.
        """
        response = await self.complete(request)
        if response.text:
            yield TextDelta(response.text)
        yield FinishEvent(response)

    def _plan(self, messages: Sequence[Message]) -> _Plan:
        """Decide between resuming (only new messages) and a new session (everything)."""
        names = {
            c.id: c.name for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls
        }
        system = (
            messages[0].content if messages and isinstance(messages[0], SystemMessage) else None
        )
        new = self._new_messages(messages)
        sent = new if new is not None else tuple(messages[1:] if system is not None else messages)
        # Text UTF-8 cannot encode (lone surrogates) goes as U+FFFD, as over HTTP (_unicode).
        prompt = replace_surrogates(render_prompt(sent, names))
        if system is not None:
            system = replace_surrogates(system)
        argv = [self.executable, "-p"]
        via_argv = len(prompt.encode()) <= _ARGV_LIMIT and not prompt.startswith("-")
        if via_argv:
            argv.append(prompt)
        argv += ["--output-format", "json"]
        if new is not None:
            argv += ["--resume", str(self._session_id)]
        # On every call, not only the first: the CLI builds its system prompt per process and
        # the session keeps only the conversation.
        if system is not None:
            argv += ["--system-prompt", system]
        argv += self._option_args()
        stdin = None if via_argv else prompt.encode()
        return _Plan(argv, stdin, sent)

    def _new_messages(self, messages: Sequence[Message]) -> tuple[Message, ...] | None:
        """What the session has not seen, or ``None`` when it cannot be resumed."""
        seen = self._seen
        if self._session_id is None or tuple(messages[: len(seen)]) != seen:
            return None
        tail = list(messages[len(seen) :])
        while tail and isinstance(tail[0], AssistantMessage):
            tail.pop(0)  # the CLI's own reply: its session holds it already
        return tuple(tail) or None

    def _option_args(self) -> list[str]:
        args: list[str] = []
        if self.model:
            args += ["--model", self.model]
        if self.permission_mode:
            args += ["--permission-mode", self.permission_mode]
        if self.allowed_tools:
            args += ["--allowedTools", ",".join(self.allowed_tools)]
        return [*args, *self.extra_args]

    async def _run(self, plan: _Plan, timeout: float) -> _Completed:
        env = {**os.environ, **self.env} if self.env else None
        try:
            return await _run_cli(plan.argv, plan.stdin, cwd=self.cwd, env=env, timeout=timeout)
        except FileNotFoundError:
            raise ConfigError(
                f"{self.provider_name}: cannot run {self.executable!r}: not found "
                "(install Claude Code or pass executable=)"
            ) from None
        except TimeoutError:
            raise ProviderTimeoutError(
                f"{self.provider_name}: the CLI did not finish within {timeout:g} s",
                provider=self.provider_name,
                retryable=True,
            ) from None
        except OSError as exc:
            raise ProviderError(
                f"{self.provider_name}: cannot run {self.executable!r}: {exc.strerror or exc}",
                provider=self.provider_name,
            ) from None

    def _result(self, completed: _Completed) -> _CLIResult:
        result = _parse_result(completed.stdout)
        stderr = completed.stderr.decode(errors="replace").strip()
        if completed.returncode == 0 and result is not None and not result.is_error:
            return result
        if result is not None and result.is_error:
            what = f"{result.subtype or 'error'}: {result.result}"
        elif completed.returncode != 0:
            what = f"exit status {completed.returncode}"
        else:
            what = "the output is not a JSON result"
        detail = redact(what)[:_EXCERPT]
        excerpt = redact(stderr)[-_EXCERPT:]
        raise ProviderError(
            f"{self.provider_name}: {detail}",
            body_excerpt=excerpt,
            retryable=bool(_TRANSIENT.search(f"{detail}\n{excerpt}")),
            provider=self.provider_name,
        )

    async def _response(self, result: _CLIResult, plan: _Plan) -> LLMResponse:
        usage = _usage(result.usage)
        if usage is None:
            # Estimated on what this call sent; the CLI also replays its session and prompt.
            def count() -> Usage:
                prompt = count_message_tokens(plan.sent, self.model_name)
                completion = count_text_tokens(result.result, self.model_name)
                return Usage(prompt, completion, prompt + completion, calls=1, estimated=True)

            usage = await anyio.to_thread.run_sync(count)
        return LLMResponse(
            message=AssistantMessage(result.result or None),
            finish_reason="stop",
            usage=usage,
            model=self.model_name or _model_of(result),
            request_id=result.session_id,
            provider=self.provider_name,
            raw=result.model_dump(),
        )

    def __repr__(self) -> str:
        return (
            f"ClaudeCodeCLI(executable={self.executable!r}, model={self.model!r}, "
            f"session={self._session_id!r})"
        )


def _parse_result(stdout: bytes) -> _CLIResult | None:
    """The result object: the whole output, else its last line that is one (some versions log
    lines before it). Text that is not valid Unicode arrives with U+FFFD (see ``_unicode``)."""
    text = stdout.decode(errors="replace").strip()
    for candidate in (text, *reversed(text.splitlines())):
        if candidate.startswith("{"):
            try:
                return _CLIResult.model_validate(loads_reply(candidate))
            except ValueError:  # not JSON, or not a result (pydantic's ValidationError)
                continue
    return None


def _usage(raw: Mapping[str, Any] | None) -> Usage | None:
    """Anthropic-style usage: cache writes and reads are prompt tokens too."""
    if not raw:
        return None
    fresh = int(raw.get("input_tokens") or 0)
    written = int(raw.get("cache_creation_input_tokens") or 0)
    read = int(raw.get("cache_read_input_tokens") or 0)
    completion = int(raw.get("output_tokens") or 0)
    prompt = fresh + written + read
    return Usage(prompt, completion, prompt + completion, cached_tokens=read, calls=1)


def _model_of(result: _CLIResult) -> str:
    models = (result.model_extra or {}).get("modelUsage")
    return next(iter(models), "") if isinstance(models, dict) else ""


def render_prompt(messages: Sequence[Message], tool_names: Mapping[str, str]) -> str:
    """The prompt text for ``messages``: a lone user message verbatim, else tagged turns."""
    if len(messages) == 1 and isinstance(messages[0], UserMessage):
        return _text(messages[0].content)
    return "\n\n".join(_render(m, tool_names) for m in messages)


def _render(message: Message, tool_names: Mapping[str, str]) -> str:
    if isinstance(message, UserMessage):
        return f"<user>\n{_text(message.content)}\n</user>"
    if isinstance(message, SystemMessage):
        return f"<system>\n{message.content}\n</system>"
    if isinstance(message, ToolMessage):
        name = tool_names.get(message.tool_call_id, "")
        head = f'<tool_result name="{name}" id="{message.tool_call_id}">'
        return f"{head}\n{_text(message.content)}\n</tool_result>"
    parts = [message.content] if message.content else []
    parts += [
        f'<tool_call name="{c.name}" id="{c.id}">{c.arguments}</tool_call>'
        for c in message.tool_calls
    ]
    body = "\n".join(parts)
    return f"<assistant>\n{body}\n</assistant>"


def _text(content: str | tuple[ContentPart, ...]) -> str:
    """Text of a content; images become placeholders (the CLI takes text only)."""
    if isinstance(content, str):
        return content
    return "".join(_part_text(p) for p in content)


def _part_text(part: ContentPart) -> str:
    if isinstance(part, Text):
        return part.text
    if isinstance(part, ImgPath):
        return f"[image file: {part.path.resolve()}]"
    if isinstance(part, ImgUrl) and not part.url.startswith("data:"):
        return f"[image: {part.url}]"
    return "[image omitted]"


@dataclass(frozen=True, slots=True)
class _Completed:
    returncode: int
    stdout: bytes
    stderr: bytes


async def _run_cli(
    argv: Sequence[str],
    stdin: bytes | None,
    *,
    cwd: str | None,
    env: Mapping[str, str] | None,
    timeout: float,
) -> _Completed:
    """Run ``argv`` in a process group of its own and collect its output.

    The group is killed when the process exits (descendants it left behind may hold the pipes
    open), on timeout and on cancellation; the wait for it is shielded and bounded.

    Raises:
        TimeoutError: When ``timeout`` seconds passed.
        OSError: When the process cannot be started.
    """
    # Shielded: cancelled while asyncio connects the pipes, the spawn would kill the process but
    # not its group. The spawn is quick; a pending cancellation lands in the try below.
    with anyio.CancelScope(shield=True):
        process = await anyio.open_process(
            list(argv),
            stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
    out, err = bytearray(), bytearray()
    try:
        with anyio.fail_after(timeout):
            async with anyio.create_task_group() as group:
                group.start_soon(_read, process.stdout, out, None)
                group.start_soon(_read, process.stderr, err, _STDERR_KEEP)
                if stdin is not None:
                    group.start_soon(_feed, process.stdin, stdin)
                await _wait_exit(process)
                _kill_group(process)
    finally:
        with anyio.CancelScope(shield=True):
            _kill_group(process)
            with anyio.move_on_after(_CLEANUP):
                await _wait_exit(process)
                await process.aclose()
    code = process.returncode
    return _Completed(-1 if code is None else code, bytes(out), bytes(err))


async def _read(stream: ByteReceiveStream | None, buffer: bytearray, keep: int | None) -> None:
    if stream is None:
        return
    async for chunk in stream:
        buffer += chunk
        if keep is not None and len(buffer) > keep:
            del buffer[: len(buffer) - keep]


async def _feed(stream: ByteSendStream | None, data: bytes) -> None:
    if stream is None:
        return
    # The CLI may exit without reading its input; its exit status tells what went wrong.
    with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        await stream.send(data)
        await stream.aclose()


async def _wait_exit(process: Process) -> None:
    # Not process.wait(): on asyncio it also waits for the pipes to close, which a descendant
    # holding them can delay forever.
    while process.returncode is None:  # noqa: ASYNC110 - an exit status has no event to await
        await anyio.sleep(_POLL)


def _kill_group(process: Process) -> None:
    """SIGKILL the process group (the process leads it: ``start_new_session``)."""
    if not hasattr(os, "killpg"):  # pragma: no cover - Windows has no process groups
        with suppress(ProcessLookupError):
            process.kill()
        return
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
