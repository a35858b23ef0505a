"""Google-style docstring parsing: the summary and the ``Args:`` descriptions."""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field

__all__ = ["ParsedDocstring", "parse_docstring"]

# The section headers napoleon knows; text after any of them is not part of the description.
_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Other Parameters|"
    r"Returns?|Raises?|Yields?|Examples?|Notes?|Attributes|Attention|Caution|Danger|Error|"
    r"Hint|Important|Methods|References|See Also|Tip|Todo|Warnings?|Warns)\s*:\s*$"
)
_ARG_SECTIONS = frozenset(
    {"Args", "Arguments", "Parameters", "Params", "Keyword Args", "Keyword Arguments"}
)
_ARG = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


@dataclass(frozen=True, slots=True)
class ParsedDocstring:
    """The description (everything before the first section) and per-argument descriptions."""

    description: str = ""
    args: dict[str, str] = field(default_factory=dict)


def parse_docstring(doc: str | None) -> ParsedDocstring:
    """Split a Google-style docstring into its description and ``Args:`` entries.

    Continuation lines (indented deeper than the argument) join the argument's description
    with single spaces.
    """
    text = inspect.cleandoc(doc or "")
    description: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    arg_indent = 0
    for line in text.splitlines():
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        header = _SECTION.match(stripped) if indent == 0 else None
        if header:
            section, current = header.group(1), None
        elif section is None:
            description.append(line)
        elif section in _ARG_SECTIONS and stripped:
            match = _ARG.match(stripped)
            if match and (current is None or indent <= arg_indent):
                current, arg_indent = match.group(1).lstrip("*"), indent
                args[current] = match.group(2).strip()
            elif current is not None:
                args[current] = f"{args[current]} {stripped}".strip()
    return ParsedDocstring("\n".join(description).strip(), args)
