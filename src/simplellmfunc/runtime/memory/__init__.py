"""Agent memory: :class:`MemoryHook` shows recent store items to each LLM call and saves steps.

What a step leaves in memory is decided by :class:`AutoSave` strategies: :class:`StepTriple`
(input, actions, answer), :class:`KeyValueExtraction` (``key: value`` lines) and
:class:`LLMSummary` (a model states the facts worth keeping).
"""

from ..._lazy import publish
from ._autosave import Action, AutoSave, KeyValueExtraction, LLMSummary, Step, StepTriple
from ._hook import MemoryHook, render_memory, strip_memory

__all__ = [
    "Action",
    "AutoSave",
    "KeyValueExtraction",
    "LLMSummary",
    "MemoryHook",
    "Step",
    "StepTriple",
    "render_memory",
    "strip_memory",
]

publish(__name__, __all__)
