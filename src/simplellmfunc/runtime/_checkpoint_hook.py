"""CheckpointHook: an agent saves a checkpoint every N tool batches, and can resume from it.

After every ``every``-th iteration that ran tools, the hook captures the working transcript (all
tool calls answered, so the history is valid for the next provider call), the memory, the
SelfReference state and the trace, and saves them with a :class:`~._checkpoints.CheckpointManager`.
To resume, pass ``checkpoint.history`` as the ``history`` of a new ``@llm_chat`` call, or build a
``Transcript`` from :meth:`~._checkpoint.Checkpoint.messages` and run the engine on it: the next
LLM call then continues right after the saved tool results.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .._messages import UserMessage
from .._mutations import ContextMutation
from ..engine._invocation import RunHook, RunView
from ..exceptions import ConfigError
from ._checkpoint import Checkpoint
from ._checkpoints import CheckpointInfo, CheckpointManager
from ._stores import ScopedStore
from ._trace import TraceRecorder

if TYPE_CHECKING:
    from ..builtin import SelfReference

__all__ = ["CheckpointHook"]


class CheckpointHook(RunHook):
    """Saves a checkpoint after every ``every``-th iteration with tool calls.

    Args:
        manager: Where checkpoints go.
        every: Save after iterations ``every``, ``2 * every``, … (counted per run).
        memory: The agent's memory, saved along.
        self_reference: A SelfReference whose state is saved along.
        recorder: A trace recorder whose records and totals are saved along.

    Raises:
        ConfigError: If ``every`` is less than 1.
    """

    def __init__(
        self,
        manager: CheckpointManager,
        *,
        every: int = 1,
        memory: ScopedStore | None = None,
        self_reference: SelfReference | None = None,
        recorder: TraceRecorder | None = None,
    ) -> None:
        if every < 1:
            raise ConfigError(f"checkpoint interval must be at least 1, got {every}")
        self.manager = manager
        self.every = every
        self.memory = memory
        self.self_reference = self_reference
        self.recorder = recorder
        self.saved: list[CheckpointInfo] = []

    async def after_tool_batch(self, run: RunView) -> Sequence[ContextMutation]:
        """Save a checkpoint when the iteration is due."""
        if run.iteration % self.every == 0:
            checkpoint = await Checkpoint.capture(
                history=run.transcript.to_dicts(),
                memory=self.memory,
                self_reference=self.self_reference,
                recorder=self.recorder,
                last_input=_last_user_text(run),
                counters={"iteration": run.iteration},
                description=f"after iteration {run.iteration}",
                metadata={"agent_call_id": run.agent_call_id},
            )
            self.saved.append(await self.manager.save(checkpoint))
        return ()


def _last_user_text(run: RunView) -> str:
    for message in reversed(run.transcript.messages):
        if isinstance(message, UserMessage):
            return message.text
    return ""
