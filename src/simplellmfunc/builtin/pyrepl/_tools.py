"""The model-facing tools of a PyRepl: ``execute_code``, ``reset_repl``, ``list_variables``.

``execute_code`` returns SimpleLLMFunc's shape, the text summary the model reads (an
:class:`ExecutionSummary`: a ``str`` that also carries the result dict of ``PyRepl.execute``
and the images); :meth:`render` gives the model that text, or ``(text, [images])`` when the code
showed images, and reports a cell that failed (raised, timed out) as a failed tool call.

The tools know their REPL only through the :class:`ReplBackend` protocol (``PyRepl`` is one), so
this module does not import the PyRepl class, and the class imports the tools.
"""

from __future__ import annotations

import json
from collections.abc import Callable, KeysView, Sequence
from typing import Annotated, Any, Protocol, SupportsIndex, overload

from pydantic import WithJsonSchema

from ..._abort import AbortSignal
from ..._content import ImgPath, ImgUrl
from ...exceptions import ContentError, ToolRetry
from ...tools import Tool, ToolEventEmitter

__all__ = [
    "ExecuteCodeTool",
    "ExecutionSummary",
    "ListVariablesTool",
    "ReplBackend",
    "ReplTool",
    "ResetReplTool",
    "fork_repl_tools",
    "render_execution",
]


class ReplBackend(Protocol):
    """What the tools, and forking them, need of a REPL (:class:`PyRepl` is one)."""

    async def execute(
        self,
        code: str,
        *,
        event_emitter: ToolEventEmitter | None = None,
        abort_signal: AbortSignal | None = None,
        timeout_seconds: float | None = None,
    ) -> dict[str, Any]:
        """Run ``code``; the result dict (``timeout_seconds``: this run's active-time limit)."""
        ...

    @property
    def execution_timeout_seconds(self) -> float:
        """The active-time limit of one execution."""
        ...

    async def reset(self) -> str:
        """Delete every user variable."""
        ...

    async def list_variables(self) -> list[dict[str, str]]:
        """``[{"name", "type"}]`` of the user variables."""
        ...

    @property
    def toolset(self) -> list[Tool]:
        """The REPL's tools (one instance of each, the same on every access)."""
        ...

    def fork(self) -> ReplBackend:
        """A new, unstarted REPL with the same settings (its own kernel)."""
        ...

    async def aclose(self) -> None:
        """Release the kernel."""
        ...


EXECUTE_DESCRIPTION = """\
Run Python code in a persistent REPL session (an IPython REPL in a Jupyter kernel) and return its \
output. Variables, imports and function definitions persist between calls, so work step by step: \
run a small snippet, look at the result, then continue. Write direct snippets of top-level \
executable code, not standalone scripts: do not wrap code in `if __name__ == "__main__":` and do \
not re-define what already exists. The \
value of the last expression is returned (like a notebook cell); use print() for anything else \
you need to see. Top-level `await`, IPython magics (%timeit, !ls) and display() work; images \
shown with display() or returned as the last expression are attached for you to look at. \
input() is supported when a user is attached to answer it; otherwise pass values in the code. \
Errors report the line and column in your code. Very long output is cut to its head and tail, \
with the full text saved to a file whose path is given. Each run has an active-time limit of \
{limit} seconds (waiting for input() does not count); pass timeout_seconds for a shorter limit on \
one run (a longer one is cut to {limit}). A run that times out is interrupted (variables are \
kept). Files are read and written relative to the REPL's working directory."""

#: ``execute_code``'s ``timeout_seconds`` as the model sees it: a number it may leave out (the
#: ``null`` of ``float | None`` is the Python default, not something to send).
_TIMEOUT_SCHEMA = WithJsonSchema({"type": "number"})

RESET_DESCRIPTION = """\
Reset the Python REPL: delete every variable, function and import you defined. Use it to start \
over from a clean namespace. It only affects REPL variables: the attached self_reference object \
and its memory, and the runtime primitives, are kept (forgetting memory is done through \
self_reference, not by resetting)."""

LIST_DESCRIPTION = """\
List the variables currently defined in the Python REPL, as [{"name", "type"}]. Private names \
(starting with "_"), IPython's own names and the self_reference / runtime objects are left out."""


