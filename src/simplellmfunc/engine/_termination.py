"""When a run stops (seed 001 §5): explicit, implicit signals, and the step cap.

1. Explicit: no tool calls in native mode; a ``terminate`` action in text mode.
2. Implicit: the reply contains one of ``signals`` ("Final Answer:", "任务完成", ...). On by
   default only with the text protocol, where a model may announce its answer and still emit
   an action; with native tools a reply without calls already is the answer.
3. The step cap (``max_tool_calls``): one extra call without tools extracts the best answer; if
   that fails, the last assistant text is returned.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_SIGNALS", "TerminationPolicy"]

DEFAULT_SIGNALS: tuple[str, ...] = (
    "final answer:",
    "task complete",
    "task is done",
    "i have completed",
    "here is the result:",
    "in conclusion,",
    "最终答案",
    "任务完成",
    "任务已完成",
    "答案是：",
)


@dataclass(frozen=True, slots=True)
class TerminationPolicy:
    """How a run decides it is done.

    Args:
        signals: Implicit termination phrases (matched case-insensitively).
        implicit: Use implicit signals: ``True``/``False``, or ``None`` for "only with the
            text tool protocol".
    """

    signals: tuple[str, ...] = DEFAULT_SIGNALS
    implicit: bool | None = None

    def implicit_stop(self, text: str | None, *, text_protocol: bool) -> bool:
        """Whether ``text`` carries an implicit termination signal that applies here."""
        enabled = text_protocol if self.implicit is None else self.implicit
        if not enabled or not text:
            return False
        lowered = text.lower()
        return any(signal in lowered for signal in self.signals)
