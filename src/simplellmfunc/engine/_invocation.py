"""What a call asks of the engine, and what run hooks see of the running call.

* :class:`Invocation`: everything the engine needs besides the transcript (model, tools, prompt,
  :class:`~._options.EngineOptions`, hooks). Built by the decorators, frozen.
* :class:`RunContext`: the running call as one object — its invocation, state, emitter, abort
  signal and (when the run is driven to the end) a task group for background work. The loop's
  phases take it; hooks reach it through :attr:`RunView.context`.
* :class:`RunHook` / :class:`RunView`: how SelfReference, memory and checkpoints plug in.

They live in one module because they refer to each other (an invocation holds hooks, a hook sees
the invocation): one module instead of an import circle.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from .._abort import AbortSignal, PauseSignal
from .._events import EventOrigin
from .._mutations import ContextMutation
from .._transcript import Transcript
from .._usage import Usage
from ..exceptions import ToolDefinitionError, UserError
from ..providers import LLMInterface, ResponseFormat
from ..tools import Tool
from ._emit import Emitter
from ._json_protocol import JSONProtocol
from ._options import EngineOptions
from ._protocol import NativeProtocol, ToolCallProtocol
from ._state import RunState
from ._steps import StepRunner
from ._text_protocol import TextProtocol

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

__all__ = [
    "Invocation",
    "RunContext",
    "RunHook",
    "RunView",
    "current_run",
    "resolve_protocol",
    "running_tools",
]

_PROTOCOLS: Mapping[str, ToolCallProtocol] = {
    p.name: p for p in (NativeProtocol(), TextProtocol(), JSONProtocol())
}


def resolve_protocol(
    options: EngineOptions, llm: LLMInterface, tools: Sequence[Tool]
) -> ToolCallProtocol:
    """The protocol object of a run: ``options.tool_protocol``, with ``"auto"`` meaning native
    when the provider has native tools, else json when it has ``json_schema`` (and the run has
    tools), else text. The JSON protocol needs tools: without any, a run is native.
    """
    name: str = options.tool_protocol
    if name == "auto":
        caps = llm.capabilities
        schema = "json" if caps.json_schema and tools else "text"
        name = "native" if caps.native_tools else schema
    if name == "json" and not tools:
        name = "native"
    return _PROTOCOLS[name]


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
            so the run must be driven to the end by the engine, which gives it a task group;
            the run then goes in a task of its own even when the caller wants no events.
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
        options: How the run behaves (tool cap, timeouts, tool protocol, termination, window).
        response_format: Structured output via the provider's json_schema mode.
        output_contract: A JSON output contract for the system prompt (when no native mode).
        params: Extra body params for every LLM call.
        hooks: Run hooks (SelfReference ...).
        tool_choice: Passed to the provider when tools are present.
        session_id: Label tying several calls of one conversation together.
        answer_check: Checks a final answer (the output contract of ``@llm_function``):
            ``None`` when it is usable, else the message that asks the model to redo it.
        max_repairs: How many times a rejected answer is sent back within the run.
        func_name: The decorated function's name (stamped on every event).
        protocol: How tools are called in this run (resolved from the options, the provider's
            capabilities and the tools; see :func:`resolve_protocol`).
    """

    llm: LLMInterface
    system_prompt: str = ""
    tools: tuple[Tool, ...] = ()
    stream: bool = False
    options: EngineOptions = field(default_factory=EngineOptions)
    response_format: ResponseFormat | None = None
    output_contract: str = ""
    params: Mapping[str, Any] = field(default_factory=dict, hash=False)
    hooks: tuple[RunHook, ...] = ()
    tool_choice: str | None = None
    session_id: str = ""
    fork_id: str | None = None
    fork_depth: int = 0
    parent_call_id: str | None = None
    func_name: str = ""
    answer_check: Callable[[str], str | None] | None = None
    max_repairs: int = 0
    protocol: ToolCallProtocol = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        # Resolved once per invocation (``replace`` re-runs this: added tools count).
        protocol = resolve_protocol(self.options, self.llm, self.tools)
        object.__setattr__(self, "protocol", protocol)

    def tool_named(self, name: str) -> Tool | None:
        """The tool called ``name``, if any."""
        for candidate in self.tools:
            if candidate.name == name:
                return candidate
        return None


