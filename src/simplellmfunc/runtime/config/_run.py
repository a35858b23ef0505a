"""``run_config``: build an agent from its config file and run it once.

::

    result = await run_config("agent.yml", "compute 1+2+...+100", max_steps=5)
    print(result.result)
    print(result.timeline())

The command line's ``simplellmfunc run`` is a thin layer over this function.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..._abort import AbortSignal
from ..trace import TraceRecord, TraceRecorder, TraceStats, timeline
from ._agent import ConfiguredAgent, RunObserver, TurnResult
from ._load import load_agent_config

__all__ = ["ConfigRunResult", "run_config"]


@dataclass(frozen=True, slots=True)
class ConfigRunResult:
    """What a config run produced.

    Attributes:
        result: The answer (partial when the run was aborted).
        trace: One record per LLM call, tool call and run end.
        stats: The trace's totals.
        history: The conversation (chat dicts), valid for a next call.
        terminated_by: Why the run ended (``answer``, ``max_steps``, ``aborted`` ...).
    """

    result: str
    trace: tuple[TraceRecord, ...]
    stats: TraceStats
    history: list[dict[str, Any]]
    terminated_by: str = "answer"

    @classmethod
    def from_turn(cls, turn: TurnResult, recorder: TraceRecorder) -> ConfigRunResult:
        """The result of ``turn``, with the trace ``recorder`` holds."""
        return cls(turn.text, recorder.records, recorder.stats(), turn.history, turn.terminated_by)

    @property
    def aborted(self) -> bool:
        """Whether an abort ended the run."""
        return self.terminated_by == "aborted"

    def timeline(self, *, width: int = 80) -> str:
        """The step timeline."""
        return timeline(self.trace, width=width)

    def to_dict(self) -> dict[str, Any]:
        """``{"result", "terminated_by", "stats", "trace", "history"}``, JSON-ready."""
        return {
            "result": self.result,
            "terminated_by": self.terminated_by,
            "stats": self.stats.to_dict(),
            "trace": [record.to_dict() for record in self.trace],
            "history": self.history,
        }


async def run_config(
    path: str | Path,
    input: str,
    *,
    abort: AbortSignal | None = None,
    observer: RunObserver | None = None,
    environ: Mapping[str, str] | None = None,
    **overrides: object,
) -> ConfigRunResult:
    """Load the agent config at ``path``, open the agent, run it once on ``input``, close it.

    Args:
        path: The agent config file.
        input: The user's input.
        abort: Aborts the run (the result then holds the partial answer and trace).
        observer: Sees every event while the run goes (streamed text, tool calls).
        environ: Variables to read instead of ``os.environ`` (settings and keys).
        **overrides: Settings over the file and the environment: a section as a mapping, or
            ``max_steps``, ``tool_timeout``, ``trace_file``, ``timeline``, ``session``, ``model``,
            ``tools={"name": "command"}``, ``set=["key.path=value"]``.

    Raises:
        ConfigError: For a bad config (every problem, with key and line) or a store or model
            that cannot be used.
        ProviderError: When the model fails after retries.
        MCPError: When an MCP server cannot be started.
    """
    config = load_agent_config(path, overrides=overrides, environ=environ)
    async with ConfiguredAgent(config, environ=environ) as agent:
        turn = await agent.run(input, abort=abort, observer=observer)
        return ConfigRunResult.from_turn(turn, agent.recorder)
