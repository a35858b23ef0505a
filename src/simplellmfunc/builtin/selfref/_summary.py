"""The compaction summary: validated fields rendered as one stable Markdown message.

Format (sections with nothing to say are left out)::

    [Context summary]
    The earlier conversation was compacted into this summary. Continue the work from here.

    ## Goal
    <goal>

    ## Instruction
    <instruction>

    ## Discoveries
    - <item>

    ## Completed
    - <item>

    ## Current status
    <current_status>

    ## Likely next work
    <likely_next_work>

    ## Relevant files and directories
    - <item>
"""

from __future__ import annotations

from typing import Any

from ...exceptions import InvalidHistoryError

__all__ = ["SUMMARY_HEADER", "compaction_summary_text", "summary_text"]

SUMMARY_HEADER = "[Context summary]"

_FIELDS: tuple[tuple[str, str, bool], ...] = (
    ("goal", "Goal", False),
    ("instruction", "Instruction", False),
    ("discoveries", "Discoveries", True),
    ("completed", "Completed", True),
    ("current_status", "Current status", False),
    ("likely_next_work", "Likely next work", False),
    ("relevant_files_directories", "Relevant files and directories", True),
)


def _check(name: str, value: Any, is_list: bool) -> str | list[str]:
    if is_list:
        if value is None:
            return []
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise InvalidHistoryError(f"compact(): {name} must be a list of strings")
        return [v for v in value if v.strip()]
    if value is None:
        return ""
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return "\n".join(f"- {v}" for v in value if v.strip())  # SimpleLLMFunc passes lists
    if not isinstance(value, str):
        raise InvalidHistoryError(f"compact(): {name} must be a string")
    return value


def summary_text(fields: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Validate the compaction fields; return the summary text and the checkpoint record.

    Missing fields count as empty; the goal is required. A text field given as a list of
    strings becomes a bulleted list.

    Raises:
        InvalidHistoryError: For unknown or mistyped fields, or an empty goal.
    """
    known = {name for name, _, _ in _FIELDS}
    unknown = sorted(set(fields) - known)
    if unknown:
        raise InvalidHistoryError(f"compact(): unknown fields {', '.join(unknown)}")
    checkpoint = {name: _check(name, fields.get(name), is_list) for name, _, is_list in _FIELDS}
    if not str(checkpoint["goal"]).strip():
        raise InvalidHistoryError("compact(): goal must be a non-empty string")
    parts = [
        SUMMARY_HEADER
        + "\nThe earlier conversation was compacted into this summary. Continue the work from here."
    ]
    for name, title, is_list in _FIELDS:
        value = checkpoint[name]
        if is_list and value:
            parts.append(f"## {title}\n" + "\n".join(f"- {v}" for v in value))
        elif not is_list and str(value).strip():
            parts.append(f"## {title}\n{str(value).strip()}")
    return "\n\n".join(parts), checkpoint


def compaction_summary_text(fields: dict[str, Any]) -> str:
    """The summary message text of the compaction ``fields`` (see the module docstring).

    Raises:
        InvalidHistoryError: For unknown or mistyped fields, or an empty goal.
    """
    return summary_text(fields)[0]
