"""``@tool``: a function as a tool (plain, or sandboxed with ``sandbox=policy``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, overload

from ..sandbox import SandboxPolicy
from ._sandboxed import SandboxedTool
from ._tool import ApprovalFlag, FunctionTool, PromptInjectionBuilder

__all__ = ["tool"]


@overload
def tool(func: Callable[..., object], /) -> FunctionTool: ...


@overload
def tool(
    func: None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    best_practices: Sequence[str] = (),
    prompt_injection_builder: PromptInjectionBuilder | None = None,
    too_long_to_file: bool = False,
    timeout: float | None = None,
    result_budget: int | None = None,
    abort_grace: float = 0.0,
    idempotent: bool = True,
    requires_approval: ApprovalFlag = False,
    sandbox: SandboxPolicy | None = None,
) -> Callable[[Callable[..., object]], FunctionTool]: ...


def tool(
    func: Callable[..., object] | None = None,
    /,
    **options: Any,
) -> FunctionTool | Callable[[Callable[..., object]], FunctionTool]:
    """Turn a function into a tool; bare (``@tool``) or with options (``@tool(name=...)``).

    Async functions are awaited; sync functions run in a worker thread. The schema comes from
    the signature (pydantic), the description from the docstring, parameter descriptions from its
    ``Args:`` block. Parameters named ``event_emitter`` / ``abort_signal`` / ``context`` (or typed
    ``ToolEventEmitter`` / ``AbortSignal`` / ``ToolContext``) are injected, never shown to models.
    With ``sandbox=policy`` the tool is a :class:`~simplellmfunc.tools.SandboxedTool`: each call
    runs in a sandboxed worker process (see ``docs/sandbox.md``).

    Raises:
        ToolDefinitionError: For an invalid name or an unsupported signature.
    """
    policy = options.pop("sandbox", None)
    if policy is not None:

        def make(f: Callable[..., object]) -> FunctionTool:
            return SandboxedTool(f, policy, **options)

    else:

        def make(f: Callable[..., object]) -> FunctionTool:
            return FunctionTool(f, **options)

    return make(func) if func is not None else make
