"""The async ReAct engine: request compilation, the loop, the tool-batch scheduler."""

from ._compile import FINAL_ANSWER_INSTRUCTION, compile_request, system_context
from ._emit import Emitter
from ._invocation import Invocation, RunHook, RunView
from ._loop import ReactRun, run_react
from ._run_context import RunContext
from ._scheduler import BatchResult, run_tool_batch
from ._state import RunResult, RunState
from ._termination import DEFAULT_SIGNALS, TerminationPolicy
from ._window import HistoryWindow

__all__ = [
    "DEFAULT_SIGNALS",
    "FINAL_ANSWER_INSTRUCTION",
    "BatchResult",
    "Emitter",
    "HistoryWindow",
    "Invocation",
    "ReactRun",
    "RunContext",
    "RunHook",
    "RunResult",
    "RunState",
    "RunView",
    "TerminationPolicy",
    "compile_request",
    "run_react",
    "run_tool_batch",
    "system_context",
]
