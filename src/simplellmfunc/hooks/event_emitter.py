"""``ToolEventEmitter``, importable from ``simplellmfunc.hooks.event_emitter`` as users expect."""

from ..tools import ToolEventEmitter

__all__ = ["ToolEventEmitter"]
