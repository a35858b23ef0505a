"""The run hook that binds an ``@llm_chat`` turn to a SelfReference memory key.

What a turn does with memory (the documented contract):

* **Start** (first ``before_llm_call``): the conversation is the caller's ``history`` when it has
  messages besides the system prompt, otherwise the history stored under the key. The system
  prompt is the stored one when the key has one (so ``set/append_system_prompt`` persist), else
  the decorator's. The memory contract is appended to it once (any older copy, recognised by its
  heading, is removed first). Stored experiences are replayed into the transcript with their ids.
  The resulting conversation (user message included) is written to the key before any tool runs,
  so an empty key is seeded with the system prompt.
* **During the turn**: memory edits are recorded as pending edits and become ContextMutations at
  the next hook point (after the tool batch): ``ExperienceRemember/Forget`` for experiences,
  ``ContextSummaryMutation`` for compaction, then one ``ContextReplaceMutation`` carrying the
  edited stored history plus the turn's messages since the last sync (after a compaction those
  are dropped: the summary replaces them). After every tool batch the transcript is written back.
* **Forks**: the turn is set as the active turn of its run's task, so primitives called from its
  tool calls act on its key and spawn its forks (``_forks``). At the end, forks still
  running are cancelled and waited for before anything else, so their usage is in the total.
* **End** (``on_end``): the final transcript is written to the key, so the returned history and
  the stored one agree. Edits made in a batch that an abort cut short reach the store, not the
  returned history.

The stored system prompt never contains the contract; the transcript's (and the returned
history's) does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from contextvars import Token
from typing import Any

import anyio.to_thread

from ..._messages import (
    Message,
    SystemMessage,
    history_from_dicts,
    history_to_dicts,
    message_from_dict,
)
from ..._mutations import (
    ContextMutation,
    ContextReplaceMutation,
    ExperienceForgetMutation,
    ExperienceRememberMutation,
)
from ...engine import RunHook, RunView
from ...exceptions import InvalidHistoryError
from ._bank import MemoryBank
from ._child import ParentRun
from ._forks import ForkManager
from ._store import KeyState
from ._turn import ACTIVE_TURN, Turn

__all__ = ["CONTRACT_HEADING", "SelfReferenceHook", "memory_contract", "strip_contract"]

CONTRACT_HEADING = "## SelfReference Memory Contract"


def memory_contract(key: str) -> str:
    """The text appended to the system prompt of a turn bound to ``key``."""
    mem = f'self_reference.memory["{key}"]'
    return f"""{CONTRACT_HEADING}