class ReplTool(Tool):
    """A tool of one REPL (the base of the three below)."""

    def __init__(self, repl: ReplBackend, name: str, description: str, **options: Any) -> None:
        self._repl = repl
        super().__init__(name=name, description=description, **options)

    @property
    def repl(self) -> ReplBackend:
        """The REPL this tool runs in."""
        return self._repl


class ExecuteCodeTool(ReplTool):
    """``execute_code``: run code in the REPL.

    Args:
        repl: The REPL.
        max_output_tokens: About how much output the REPL lets the model read per execution.
        abort_grace: How long an aborted run waits for the interrupted cell's result (its
            output so far) before cancelling the call.
        prompt_injection_builder: The tool's system-prompt text (PyRepl's lists its installed
            primitive packs).
    """

    def __init__(
        self,
        repl: ReplBackend,
        max_output_tokens: int,
        abort_grace: float = 10.0,
        *,
        prompt_injection_builder: Callable[[Tool], str] | None = None,
    ) -> None:
        # The REPL fits its own output (head + tail + spill file) to ~max_output_tokens: leave
        # room for that plus the summary, so the engine never cuts it a second time.
        budget = int(max_output_tokens * 1.2) + 1000
        limit = f"{repl.execution_timeout_seconds:g}"
        super().__init__(
            repl,
            "execute_code",
            EXECUTE_DESCRIPTION.format(limit=limit),
            result_budget=budget,
            abort_grace=abort_grace,
            prompt_injection_builder=prompt_injection_builder,
        )

    async def run(
        self,
        code: str,
        timeout_seconds: Annotated[float | None, _TIMEOUT_SCHEMA] = None,
        event_emitter: ToolEventEmitter | None = None,
        abort_signal: AbortSignal | None = None,
    ) -> ExecutionSummary:
        """Run Python code in the persistent REPL.

        Args:
            code: The Python code to run (IPython syntax: magics and top-level await work).
            timeout_seconds: Active-time limit of this run in seconds, greater than 0; at most
                the REPL's own limit (a larger value is cut to it). Leave it out for that limit.

        Raises:
            ToolRetry: For a ``timeout_seconds`` that is not greater than 0 (the model is told).
        """
        limit = self._repl.execution_timeout_seconds
        capped: float | None = None
        if timeout_seconds is not None:
            if not timeout_seconds > 0:
                raise ToolRetry(f"timeout_seconds must be greater than 0, got {timeout_seconds}")
            capped = min(float(timeout_seconds), limit)
        result = await self._repl.execute(
            code, event_emitter=event_emitter, abort_signal=abort_signal, timeout_seconds=capped
        )
        if timeout_seconds is not None and timeout_seconds > limit:
            asked = f"timeout_seconds={timeout_seconds:g}"
            cut = f"{asked} is above this REPL's limit; {limit:g} was used."
            result = {**result, "notice": " ".join(filter(None, [result.get("notice"), cut]))}
        return ExecutionSummary.of(result)

    def render(self, result: Any) -> Any:
        """The model's view: a text summary, plus the images when there are any.

        Raises:
            ToolRetry: For a cell that failed (raised, timed out): the run's events show a failed
                call (``success=False``) with the summary, which the model reads as the result.
        """
        if isinstance(result, dict):
            result = ExecutionSummary.of(result)
        if not isinstance(result, ExecutionSummary):
            return result
        if not result.success:
            raise ToolRetry(str(result))
        return (str(result), list(result.images)) if result.images else str(result)

    def failed(self, result: Any) -> bool:
        """Whether the run failed (raised, timed out, was interrupted)."""
        if isinstance(result, ExecutionSummary):
            return not result.success
        return isinstance(result, dict) and result.get("success") is False


class ResetReplTool(ReplTool):
    """``reset_repl``: clear the REPL namespace."""

    def __init__(self, repl: ReplBackend) -> None:
        super().__init__(repl, "reset_repl", RESET_DESCRIPTION)

    async def run(self) -> str:
        """Clear REPL variables (self_reference and runtime primitives are kept)."""
        return await self._repl.reset()


class ListVariablesTool(ReplTool):
    """``list_variables``: what the REPL namespace holds."""

    def __init__(self, repl: ReplBackend) -> None:
        super().__init__(repl, "list_variables", LIST_DESCRIPTION)

    async def run(self) -> list[dict[str, str]]:
        """List user variables with their type names."""
        return await self._repl.list_variables()

    def render(self, result: Any) -> Any:
        """JSON text (an empty namespace says so)."""
        if isinstance(result, list) and not result:
            return "No variables are defined."
        return json.dumps(result, ensure_ascii=False)


