"""Auto-save strategies: what agent memory keeps from each step.

A :class:`Step` is what memory may learn from: a finished tool batch (the assistant's text with
its calls and what each returned: a thought, an action and an observation) or a finished turn
(the user's input and the answer). A strategy turns a step into ``(key, value)`` items:

* :class:`StepTriple` (the default, the most reliable): one short ``[action] observation`` line
  per tool call, and one ``user … | answer …`` line per turn;
* :class:`KeyValueExtraction`: ``name = value`` lines found in observations, inputs and answers,
  stored under ``name`` (a later value of the same name replaces the earlier one);
* :class:`LLMSummary`: one extra model call that states the facts worth keeping (nothing is
  stored when the model answers ``NONE``).
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..._messages import SystemMessage, UserMessage
from ...providers import LLMInterface, LLMRequest

__all__ = ["Action", "AutoSave", "KeyValueExtraction", "LLMSummary", "Step", "StepTriple"]


@dataclass(frozen=True, slots=True)
class Action:
    """One tool call of a batch and what it returned."""

    tool: str
    arguments: str
    observation: str


@dataclass(frozen=True, slots=True)
class Step:
    """A unit memory may learn from.

    Attributes:
        kind: ``"tool_batch"`` after a batch of tool calls, ``"turn"`` when a run answered.
        run_id: The agent call the step belongs to.
        iteration: The iteration of the batch (of the answer, for a turn).
        thought: The assistant's text sent with the calls; for a turn, the user's input.
        actions: The calls of the batch, in order (empty for a turn).
        answer: The final answer of a turn (empty for a batch).
    """

    kind: Literal["tool_batch", "turn"]
    run_id: str
    iteration: int
    thought: str = ""
    actions: tuple[Action, ...] = ()
    answer: str = ""


class AutoSave(ABC):
    """Turns a :class:`Step` into memory items."""

    @abstractmethod
    async def extract(self, step: Step) -> Sequence[tuple[str, Any]]:
        """The ``(key, value)`` items to store for ``step`` (values must be JSON values).

        Raises:
            RunError: If extraction needs a model call and it fails.
        """


def _short(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


class StepTriple(AutoSave):
    """One ``[tool(arguments)] observation`` line per call; ``user … | answer …`` per turn.

    Args:
        max_chars: Longest observation, input or answer kept.
    """

    def __init__(self, max_chars: int = 200) -> None:
        self.max_chars = max_chars

    async def extract(self, step: Step) -> Sequence[tuple[str, Any]]:
        """See :class:`AutoSave`."""
        n = self.max_chars
        if step.kind == "turn":
            line = f"user: {_short(step.thought, n)} | answer: {_short(step.answer, n)}"
            return [(f"turn.{step.run_id}", line)]
        return [
            (
                f"step.{step.run_id}.{step.iteration}.{i}",
                f"[{a.tool}({_short(a.arguments, 80)})] {_short(a.observation, n)}",
            )
            for i, a in enumerate(step.actions)
        ]


_KEY_VALUE = re.compile(r"^[ \t]*([A-Za-z_][\w.\-]{0,63})[ \t]*=[ \t]*(\S[^\n]*?)[ \t]*$", re.M)


class KeyValueExtraction(AutoSave):
    """``name = value`` lines, stored under ``name`` (regex configurable).

    Args:
        pattern: A regex with two groups, name and value (default: one assignment per line).
        max_items: Most items kept from one step.
        max_chars: Longest value kept.
    """

    def __init__(
        self,
        pattern: str | re.Pattern[str] | None = None,
        max_items: int = 20,
        max_chars: int = 200,
    ) -> None:
        self.pattern = _KEY_VALUE if pattern is None else re.compile(pattern, re.M)
        self.max_items = max_items
        self.max_chars = max_chars

    async def extract(self, step: Step) -> Sequence[tuple[str, Any]]:
        """See :class:`AutoSave`."""
        texts = (
            [step.thought, step.answer]
            if step.kind == "turn"
            else [a.observation for a in step.actions]
        )
        found: dict[str, Any] = {}
        for text in texts:
            for match in self.pattern.finditer(text):
                found[match.group(1)] = _short(match.group(2), self.max_chars)
        return list(found.items())[: self.max_items]


FACTS_INSTRUCTION = (
    "You maintain the long-term memory of an assistant. From the step below, state the facts "
    "worth remembering for later conversations (user preferences, names, decisions, results), "
    "one short line each. Answer exactly NONE when there is nothing worth keeping."
)


def _render_step(step: Step, limit: int) -> str:
    if step.kind == "turn":
        return f"User: {_short(step.thought, limit)}\nAssistant: {_short(step.answer, limit)}"
    lines = [f"Assistant: {_short(step.thought, limit)}"] if step.thought else []
    for a in step.actions:
        lines.append(f"Tool {a.tool}({_short(a.arguments, 200)}) returned: ")
        lines[-1] += _short(a.observation, limit)
    return "\n".join(lines)


class LLMSummary(AutoSave):
    """Ask a model for the facts worth keeping from each step (one extra call per step).

    Args:
        llm: The model to ask (a small, cheap one is enough).
        instruction: The system prompt of the summary call.
        max_chars: Longest text of the step sent, and of the summary kept.
    """

    def __init__(
        self, llm: LLMInterface, instruction: str = FACTS_INSTRUCTION, max_chars: int = 2000
    ) -> None:
        self.llm = llm
        self.instruction = instruction
        self.max_chars = max_chars

    async def extract(self, step: Step) -> Sequence[tuple[str, Any]]:
        """See :class:`AutoSave`.

        Raises:
            ProviderError: If the summary call fails.
        """
        request = LLMRequest(
            (SystemMessage(self.instruction), UserMessage(_render_step(step, self.max_chars)))
        )
        reply = (await self.llm.complete(request)).text.strip()
        if not reply or reply.upper().rstrip(".") == "NONE":
            return []
        return [(f"summary.{step.run_id}.{step.iteration}", reply[: self.max_chars])]