Your conversation memory is stored under the key "{key}". Inside `execute_code`, `{mem}` edits it:
- Read: `count()`, `all()`, `get(index)`, `get_system_prompt()`.
- Write: `append(message)`, `insert(index, message)`, `update(index, message)`, `delete(index)`, \
`replace(messages)`, `clear()`, `set_system_prompt(text)`, `append_system_prompt(text)`. Messages \
are chat dicts such as {{"role": "user", "content": "..."}}; every write is validated.
- Keep durable user preferences in the system prompt with `append_system_prompt(text)`.
- Durable facts: `runtime.selfref.context.remember(text)` returns {{"id", "text"}} and the fact \
is shown under "## Experiences"; `runtime.selfref.context.forget(id)` removes it; \
`runtime.selfref.context.inspect()` gives an overview of your memory.
- When the context grows long, call `runtime.selfref.context.compact(goal=..., instruction=..., \
discoveries=[...], completed=[...], current_status=..., likely_next_work=..., \
relevant_files_directories=[...], remember=[...])`: the conversation is replaced by that summary \
and the system prompt is kept.
- Parallel subtasks: `runtime.selfref.fork.spawn(task, instruction)` starts a fork, a child \
agent that sees this conversation up to the current tool call plus the task, runs concurrently \
with its own fresh Python REPL, and returns {{"fork_id", "status"}}; \
`runtime.selfref.fork.gather_all(include_history=False)` waits for every fork and returns \
{{fork_id: {{"status", "response", "result", "error", "usage", ...}}}} (check `status` first: \
completed, failed or cancelled). Forks still running when you give your final answer are \
cancelled; forks cannot nest deeper than the configured depth.
- Edits reach your context when the current tool call has finished. `reset_repl` clears Python \
variables only and never touches memory; forget explicitly with `delete`, `replace`, `clear` or \
`forget`."""


def strip_contract(text: str) -> str:
    """``text`` without the memory contract (everything from its heading on)."""
    at = text.find(CONTRACT_HEADING)
    return text if at < 0 else text[:at].rstrip()


def _with_contract(text: str, key: str) -> str:
    base = strip_contract(text)
    return f"{base}\n\n{memory_contract(key)}" if base else memory_contract(key)


def _for_store(messages: Sequence[Message]) -> list[dict[str, Any]]:
    dicts = history_to_dicts(messages)
    if dicts and dicts[0].get("role") == "system":
        dicts[0]["content"] = strip_contract(str(dicts[0].get("content") or ""))
    return dicts


def _system_of(messages: Sequence[Message], default: str) -> SystemMessage:
    first = messages[0] if messages else None
    return first if isinstance(first, SystemMessage) else SystemMessage(default)


def _replay_experiences(state: KeyState) -> list[ContextMutation]:
    """Mutations that rebuild the stored experiences, ids included, in a fresh transcript.

    A fresh transcript numbers remembered experiences ``exp_1, exp_2, ...``; a forgotten id is
    replayed as a placeholder that is forgotten at once, so every later id lines up.
    """
    texts = {str(e.get("id")): str(e.get("text")) for e in state.experiences}
    out: list[ContextMutation] = []
    for n in range(1, state.next_experience):
        exp_id = f"exp_{n}"
        if exp_id in texts:
            out.append(ExperienceRememberMutation(texts[exp_id]))
        else:
            out += [ExperienceRememberMutation("-"), ExperienceForgetMutation(exp_id)]
    return out


class SelfReferenceHook(RunHook):
    """Binds the turns of one ``@llm_chat`` function to ``key`` of ``bank``.

    Forks run in the run's task group, so the run must be driven by ``Run.run_to_end``.
    """

    needs_task_group = True

    def __init__(self, bank: MemoryBank, key: str) -> None:
        self._bank = bank
        self._key = key
        # Messages of the transcript as last written to the store, per running call.
        self._synced: dict[str, tuple[Message, ...]] = {}
        # The running turns (what primitives act on), per running call.
        self._turns: dict[str, tuple[Turn, Token[Turn | None]]] = {}

    @property
    def key(self) -> str:
        """The memory key."""
        return self._key

    @property
    def bank(self) -> MemoryBank:
        """The memory bank."""
        return self._bank

    def system_prompt_suffix(self) -> str:
        """The memory contract."""
        return memory_contract(self._key)

    async def before_llm_call(self, run: RunView) -> Sequence[ContextMutation]:
        """Start the turn on the first call; merge pending memory edits on later ones."""
        if run.agent_call_id not in self._synced:
            return await self._start(run)
        return await self._merge(run, always_sync=False)

    async def after_tool_batch(self, run: RunView) -> Sequence[ContextMutation]:
        """Merge the memory edits the tools made and write the transcript back."""
        return await self._merge(run, always_sync=True)

    async def on_end(self, run: RunView) -> None:
        """Wind down the turn's forks, then write the final transcript (or the edited store plus
        the turn's tail) to the key."""
        entry = self._turns.pop(run.agent_call_id, None)
        if entry is not None:
            turn, token = entry
            await turn.forks.close()
            with contextlib.suppress(ValueError, RuntimeError):  # ended in another context
                ACTIVE_TURN.reset(token)
        synced = self._synced.pop(run.agent_call_id, None)
        edits = self._bank.take_edits(self._key)
        self._bank.close_turn(self._key)
        if synced is None:
            return
        current = run.transcript.messages
        if edits.dirty or edits.compacted:
            tail = () if edits.compacted else current[len(synced) :]
            current = (*self._stored_conversation(), *tail)
        try:
            messages = _for_store(history_from_dicts(history_to_dicts(current)))
        except InvalidHistoryError:
            return  # an unfinished tool scene: keep the last consistent state
        await self._sync(messages)

    # -- steps -----------------------------------------------------------------------------

    async def _start(self, run: RunView) -> list[ContextMutation]:
        self._bank.open_turn(self._key)
        forks = ForkManager(self._bank, self._key, ParentRun(run), self._child_hooks(run))
        turn = Turn(self._bank, self._key, forks)
        # Set in the run's task: its tool calls (and the primitives they call) see this turn.
        self._turns[run.agent_call_id] = (turn, ACTIVE_TURN.set(turn))
        state = await anyio.to_thread.run_sync(self._bank.state, self._key)
        messages = run.transcript.messages
        has_system = bool(messages) and isinstance(messages[0], SystemMessage)
        caller = messages[1 if has_system else 0 : -1]
        stored = history_from_dicts(state.messages)
        stored_system = stored[0] if stored and isinstance(stored[0], SystemMessage) else None
        system = stored_system or _system_of(messages, run.invocation.system_prompt)
        rest = caller or stored[1 if stored_system is not None else 0 :]
        conversation = (
            SystemMessage(_with_contract(system.content, self._key), system.extra),
            *rest,
            *messages[-1:],
        )
        await self._sync(_for_store(conversation))
        self._synced[run.agent_call_id] = conversation
        replace = ContextReplaceMutation(history_to_dicts(conversation))
        return [*_replay_experiences(state), replace]

    async def _merge(self, run: RunView, *, always_sync: bool) -> list[ContextMutation]:
        edits = self._bank.take_edits(self._key)
        current = run.transcript.messages
        synced = self._synced.get(run.agent_call_id, ())
        mutations: list[ContextMutation] = list(edits.mutations)
        if edits.dirty or edits.compacted:
            tail = () if edits.compacted else current[len(synced) :]
            current = (*self._stored_conversation(), *tail)
            mutations.append(ContextReplaceMutation(history_to_dicts(current)))
        elif not always_sync:
            return mutations
        await self._sync(_for_store(current))
        self._synced[run.agent_call_id] = current
        return mutations

    def _child_hooks(self, run: RunView) -> Callable[[str], tuple[RunHook, ...]]:
        """The hooks of a fork child: the run's, with this hook replaced by one for its key."""
        bank, hooks = self._bank, run.invocation.hooks

        def child_hooks(key: str) -> tuple[RunHook, ...]:
            child = SelfReferenceHook(bank, key)
            return tuple(child if hook is self else hook for hook in hooks)

        return child_hooks

    def _stored_conversation(self) -> tuple[Message, ...]:
        """The stored history with the contract in its system prompt (inserted when missing)."""
        stored = [message_from_dict(m) for m in self._bank.state(self._key).messages]
        if stored and isinstance(stored[0], SystemMessage):
            head = stored[0]
            stored[0] = SystemMessage(_with_contract(head.content, self._key), head.extra)
        else:
            stored.insert(0, SystemMessage(memory_contract(self._key)))
        return tuple(stored)

    async def _sync(self, messages: list[dict[str, Any]]) -> None:
        await anyio.to_thread.run_sync(self._bank.sync_messages, self._key, tuple(messages))