def fork_repl_tools(tools: Sequence[Tool]) -> tuple[tuple[Tool, ...], tuple[ReplBackend, ...]]:
    """``tools`` with every REPL tool replaced by the same tool of a fresh fork of its REPL.

    Tools of one REPL share one fork; other tools are kept as they are. SelfReference forks give
    each child agent its own kernels this way.

    Returns:
        The new tools and the forked REPLs (unstarted; the caller closes them).
    """
    clones: dict[int, ReplBackend] = {}
    out: list[Tool] = []
    for tool in tools:
        if not isinstance(tool, ReplTool):
            out.append(tool)
            continue
        clone = clones.get(id(tool.repl))
        if clone is None:
            clone = clones[id(tool.repl)] = tool.repl.fork()
        out.append(next(t for t in clone.toolset if t.name == tool.name))
    return tuple(out), tuple(clones.values())


class ExecutionSummary(str):
    """What ``execute_code`` returns: the text summary of one execution (a ``str``, as in
    SimpleLLMFunc), with the full result dict in :attr:`result` and the images to attach.

    A string key reads the result dict (``summary["success"]``, ``summary.get("stdout")``,
    ``summary.keys()``), as code written for the dict shape of ``PyRepl.execute`` does; every
    other use is the text's.
    """

    result: dict[str, Any]
    images: tuple[ImgUrl | ImgPath, ...]

    @classmethod
    def of(cls, result: dict[str, Any]) -> ExecutionSummary:
        """The summary of a ``PyRepl.execute`` result dict."""
        rendered = render_execution(result)
        text, images = (rendered, []) if isinstance(rendered, str) else rendered
        summary = cls(text)
        summary.result = result
        summary.images = tuple(images)
        return summary

    @property
    def success(self) -> bool:
        """Whether the code ran to the end without raising."""
        return bool(self.result.get("success"))

    @overload
    def __getitem__(self, key: str) -> Any: ...
    @overload
    def __getitem__(self, key: SupportsIndex | slice) -> str: ...
    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return self.result[key]
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        """A value of the result dict."""
        return self.result.get(key, default)

    def keys(self) -> KeysView[str]:
        """The keys of the result dict."""
        return self.result.keys()


def _images(artifacts: list[dict[str, Any]]) -> tuple[list[ImgUrl | ImgPath], list[str]]:
    images: list[ImgUrl | ImgPath] = []
    problems = []
    for artifact in artifacts:
        detail = artifact.get("detail", "auto")
        try:
            if "data" in artifact:
                url = f"data:{artifact['mime_type']};base64,{artifact['data']}"
                images.append(ImgUrl(url.replace("\n", ""), detail))
            elif "path" in artifact:
                images.append(ImgPath(artifact["path"], detail))
            elif "url" in artifact:
                images.append(ImgUrl(artifact["url"], detail))
        except ContentError as exc:
            problems.append(str(exc))
    return images, problems


def render_execution(result: dict[str, Any]) -> str | tuple[str, list[ImgUrl | ImgPath]]:
    """Summarise an execution result for the model (text, or text and images)."""
    parts: list[str] = []
    if result.get("notice"):
        parts.append(f"Note: {result['notice']}")
    took = f"{result.get('execution_time_ms', 0):.0f} ms"
    parts.append(f"Execution {'succeeded' if result.get('success') else 'failed'} ({took}).")
    for key, title in (("stdout", "stdout"), ("stderr", "stderr")):
        text = result.get(key) or ""
        if text.strip():
            parts.append(f"[{title}]\n{text.rstrip()}")
    if result.get("return_value") is not None:
        parts.append(f"[return value]\n{result['return_value']}")
    if result.get("error"):
        parts.append(f"[error]\n{result['error']}")
        details = result.get("error_details") or {}
        trace = details.get("user_traceback")
        if trace and trace.count("\n  ") > 1:
            parts.append(f"[traceback]\n{trace}")
    images, problems = _images(result.get("artifacts") or [])
    for problem in problems:
        parts.append(f"[image not attached] {problem}")
    if images:
        parts.append(f"[images] {len(images)} image(s) attached below.")
    text = "\n".join(parts)
    return (text, images) if images else text
