"""``ToolEventEmitter``, importable from ``simplellmfunc.hooks.event_emitter`` as users expect."""

from ..tools._emitter import ToolEventEmitter

__all__ = ["ToolEventEmitter"]
