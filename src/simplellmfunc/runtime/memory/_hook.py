"""Agent memory in a run: :class:`MemoryHook` reads and writes a namespaced store.

What a run does with memory (the documented contract):

* **Before each LLM call** the newest items of the store (``recent`` of them) are rendered as a
  ``## Agent Memory`` section of the system message: a ``ContextReplaceMutation`` patches the
  transcript whenever the rendered section changed (on the first call, and after auto-saves).
  The section replaces any older copy, so a returned history fed back in never carries two.
* **After each tool batch** the auto-save strategies turn the batch (the assistant's text, each
  call and its result) into items and write them.
* **When a run answers** (``save_turns``), the strategies also see the turn: the user's input
  and the answer. This is what lets a later session recall what the user said in a turn that
  called no tool.

The hook holds no state between runs besides its configuration; one instance can serve many
concurrent calls (its per-call state is keyed by the agent call id).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from ..._messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolMessage,
    UserMessage,
    history_to_dicts,
)
from ..._mutations import ContextMutation, ContextReplaceMutation
from ...engine import RunHook, RunView
from ..stores import ScopedStore, StoreItem
from ._autosave import Action, AutoSave, Step, StepTriple

__all__ = ["MEMORY_HEADING", "MemoryHook", "render_memory", "strip_memory"]

MEMORY_HEADING = "## Agent Memory"
_INTRO = "Saved from earlier steps and conversations, newest first:"


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit} ago"
    return "just now"


def render_memory(
    items: Sequence[StoreItem],
    now: float,
    max_chars: int = 300,
    *,
    heading: str = MEMORY_HEADING,
    intro: str = _INTRO,
) -> str:
    """The memory section for ``items`` (empty when there are none).

    Each item is one line ``- [key] value (age)``; values longer than ``max_chars`` are cut.
    """
    lines = []
    for item in items:
        value = item.value if isinstance(item.value, str) else json.dumps(item.value)
        flat = " ".join(value.split())
        if len(flat) > max_chars:
            flat = flat[: max_chars - 1] + "…"
        lines.append(f"- [{item.key}] {flat} ({_age(item.age(now))})")
    return f"{heading}\n{intro}\n" + "\n".join(lines) if lines else ""


def strip_memory(text: str, heading: str = MEMORY_HEADING) -> str:
    """``text`` without its memory section (up to the next ``## `` heading, or the end)."""
    start = text.find(heading)
    if start < 0:
        return text
    end = text.find("\n## ", start + len(heading))
    head = text[:start].rstrip()
    tail = "" if end < 0 else text[end + 1 :]
    return f"{head}\n\n{tail}".strip() if head and tail else (head or tail).strip()


def _with_memory(text: str, section: str, heading: str = MEMORY_HEADING) -> str:
    base = strip_memory(text, heading)
    if not section:
        return base
    return f"{base}\n\n{section}" if base else section


def _text(message: Message) -> str:
    if isinstance(message, UserMessage | ToolMessage):
        return message.text
    return message.content or ""


class MemoryHook(RunHook):
    """Injects recent memory into each LLM call and auto-saves after tool batches and turns.

    Args:
        memory: The namespaced store of this agent and session.
        recent: How many of the newest items are shown to the model.
        auto_save: Strategies run after each tool batch (and turn); ``None`` means
            :class:`StepTriple`, ``()`` saves nothing.
        save_turns: Also run the strategies on each answered turn.
        max_chars: Longest value shown per item.
        heading: The section's heading (a ``## `` line; one section per heading).
        intro: The line under the heading.
    """

    def __init__(
        self,
        memory: ScopedStore,
        *,
        recent: int = 5,
        auto_save: AutoSave | Sequence[AutoSave] | None = None,
        save_turns: bool = True,
        max_chars: int = 300,
        heading: str = MEMORY_HEADING,
        intro: str = _INTRO,
    ) -> None:
        self.memory = memory
        self.heading = heading
        self.intro = intro
        self.recent = recent
        if auto_save is None:
            auto_save = StepTriple()
        self.auto_save = (auto_save,) if isinstance(auto_save, AutoSave) else tuple(auto_save)
        self.save_turns = save_turns
        self.max_chars = max_chars
        self._inputs: dict[str, str] = {}  # per agent call: the user's input

    async def before_llm_call(self, run: RunView) -> Sequence[ContextMutation]:
        """Patch the system message when its memory section is not the current one.

        The check looks at the transcript itself, so a section that another hook's
        ``ContextReplaceMutation`` dropped is put back.
        """
        call = run.agent_call_id
        if call not in self._inputs:
            self._inputs[call] = _user_input(run.transcript.messages)
        items = await self.memory.items(self.recent) if self.recent > 0 else []
        section = render_memory(
            items, self.memory.now(), self.max_chars, heading=self.heading, intro=self.intro
        )
        messages = list(run.transcript.messages)
        if messages and isinstance(messages[0], SystemMessage):
            first = messages[0]
            patched = _with_memory(first.content, section, self.heading)
            if patched == first.content:
                return ()
            messages[0] = SystemMessage(patched, first.extra)
        elif section:
            system = _with_memory(run.invocation.system_prompt, section, self.heading)
            messages.insert(0, SystemMessage(system))
        else:
            return ()
        return [ContextReplaceMutation(history_to_dicts(messages))]

    async def after_tool_batch(self, run: RunView) -> Sequence[ContextMutation]:
        """Auto-save the batch that just ran."""
        step = _batch_step(run)
        if step is not None:
            await self._save(step)
        return ()

    async def on_end(self, run: RunView) -> None:
        """Auto-save the turn when the run answered; forget the call's state."""
        call = run.agent_call_id
        user_input = self._inputs.pop(call, "")
        messages = run.transcript.messages
        last = messages[-1] if messages else None
        answered = (
            isinstance(last, AssistantMessage)
            and not last.tool_calls
            and not last.extra.get("truncated")
        )
        if self.save_turns and answered and isinstance(last, AssistantMessage):
            await self._save(
                Step("turn", call, run.iteration, user_input, answer=last.content or "")
            )

    async def _save(self, step: Step) -> None:
        for strategy in self.auto_save:
            for key, value in await strategy.extract(step):
                await self.memory.set(key, value)


def _user_input(messages: Sequence[Message]) -> str:
    for message in reversed(messages):
        if isinstance(message, UserMessage):
            return message.text
    return ""


def _batch_step(run: RunView) -> Step | None:
    """The last assistant turn with tool calls and the results that answer it."""
    messages = run.transcript.messages
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, AssistantMessage) and message.tool_calls:
            results: dict[str, str] = {
                m.tool_call_id: m.text for m in messages[index + 1 :] if isinstance(m, ToolMessage)
            }
            actions = tuple(
                Action(c.name, c.arguments, results.get(c.id, "")) for c in message.tool_calls
            )
            return Step("tool_batch", run.agent_call_id, run.iteration, _text(message), actions)
    return None
