"""The ``retrieve`` tool: passages with citations, under a token budget.

What the model sees::

    [1] docs/install.md:12-30 § Install > From source (score 4.21)
    <the passage>

    [2] src/app/config.py:40-61 § def load_config(path)
    ...

Passages are added best first while they fit ``token_budget`` (counted with the provider's
tokenizer, or its offline estimate); the first one is cut to fit when it alone is too long, and
a last line says how many were left out. An empty result tells the model to rewrite its query:
that is what an agent needs to search again with other words.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from ...providers import count_text_tokens
from ...tools import FunctionTool
from ._kb import KnowledgeBase, Passage, SearchMode

__all__ = ["NO_MATCH", "format_passages", "retrieve_tool"]

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


def format_passages(passages: Sequence[Passage], token_budget: int = 1500) -> str:
    """Numbered passages with their citations, as many as fit ``token_budget`` tokens."""
    parts: list[str] = []
    used = 0
    for n, passage in enumerate(passages, start=1):
        head = f"[{n}] {passage.citation} (score {passage.score:.3g})"
        block = f"{head}\n{passage.text}"
        cost = count_text_tokens(block) + 2
        if used + cost > token_budget:
            if parts:
                left = len(passages) - n + 1
                parts.append(f"({left} more passage{'s' if left > 1 else ''}: token budget)")
                break
            block = f"{head}\n{_fit(passage.text, token_budget - count_text_tokens(head) - 4)}"
            cost = token_budget
        parts.append(block)
        used += cost
    return "\n\n".join(parts)


def retrieve_tool(
    kb: KnowledgeBase,
    *,
    k: int = 5,
    token_budget: int = 1500,
    mode: SearchMode | None = None,
    name: str = "retrieve",
    description: str | None = None,
) -> FunctionTool:
    """A tool that searches ``kb`` and returns cited passages (see the module docstring).

    Args:
        kb: The knowledge base.
        k: Passages per search when the model does not say (it may ask for up to 20).
        token_budget: Most tokens of one result.
        mode: Search mode (default: the knowledge base's).
        name: The tool's name.
        description: What the model is told the tool does.
    """
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
            return NO_MATCH.format(query=query)
        return format_passages(passages, token_budget)

    about = description or (
        "Search the knowledge base for passages relevant to a query. Each passage comes with "
        "its citation: source path, line range and heading."
    )
    return FunctionTool(retrieve, name=name, description=about)
