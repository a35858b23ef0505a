"""The clock type shared by the stores and the trace recorder (tests pass their own)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias

__all__ = ["Clock"]

Clock: TypeAlias = Callable[[], float]
"""Returns the current time in seconds (``time.time`` unless a test passes its own)."""
