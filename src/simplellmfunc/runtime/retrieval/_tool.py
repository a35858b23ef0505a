"""The ``retrieve`` tool: passages with citations, under a token budget.

What the model sees::

    [1] docs/install.md:12-30 § Install > From source (score 4.21)
    <the passage>

    [2] src/app/config.py:40-61 § def load_config(path)
    ...

That is the ``numbered`` output; ``plain`` is the passages' text alone, separated by blank
lines, and ``json`` a JSON array of objects (``n``, ``citation``, ``source``, ``start_line``,
``end_line``, ``heading``, ``score``, ``text``), for code that reads the result.

Passages are added best first while they fit ``token_budget`` (counted with the provider's
tokenizer, or its offline estimate); the first one is cut to fit when it alone is too long, and
a last line says how many were left out. An empty result tells the model to rewrite its query:
that is what an agent needs to search again with other words.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Final, Literal

from ...exceptions import UserError
from ...providers import count_text_tokens
from ...tools import FunctionTool
from ._kb import KnowledgeBase
from ._passage import Passage, SearchMode

__all__ = ["NO_MATCH", "OutputFormat", "format_passages", "retrieve_tool"]

OutputFormat = Literal["numbered", "plain", "json"]
_FORMATS: Final = ("numbered", "plain", "json")

NO_MATCH: Final = (
    "No passage matches {query!r}. Rewrite the query with other words (synonyms, names the "
    "documents would use, fewer words) and search again."
)
_MAX_K: Final = 20


def _fit(text: str, budget: int) -> str:
    """``text`` cut (at a line end where possible) to about ``budget`` tokens."""
    if budget <= 0:
        return "[…]"
    cut = text
    while cut and count_text_tokens(cut) > budget:
        cut = cut[: int(len(cut) * 0.8)]
    if len(cut) < len(text):
        line_end = cut.rfind("\n")
        cut = (cut[:line_end] if line_end > len(cut) // 2 else cut) + "\n[…]"
    return cut


def _render(n: int, passage: Passage, text: str, output: OutputFormat) -> str:
    if output == "plain":
        return text
    if output == "json":
        fields = {
            "n": n,
            "citation": passage.citation,
            "source": passage.source,
            "start_line": passage.start_line,
            "end_line": passage.end_line,
            "heading": passage.heading,
            "score": round(passage.score, 4),
            "text": text,
        }
        return json.dumps(fields, ensure_ascii=False)
    return f"[{n}] {passage.citation} (score {passage.score:.3g})\n{text}"


def format_passages(
    passages: Sequence[Passage], token_budget: int = 1500, output: OutputFormat = "numbered"
) -> str:
    """The passages with their citations (see the module docstring for the ``output``
    formats), as many as fit ``token_budget`` tokens.

    Raises:
        UserError: For an unknown ``output``.
    """
    if output not in _FORMATS:
        raise UserError(f"output must be one of {', '.join(_FORMATS)}, got {output!r}")
    parts: list[str] = []
    used = 0
    left_out = 0
    for n, passage in enumerate(passages, start=1):
        block = _render(n, passage, passage.text, output)
        cost = count_text_tokens(block) + 2
        if used + cost > token_budget:
            if parts:
                left_out = len(passages) - n + 1
                break
            frame = count_text_tokens(_render(n, passage, "", output))
            block = _render(n, passage, _fit(passage.text, token_budget - frame - 4), output)
            cost = token_budget
        parts.append(block)
        used += cost
    if output == "json":
        return "[" + ",\n".join(parts) + "]"
    if left_out:
        parts.append(f"({left_out} more passage{'s' if left_out > 1 else ''}: token budget)")
    return "\n\n".join(parts)


def retrieve_tool(
    kb: KnowledgeBase,
    *,
    k: int = 5,
    token_budget: int = 1500,
    mode: SearchMode | None = None,
    name: str = "retrieve",
    description: str | None = None,
    output: OutputFormat = "numbered",
) -> FunctionTool:
    """A tool that searches ``kb`` and returns cited passages (see the module docstring).

    Args:
        kb: The knowledge base.
        k: Passages per search when the model does not say (it may ask for up to 20).
        token_budget: Most tokens of one result.
        mode: Search mode (default: the knowledge base's).
        name: The tool's name.
        description: What the model is told the tool does.
        output: ``numbered`` (the default), ``plain`` or ``json`` (see the module docstring).

    Raises:
        UserError: For an unknown ``output``, or ``k`` outside 1-20.
    """
    if output not in _FORMATS:
        raise UserError(f"output must be one of {', '.join(_FORMATS)}, got {output!r}")
    if not 1 <= k <= _MAX_K:
        raise UserError(f"k must be between 1 and {_MAX_K}, got {k}")
    default_k = k

    async def retrieve(query: str, k: int = default_k) -> str:
        """Search the knowledge base; returns passages, each with its source, line range and
        heading, best first.

        Args:
            query: What to look for: keywords or a question.
            k: How many passages (1-20).
        """
        passages = await kb.search(query, max(1, min(k, _MAX_K)), mode=mode)
        if not passages:
            return "[]" if output == "json" else NO_MATCH.format(query=query)
        return format_passages(passages, token_budget, output)

    about = description or (
        "Search the knowledge base for passages relevant to a query. Each passage comes with "
        "its citation: source path, line range and heading."
    )
    return FunctionTool(retrieve, name=name, description=about)
