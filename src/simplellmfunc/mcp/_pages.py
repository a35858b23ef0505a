"""Paginated MCP listings, walked to the end with a bound."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from ..exceptions import MCPError

__all__ = ["all_pages"]

PageT = TypeVar("PageT")
ItemT = TypeVar("ItemT")

MAX_PAGES = 1000


async def all_pages(
    fetch: Callable[[str | None], Awaitable[PageT]],
    items: Callable[[PageT], Sequence[ItemT]],
    server: str,
) -> list[ItemT]:
    """Fetch every page: ``fetch(cursor)`` until a page has no ``next_cursor``.

    Raises:
        MCPError: When the server repeats a cursor or sends more than ``MAX_PAGES`` pages
            (a server that paginates forever must not hang the caller).
    """
    found: list[ItemT] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        page = await fetch(cursor)
        found.extend(items(page))
        cursor = getattr(page, "next_cursor", None)
        if cursor is None:
            return found
        if cursor in seen:
            raise MCPError(f"MCP server {server} repeated the page cursor {cursor[:40]!r}")
        seen.add(cursor)
    raise MCPError(f"MCP server {server} sent more than {MAX_PAGES} pages")
