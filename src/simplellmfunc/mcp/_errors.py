"""What a failed MCP request means: a clear error, and whether the session is gone."""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass

import anyio
import httpx2
import mcp.types as types
from mcp.shared.exceptions import MCPError as SDKError
from pydantic import ValidationError

from ..exceptions import MCPError

__all__ = ["UNKNOWN_SESSION", "Failure", "StartFailure", "connect_error", "describe", "translate"]

# How servers say "unknown session" (the Python SDK, the TypeScript SDK, common servers).
UNKNOWN_SESSION = re.compile(
    r"session (not found|terminated|expired)|no valid session|(unknown|invalid) session", re.I
)

_SDK_TIMEOUT = re.compile(r"Request '[^']*' timed out$")


@dataclass(frozen=True, slots=True)
class Failure:
    """A failed request: the error to raise and what it says about the session."""

    error: MCPError
    lost: bool  # the session is gone: the next request opens a new one
    unsent: bool  # the server certainly did not act on the request: it may be sent again
    transient: bool = False  # a disconnect or timeout: trying again later may succeed


def translate(exc: Exception, what: str, label: str, session_rejected: bool = False) -> Failure:
    """Turn an SDK or transport failure of ``what`` into a clear :class:`MCPError`.

    ``session_rejected``: the HTTP server said it does not know our session.
    """
    if isinstance(exc, SDKError):
        text = exc.error.message
        if session_rejected or UNKNOWN_SESSION.search(text):
            # An HTTP server restarted or expired the session; it rejected the request unread.
            message = f"MCP server {label} no longer knows our session ({what})"
            return Failure(MCPError(message), lost=True, unsent=True)
        # The SDK's own codes for these are also used by servers for their own errors, so the
        # SDK's exact wording tells a local disconnect or timeout from an error the server sent.
        if exc.code == types.CONNECTION_CLOSED and text == "Connection closed":
            message = f"MCP server {label} disconnected during {what}"
            return Failure(MCPError(message), lost=True, unsent=False, transient=True)
        if exc.code == types.REQUEST_TIMEOUT and _SDK_TIMEOUT.match(text):
            message = f"{what} on MCP server {label} timed out"
            return Failure(MCPError(message), lost=False, unsent=False, transient=True)
        return Failure(MCPError(f"{what} failed on MCP server {label}: {text}"), False, False)
    if isinstance(exc, ValidationError):
        message = f"MCP server {label} sent a malformed result for {what}: {_first_error(exc)}"
        return Failure(MCPError(message), lost=False, unsent=False)
    if isinstance(exc, httpx2.HTTPError | OSError | anyio.BrokenResourceError):
        message = f"cannot reach MCP server {label} for {what}: {describe(exc)}"
        return Failure(MCPError(message), lost=True, unsent=False, transient=True)
    # RuntimeError: an SDK-side check (output schema, an input request we cannot answer).
    return Failure(MCPError(f"{what} failed on MCP server {label}: {describe(exc)}"), False, False)


class StartFailure(Exception):
    """A session that could not be opened, with what its stdio server left behind.

    ``exit_code``: how the server ended on its own (``None``: it did not, or not over stdio);
    ``stderr_tail``: its last stderr lines, already bounded and redacted.
    """

    def __init__(self, cause: Exception, exit_code: int | None = None, stderr_tail: str = ""):
        super().__init__(str(cause))
        self.cause = cause
        self.exit_code = exit_code
        self.stderr_tail = stderr_tail


def connect_error(
    label: str, failure: Exception | None, attempts: int, connect_timeout: float
) -> MCPError:
    """The error for a server that could not be started or reached in ``attempts`` tries.

    A stdio server that exited is described by its exit status, not by the SDK's "Connection
    closed"; the tail of its stderr follows on the next lines.
    """
    exit_code, tail, cause = None, "", failure
    if isinstance(failure, StartFailure):
        exit_code, tail, cause = failure.exit_code, failure.stderr_tail, failure.cause
    if exit_code is not None:
        reason = _exit_status(exit_code)
    elif isinstance(cause, TimeoutError):
        reason = f"no answer within {connect_timeout:g} s"
    else:
        reason = describe(cause) if cause is not None else "unknown"
    tries = f" after {attempts} attempts" if attempts > 1 else ""
    message = f"cannot connect to MCP server {label}{tries}: {reason}"
    if tail:
        lines = "\n".join(f"  | {line}" for line in tail.splitlines())
        message += f"; the end of its stderr:\n{lines}"
    elif exit_code is not None:
        message += " (no output on stderr)"
    return MCPError(message, exit_code=exit_code, stderr_tail=tail)


def _exit_status(code: int) -> str:
    if code >= 0:
        return f"the server exited with code {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    return f"the server was killed by {name}"


def _first_error(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False)
    if not errors:
        return str(exc)
    first = errors[0]
    return f"{'.'.join(str(p) for p in first['loc']) or 'result'}: {first['msg']}"


def describe(exc: BaseException) -> str:
    """A one-line reason, looking inside exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, StartFailure):
        if exc.exit_code is not None:
            return _exit_status(exc.exit_code)
        exc = exc.cause
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {exc.filename or exc}"
    if isinstance(exc, SDKError):
        return exc.error.message
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
