"""One lifecycle for async resources (anyio's ``AsyncResource`` is the model).

``async with resource:`` opens it (:meth:`AsyncResource.open`) and, on leaving, awaits
:meth:`AsyncResource.aclose` — also when the block failed or was cancelled. ``open`` is the one
opener verb (a resource that has nothing to open keeps the default); ``aclose`` is the one
closer, idempotent. A close that fails while an error is leaving the block never masks that
error: the failure is logged and noted on it.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from types import TracebackType
from typing import Self

__all__ = ["AsyncResource"]

logger = logging.getLogger("simplellmfunc")


class AsyncResource(ABC):
    """Something opened by ``async with`` and closed by :meth:`aclose` when the block ends."""

    __slots__ = ()

    async def open(self) -> None:  # noqa: B027 - most resources have nothing to open
        """Open the resource (``async with`` does); the default has nothing to open."""

    @abstractmethod
    async def aclose(self) -> None:
        """Release what the resource holds (idempotent)."""

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            await self.aclose()
            return
        try:
            await self.aclose()
        except Exception as error:  # boundary: never mask the exception of the block
            logger.warning(
                "%s: aclose() failed while an error left the block: %s: %s",
                type(self).__name__,
                type(error).__name__,
                error,
            )
            exc.add_note(
                f"{type(self).__name__}.aclose() also failed: {type(error).__name__}: {error}"
            )