class RunContext:
    """One running call: its invocation, state, emitter and abort signal, as one object.

    The loop's phases take it instead of the four separately. Hooks get it through
    :attr:`RunView.context` for background tasks, events, abort and the usage total.

    Args:
        invocation: The call's configuration.
        state: The run's mutable state.
        emitter: Where events and items go.
        abort: The call's abort signal, if any.
        pause: The call's pause signal, if any (checked before each LLM call).
        steps: Runs LLM and tool calls as recorded steps (a durable run), if any.
    """

    __slots__ = (
        "_tasks",
        "abort",
        "approvals",
        "emitter",
        "invocation",
        "pause",
        "state",
        "steps",
    )

    def __init__(
        self,
        invocation: Invocation,
        state: RunState,
        emitter: Emitter,
        abort: AbortSignal | None,
        pause: PauseSignal | None = None,
        steps: StepRunner | None = None,
    ) -> None:
        self.invocation = invocation
        self.steps = steps
        self.state = state
        self.emitter = emitter
        self.abort = abort
        self.pause = pause
        self._tasks: TaskGroup | None = None
        # Pending approval waits by call id (engine/_approval.py; answered by Run.answer).
        self.approvals: dict[str, Any] = {}

    @property
    def origin(self) -> EventOrigin:
        """The event origin of the run (its agent call id, fork id and depth)."""
        return self.emitter.origin

    @property
    def usage(self) -> Usage:
        """Usage of the run so far (background work reported with :meth:`add_usage` included)."""
        return self.state.usage

    @property
    def task_group(self) -> TaskGroup | None:
        """The run's task group; ``None`` when the run is stepped by its caller (no task)."""
        return self._tasks

    def view(self) -> RunView:
        """What hooks see of the run now."""
        state = self.state
        return RunView(
            state.transcript, state.iteration, self.emitter.agent_call_id, self.invocation, self
        )

    def aborted(self) -> bool:
        """Whether the run was aborted (recording it in the state if so)."""
        abort = self.abort
        if abort is not None and abort.aborted:
            self.state.terminated_by = "aborted"
            self.state.abort_reason = abort.reason
            return True
        return False

    def paused(self) -> bool:
        """Whether the run was asked to pause (recording it in the state if so)."""
        if self.pause is not None and self.pause.paused:
            self.state.terminated_by = "paused"
            return True
        return False

    def add_usage(self, usage: Usage) -> None:
        """Add ``usage`` of background work (a fork's LLM calls) to the run's total."""
        self.state.usage = self.state.usage + usage

    def start_soon(
        self, func: Callable[..., Coroutine[Any, Any, Any]], *args: Any, name: str | None = None
    ) -> None:
        """Start ``func(*args)`` in the run's task group; it is cancelled if the run ends first.

        Raises:
            UserError: If the run has no task group (it is stepped by its caller instead of
                being driven to the end by the engine).
        """
        if self._tasks is None:
            raise UserError(
                "this run has no task group for background work: drive it to the end with "
                "Run.run_to_end (a run stepped with Run.step has none)"
            )
        self._tasks.start_soon(func, *args, name=name)

    def add_tools(self, tools: Sequence[Tool]) -> None:
        """Make ``tools`` callable from the next LLM call of this run on (skills enable theirs).

        A tool already in the run (the same object) is skipped.

        Raises:
            ToolDefinitionError: If another tool of the run has the same name.
        """
        current = {t.name: t for t in self.invocation.tools}
        added: list[Tool] = []
        for candidate in tools:
            known = current.get(candidate.name)
            if known is candidate:
                continue
            if known is not None:
                raise ToolDefinitionError(f"two tools are named {candidate.name!r}")
            current[candidate.name] = candidate
            added.append(candidate)
        if added:
            self.invocation = replace(self.invocation, tools=self.invocation.tools + tuple(added))

    def bind(self, tasks: TaskGroup | None) -> None:
        """Set (or clear) the run's task group; called by the loop."""
        self._tasks = tasks


_CURRENT_RUN: ContextVar[RunContext | None] = ContextVar("simplellmfunc_current_run", default=None)


def current_run() -> RunContext | None:
    """The run whose tool batch is running in this task, ``None`` outside a tool call.

    Tools that start runs of their own (an agent used as a tool) make them child runs of this
    one: their events go into its stream, their usage into its total, its abort stops them.
    """
    return _CURRENT_RUN.get()


def running_tools(run: RunContext) -> Callable[[], None]:
    """Mark ``run`` as the current run while its tools run; returns the undo (the scheduler's)."""
    token = _CURRENT_RUN.set(run)
    return lambda: _CURRENT_RUN.reset(token)
