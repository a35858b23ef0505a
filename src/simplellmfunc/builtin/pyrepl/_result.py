"""Turn a :class:`CellOutcome` into the result dict of ``PyRepl.execute``.

The dict is the seed's shape (``success``, ``stdout``, ``stderr``, ``return_value``, ``error``,
``error_details``, ``execution_time_ms``, ``artifacts``) plus ``execution_count``, ``notice`` (lost
state, or a cell stopped by ``SystemExit``) and ``output_files`` (where cut output was saved in
full).

``SystemExit`` (``exit()``, ``quit()``, ``sys.exit()``; see ``_in_kernel._boot``) stops the cell
and nothing else: with a code that means success (none, 0) the execution succeeded, with any
other code it failed with ``SystemExit: <code>``; either way the notice says the kernel and its
state are kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._exec import CellLimits, CellOutcome
from ._output import CHARS_PER_TOKEN, StreamView

__all__ = ["ResultContext", "build_result"]

_SYSTEM_EXIT = (
    "The code raised SystemExit (exit(), quit() or sys.exit()), which stops this execution "
    "only: the Python kernel keeps running, and variables and imports are kept."
)
_KERNEL_EXITED = (
    "The code asked the Python kernel to exit, so it was shut down: every variable, import and "
    "definition is gone, and the next execution starts in a fresh kernel."
)
#: ``str(SystemExit(code))`` for the codes that mean success, as for a process exit status.
_CLEAN_EXITS = frozenset({"", "None", "0", "False"})
_NO_INPUT_HINT = (
    "input() cannot be answered here: this execution has no event consumer to reply to "
    "input requests (the agent must be called with enable_event=True, and the app must answer "
    "each kernel_input_request event with submit_input). Put the values directly in the code "
    "instead."
)


@dataclass(frozen=True, slots=True)
class ResultContext:
    """What the result builder needs besides the outcome."""

    limits: CellLimits
    elapsed_ms: float
    max_output_tokens: int
    streams: Mapping[str, StreamView]
    notice: str | None
    input_enabled: bool
    abort_reason: str = ""


def build_result(out: CellOutcome, ctx: ResultContext) -> dict[str, Any]:
    """Return the result dict (the streams as ``ctx.streams`` presents them)."""
    budget = max(ctx.max_output_tokens, 1) * CHARS_PER_TOKEN
    stdout, stderr = ctx.streams["stdout"], ctx.streams["stderr"]
    files = {name: view.file for name, view in ctx.streams.items() if view.file is not None}
    error, details = _error(out, ctx)
    reply = out.reply or {}
    exit_code = _system_exit(out)
    clean_exit = exit_code in _CLEAN_EXITS
    if clean_exit:
        # sys.exit(0) and friends end a script normally: the cell stopped, nothing failed.
        error, details = None, None
    replied_ok = clean_exit or reply.get("status", "ok") == "ok"
    success = out.verdict == "done" and error is None and replied_ok
    if success is False and error is None:
        error = f"{reply.get('ename', 'Error')}: {reply.get('evalue', '')}"
    notices = [ctx.notice]
    if out.kernel_exited:
        notices.append(_KERNEL_EXITED)
    elif exit_code is not None:
        notices.append(_SYSTEM_EXIT)
    result: dict[str, Any] = {
        "success": success,
        "stdout": stdout.text,
        # As in SimpleLLMFunc, the cell's stderr says that its input() timed out.
        "stderr": stderr.text + (f"{error}\n" if out.verdict == "input_timeout" else ""),
        "return_value": _cap(out.return_value, budget // 4),
        "error": error,
        "error_details": details,
        "execution_time_ms": round(ctx.elapsed_ms, 3),
        "artifacts": out.artifacts,
        "execution_count": reply.get("execution_count"),
        "notice": "\n".join(n for n in notices if n) or None,
        "output_files": files or None,
    }
    return result


def _system_exit(out: CellOutcome) -> str | None:
    """The code of a SystemExit that ended the cell (``str(exc)``), or None."""
    details = out.error_details or {}
    if out.verdict != "done" or details.get("error_type") != "SystemExit":
        return None
    return str(details.get("message", ""))


def _cap(text: str | None, limit: int) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return text[:limit] + f"... [repr truncated: {len(text) - limit:,} more characters]"


def _kernel_error(out: CellOutcome, ctx: ResultContext) -> tuple[str | None, dict[str, Any] | None]:
    details = out.error_details
    if details is None and out.error is None:
        return None, None
    if details is None or "summary" not in details:
        assert out.error is not None
        ename, evalue = out.error.get("ename", "Error"), out.error.get("evalue", "")
        details = {"error_type": ename, "message": evalue, "line": None, "column": None,
                   "snippet": None, "pointer": None, "summary": f"{ename}: {evalue}",
                   "user_traceback": None}  # fmt: skip
    error = str(details["summary"])
    if str(details.get("error_type", "")).endswith("StdinNotImplementedError"):
        hint = _NO_INPUT_HINT if not ctx.input_enabled else ""
        error = f"{error}\n{hint}".rstrip()
        details = {**details, "summary": error}
    return error, details


def _located(prefix: str, details: dict[str, Any] | None) -> str:
    if not details or details.get("line") is None:
        return prefix
    where = f"\nIt was interrupted at line {details['line']}"
    if details.get("function"):
        where += f", in {details['function']}"
    snippet = f":\n    {details['snippet']}" if details.get("snippet") else "."
    return prefix + where + snippet


def _error(out: CellOutcome, ctx: ResultContext) -> tuple[str | None, dict[str, Any] | None]:
    limits = ctx.limits
    if out.verdict == "done":
        return _kernel_error(out, ctx)
    if out.verdict == "died":
        message = (
            f"The Python kernel died while running this code ({out.death}). All variables and "
            "imports were lost; the next execution starts in a fresh kernel."
        )
        return message, _synthetic("KernelDiedError", message)
    if out.verdict == "timeout":
        message = f"Execution timed out after {limits.execution_timeout:g} seconds of active time"
        kind = "TimeoutError"
    elif out.verdict == "input_timeout":
        # SimpleLLMFunc's wording, alone when the cell stopped cleanly (the usual case).
        message = f"Input request timed out after {limits.input_idle_timeout:g} seconds"
        if out.recovered:
            return message, _synthetic("InputTimeoutError", message, out.error_details)
        kind = "InputTimeoutError"
    else:
        message = "Execution aborted" + (f" ({ctx.abort_reason})" if ctx.abort_reason else "")
        kind = "AbortedError"
    if not out.ran:
        message += " before it started; variables and imports are kept."
    elif out.recovered:
        message += " and was interrupted; variables and imports are kept."
    else:
        message += (
            f". The kernel did not stop within {limits.interrupt_grace:g} s of the interrupt and "
            "was restarted: all variables and imports were lost."
        )
    message = _located(message, out.error_details)
    return message, _synthetic(kind, message, out.error_details)


def _synthetic(kind: str, message: str, located: dict[str, Any] | None = None) -> dict[str, Any]:
    where = located or {}
    return {
        "error_type": kind,
        "message": message,
        "line": where.get("line"),
        "column": where.get("column"),
        "snippet": where.get("snippet"),
        "pointer": where.get("pointer"),
        "summary": message,
        "user_traceback": where.get("user_traceback"),
    }
