"""The async ReAct engine: one public run API for every front end.

Build an :class:`Invocation` (model, tools, prompt, :class:`EngineOptions`, hooks) and a
``Transcript``, then iterate a :class:`Run` — both decorators do exactly that. Hooks
(:class:`RunHook`) plug into the loop and reach the running call through :class:`RunContext`.
"""

from .._lazy import publish
from ._approval import (
    APPROVAL_HELP,
    ApprovalDecision,
    ApprovalPolicy,
    Approver,
    answer_request,
    parse_answer,
    typed_decision,
)
from ._compile import (
    FINAL_ANSWER_INSTRUCTION,
    HIDDEN_OBSERVATION,
    compile_request,
    system_context,
)
from ._deferred import DeferredTool, answer_deferred, pending_calls
from ._emit import Emitter, current_tool_call_id, in_tool_call
from ._invocation import (
    Invocation,
    RunContext,
    RunHook,
    RunView,
    current_run,
    resolve_protocol,
)
from ._json_protocol import JSONProtocol
from ._llm_call import RawItem, TextChunk
from ._options import EngineOptions, IncompleteAnswerPolicy, ToolProtocol, split_options
from ._phases import SUMMARY_INSTRUCTION
from ._protocol import NativeProtocol, ToolCallProtocol
from ._pump import Finished, event_pump, pump_items, start_pump
from ._run import Run, RunItem, new_call_id
from ._scheduler import BatchResult, run_tool_batch
from ._state import RunResult, RunState
from ._steps import (
    STEP_REPLAYED,
    StepKind,
    StepRunner,
    StepSlot,
    current_step_runner,
    running_steps,
)
from ._termination import DEFAULT_SIGNALS, TerminationPolicy
from ._text_protocol import TextAction, TextProtocol, parse_reply, render_catalogue
from ._window import HistoryWindow, apply_window, split_turns

__all__ = [
    "APPROVAL_HELP",
    "DEFAULT_SIGNALS",
    "FINAL_ANSWER_INSTRUCTION",
    "HIDDEN_OBSERVATION",
    "STEP_REPLAYED",
    "SUMMARY_INSTRUCTION",
    "ApprovalDecision",
    "ApprovalPolicy",
    "Approver",
    "BatchResult",
    "DeferredTool",
    "Emitter",
    "EngineOptions",
    "Finished",
    "HistoryWindow",
    "IncompleteAnswerPolicy",
    "Invocation",
    "JSONProtocol",
    "NativeProtocol",
    "RawItem",
    "Run",
    "RunContext",
    "RunHook",
    "RunItem",
    "RunResult",
    "RunState",
    "RunView",
    "StepKind",
    "StepRunner",
    "StepSlot",
    "TerminationPolicy",
    "TextAction",
    "TextChunk",
    "TextProtocol",
    "ToolCallProtocol",
    "ToolProtocol",
    "answer_deferred",
    "answer_request",
    "apply_window",
    "compile_request",
    "current_run",
    "current_step_runner",
    "current_tool_call_id",
    "event_pump",
    "in_tool_call",
    "new_call_id",
    "parse_answer",
    "parse_reply",
    "pending_calls",
    "pump_items",
    "render_catalogue",
    "resolve_protocol",
    "run_tool_batch",
    "running_steps",
    "split_options",
    "split_turns",
    "start_pump",
    "system_context",
    "typed_decision",
]

publish(__name__, __all__)
