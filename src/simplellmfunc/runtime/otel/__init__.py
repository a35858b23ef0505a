"""OpenTelemetry spans of runs (the ``simplellmfunc[otel]`` extra), after the GenAI semantic
conventions: ``invoke_agent`` per run, ``chat`` per LLM call (model, token usage), ``execute_tool``
per tool call; carried across processes with durable runs. Nothing is exported unless the
application configures an exporter.
"""

from ..._lazy import publish
from ._tracing import GenAITracing, TracedSteps

__all__ = ["GenAITracing", "TracedSteps"]

publish(__name__, __all__)
