"""SimpleLLMFunc's ``runtime.selfref.context_ops``: a SelfReference context as text.

A context is a system prompt that may end with an experience block, an optional compaction
summary message, and the working messages after it::

    <base system prompt>

    <experience>
    - [exp_1] <text>
    </experience>

The summary is the Markdown message that ``runtime.selfref.context.compact(...)`` writes here
(``[Context summary]`` with one ``## Section`` per field). These functions render and parse that
text, so code that reads or rebuilds a stored history by hand keeps working. (SelfReference
itself keeps experiences beside the history and adds them to each turn's prompt.)
"""

from __future__ import annotations

import re
from typing import Any

from ...builtin.selfref import compaction_summary_text

__all__ = [
    "build_context_messages_from_state_data",
    "parse_context_compaction_summary",
    "parse_context_messages",
    "render_context_compaction_summary",
    "render_system_prompt_with_experiences",
]

_SUMMARY_HEADER = "[Context summary]"
_SECTIONS = {
    "Goal": "goal",
    "Instruction": "instruction",
    "Discoveries": "discoveries",
    "Completed": "completed",
    "Current status": "current_status",
    "Likely next work": "likely_next_work",
    "Relevant files and directories": "relevant_files_directories",
}
_LISTS = ("discoveries", "completed", "relevant_files_directories")
_EXPERIENCE = re.compile(r"\n*<experience>\n(?P<body>.*?)\n?</experience>\s*\Z", re.DOTALL)
_ITEM = re.compile(r"^- \[(?P<id>[^\]]+)\] (?P<text>.*)$")


def render_context_compaction_summary(summary: dict[str, Any]) -> str:
    """The summary message text of the compaction fields (``goal`` is required).

    Raises:
        InvalidHistoryError: For unknown or mistyped fields, or an empty goal.
    """
    return compaction_summary_text(summary)


def parse_context_compaction_summary(text: str) -> dict[str, Any] | None:
    """The fields of a summary message text (None when ``text`` is not one). A section whose
    lines are all ``- `` items reads as a list."""
    if not text.startswith(_SUMMARY_HEADER):
        return None
    fields: dict[str, Any] = {name: [] if name in _LISTS else "" for name in _SECTIONS.values()}
    for block in text.split("\n\n## ")[1:]:
        title, _, body = block.partition("\n")
        name = _SECTIONS.get(title.strip())
        if name is None:
            continue
        lines = body.strip().splitlines()
        if lines and all(line.startswith("- ") for line in lines):
            fields[name] = [line[2:] for line in lines]
        else:
            fields[name] = body.strip()
    return fields


def render_system_prompt_with_experiences(
    base_system_prompt: str, experiences: list[dict[str, Any]]
) -> str:
    """The system prompt with the experience block appended (none: the prompt alone)."""
    if not experiences:
        return base_system_prompt
    items = "\n".join(f"- [{e['id']}] {e['text']}" for e in experiences)
    block = f"<experience>\n{items}\n</experience>"
    return f"{base_system_prompt}\n\n{block}" if base_system_prompt else block


def _split_system(content: str) -> tuple[str, list[dict[str, str]]]:
    found = _EXPERIENCE.search(content)
    if found is None:
        return content, []
    experiences = []
    for line in found.group("body").splitlines():
        item = _ITEM.match(line.strip())
        if item is not None:
            experiences.append({"id": item.group("id"), "text": item.group("text")})
    return content[: found.start()], experiences


def parse_context_messages(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Split a history into ``base_system_prompt``, ``experiences``, ``summary`` (its fields,
    or None), ``summary_message`` (that message, or None) and ``working_messages``."""
    rest = list(messages)
    base, experiences = "", list[dict[str, str]]()
    if rest and rest[0].get("role") == "system":
        base, experiences = _split_system(str(rest.pop(0).get("content") or ""))
    summary = summary_message = None
    if rest and isinstance(rest[0].get("content"), str):
        summary = parse_context_compaction_summary(rest[0]["content"])
        if summary is not None:
            summary_message = rest.pop(0)
    return {
        "base_system_prompt": base,
        "experiences": experiences,
        "summary": summary,
        "summary_message": summary_message,
        "working_messages": rest,
    }


def build_context_messages_from_state_data(state_data: dict[str, Any]) -> list[dict[str, Any]]:
    """The history of parsed state (the inverse of :func:`parse_context_messages`)."""
    messages: list[dict[str, Any]] = []
    base = str(state_data.get("base_system_prompt") or "")
    experiences = list(state_data.get("experiences") or [])
    if base or experiences:
        system = render_system_prompt_with_experiences(base, experiences)
        messages.append({"role": "system", "content": system})
    summary_message = state_data.get("summary_message")
    if summary_message is not None:
        messages.append(dict(summary_message))
    elif state_data.get("summary"):
        text = render_context_compaction_summary(state_data["summary"])
        messages.append({"role": "assistant", "content": text})
    messages.extend(state_data.get("working_messages") or [])
    return messages
