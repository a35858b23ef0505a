"""What one decorated call asks the engine to do: the invocation config and run hooks."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ..providers._base import LLMInterface, ResponseFormat
from ._termination import TerminationPolicy
from ._window import HistoryWindow

if TYPE_CHECKING:
    from .._mutations import ContextMutation
    from .._transcript import Transcript
    from ..tools._tool import Tool
    from ._run_context import RunContext

__all__ = ["Invocation", "RunHook", "RunView"]


@dataclass(frozen=True, slots=True)
class RunView:
    """What a hook may read about the running call.

    ``context`` gives access to the run's task group, emitter, abort signal and usage total
    (``None`` only for views built outside a run).
    """

    transcript: Transcript
    iteration: int
    agent_call_id: str
    invocation: Invocation
    context: RunContext | None = None


class RunHook:
    """Contributes context mutations at fixed points of the loop (override what you need).

    SelfReference implements this to seed memory, inject experiences and merge memory edits.

    Attributes:
        needs_task_group: The hook starts background work through ``RunView.context`` (forks),
            so the run must be driven by ``run_react``, which gives it a task group; decorators
            then run it in a task of its own even when the caller wants no events.
    """

    needs_task_group: bool = False

    async def before_llm_call(self, run: RunView) -> Sequence[ContextMutation]:
        """Mutations to apply before each LLM call (the seed's "hook" phase)."""
        return ()

    async def after_tool_batch(self, run: RunView) -> Sequence[ContextMutation]:
        """Mutations to apply after each tool batch."""
        return ()

    async def on_end(self, run: RunView) -> None:
        """Called once when the run ends, successfully or not."""


@dataclass(frozen=True, slots=True)
class Invocation:
    """Everything the engine needs besides the transcript.

    Attributes:
        llm: The model interface.
        system_prompt: The system prompt (docstring with template params filled).
        tools: The tools of this run, resolved from the toolkit.
        stream: Stream LLM calls (text deltas as events).
        max_tool_calls: Cap on iterations with tool calls (``None``: no cap).
        tool_timeout: Default per-tool timeout in seconds.
        max_tool_concurrency: Cap on concurrently running tools of one batch.
        response_format: Structured output via the provider's json_schema mode.
        output_contract: A JSON output contract for the system prompt (when no native mode).
        params: Extra body params for every LLM call.
        hooks: Run hooks (SelfReference ...).
        tool_result_budget: Max tokens of one tool result shown to the model.
        tool_choice: Passed to the provider when tools are present.
        tool_protocol: ``"native"`` function calling or ``"text"`` (prompted) tool calls;
            decorators resolve ``"auto"`` from ``llm.capabilities.native_tools``.
        termination: Implicit termination signals and when they apply.
        history_window: What part of a long transcript is sent (``None``: all of it).
        keyword_heuristic: In text mode, also guess calls from "use the X tool" prose.
        session_id: Label tying several calls of one conversation together.
        answer_check: Checks a final answer (the output contract of ``@llm_function``):
            ``None`` when it is usable, else the message that asks the model to redo it.
        max_repairs: How many times a rejected answer is sent back within the run.
    """

    llm: LLMInterface
    system_prompt: str = ""
    tools: tuple[Tool, ...] = ()
    stream: bool = False
    max_tool_calls: int | None = None
    tool_timeout: float | None = None
    max_tool_concurrency: int | None = None
    response_format: ResponseFormat | None = None
    output_contract: str = ""
    params: Mapping[str, Any] = field(default_factory=dict, hash=False)
    hooks: tuple[RunHook, ...] = ()
    tool_result_budget: int = 8000
    tool_choice: str | None = None
    tool_protocol: Literal["native", "text"] = "native"
    session_id: str = ""
    fork_id: str | None = None
    fork_depth: int = 0
    parent_call_id: str | None = None
    answer_check: Callable[[str], str | None] | None = None
    max_repairs: int = 0
    termination: TerminationPolicy = field(default_factory=TerminationPolicy)
    history_window: HistoryWindow | None = None
    keyword_heuristic: bool = False

    @property
    def text_protocol(self) -> bool:
        """Whether tool calls go through the text protocol instead of native tools."""
        return self.tool_protocol == "text"

    def tool_named(self, name: str) -> Tool | None:
        """The tool called ``name``, if any."""
        for candidate in self.tools:
            if candidate.name == name:
                return candidate
        return None
