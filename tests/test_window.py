"""History window: system kept, recent turns kept, tool pairs never split, budget respected."""

from __future__ import annotations

from collections.abc import Sequence

from simplellmfunc.engine import HistoryWindow, TerminationPolicy
from simplellmfunc.engine._window import apply_window, split_turns
from simplellmfunc.providers import count_message_tokens
from simplellmfunc.types import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
    validate_history,
)


def conversation(turns: int) -> list[Message]:
    messages: list[Message] = [SystemMessage("You are terse.")]
    for n in range(turns):
        messages.append(UserMessage(f"question {n} " + "word " * 50))
        call = ToolCall(f"c{n}", "lookup", '{"q": "x"}')
        messages.append(AssistantMessage(None, (call,)))
        messages.append(ToolMessage(f"c{n}", "result " * 30))
        messages.append(AssistantMessage(f"answer {n}"))
    return messages


def count(messages: Sequence[Message]) -> int:
    return count_message_tokens(messages, "gpt-4o")


def test_turns_start_at_user_messages() -> None:
    head, turns = split_turns(conversation(3))
    assert len(head) == 1
    assert [len(t) for t in turns] == [4, 4, 4]


def test_keep_recent_turns_without_budget() -> None:
    sent, dropped = apply_window(conversation(10), HistoryWindow(keep_recent_turns=3), count, None)
    assert isinstance(sent[0], SystemMessage)
    assert isinstance(sent[1], UserMessage)
    assert sent[1].text.startswith("[Summary of 28 earlier messages")
    assert len(dropped) == 28
    validate_history(sent)


def test_budget_drops_more_turns_but_keeps_the_current_one() -> None:
    messages = conversation(10)
    full = count(messages)
    sent, _ = apply_window(messages, HistoryWindow(keep_recent_turns=10), count, full // 3)
    assert count(sent) <= full // 3
    assert sent[-1] == messages[-1]
    validate_history(sent)  # every kept tool call still has its result
    tiny, _ = apply_window(messages, HistoryWindow(), count, 10)
    assert tiny[-4:] == tuple(messages[-4:])  # the current turn is never dropped


def test_summary_text_replaces_the_note() -> None:
    sent, _ = apply_window(conversation(5), HistoryWindow(keep_recent_turns=1), count, None, "S")
    assert sent[1] == UserMessage("S")


def test_budget_from_context_window() -> None:
    assert HistoryWindow().budget(None) is None
    assert HistoryWindow(reserve_tokens=1000).budget(8000) == 7000
    assert HistoryWindow(max_tokens=500).budget(8000) == 500


def test_implicit_signals_default_to_text_mode_only() -> None:
    policy = TerminationPolicy()
    assert policy.implicit_stop("Final Answer: 42", text_protocol=True)
    assert not policy.implicit_stop("Final Answer: 42", text_protocol=False)
    assert policy.implicit_stop("任务完成，结果是 42", text_protocol=True)
    assert TerminationPolicy(implicit=True).implicit_stop("Task complete.", text_protocol=False)
    assert not TerminationPolicy(implicit=False).implicit_stop("Task complete.", text_protocol=True)
