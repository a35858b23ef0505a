"""Traces: :class:`TraceRecorder` turns the event stream of any agent into :class:`TraceRecord` s.

Records are written as they are made to :class:`TraceSink` s (:class:`JSONLSink`,
:class:`SQLiteTraceSink`); :class:`TraceStats` are their totals and :func:`timeline` renders
them as the step timeline.
"""

from ..._lazy import publish
from ._record import TraceRecord, TraceStats, timeline
from ._recorder import TraceRecorder
from ._sinks import JSONLSink, SQLiteTraceSink, TraceSink, read_jsonl

__all__ = [
    "JSONLSink",
    "SQLiteTraceSink",
    "TraceRecord",
    "TraceRecorder",
    "TraceSink",
    "TraceStats",
    "read_jsonl",
    "timeline",
]

publish(__name__, __all__)
