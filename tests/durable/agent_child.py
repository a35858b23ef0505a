"""A durable agent in a process of its own, for the SIGKILL / resume and worker tests.

``python agent_child.py start|resume|worker DB_URL LLM_URL DIR [QUEUE]``: ``start`` runs the
session ``w1`` (its ``hang`` and ``charge`` tools print ``blocked`` and block until the process
is killed), ``resume`` launches the runtime (which resumes ``w1``) and waits for it,
``worker`` consumes QUEUE until killed. Its ``wipe`` tool asks for approval (a durable wait;
a queued run parks after ``$DURABLE_PARK_AFTER`` seconds; ``$DURABLE_CONCURRENCY`` caps the
queue).
Results are printed as one JSON line.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import anyio

from simplellmfunc import OpenAICompatible, llm_chat, tool
from simplellmfunc.runtime.durable import (
    DurableAgent,
    DurableConfig,
    DurableRuntime,
    QueueConfig,
    serve_queue,
)
from simplellmfunc.runtime.otel import GenAITracing

MODE, DB_URL, LLM_URL, DIR = sys.argv[1:5]
QUEUE = sys.argv[5] if len(sys.argv) > 5 else "sessions"
WORK = Path(DIR)


def _log(name: str, line: str) -> None:
    with (WORK / f"{name}.log").open("a") as handle:
        handle.write(f"{line} {os.getpid()}\n")


async def _block(name: str) -> None:
    """In the first process (or a worker told to): block until killed (calls cut mid-way)."""
    if MODE == "start" or os.environ.get("DURABLE_BLOCK") == "1":
        print(f"blocked {name}", flush=True)
        await anyio.sleep_forever()


@tool
async def record(label: str) -> str:
    """Record a label."""
    _log("record", label)
    return f"recorded {label}"


@tool
async def hang(label: str) -> str:
    """Wait for the release, then record a label."""
    _log("hang", label)
    await _block("hang")
    return f"hung {label}"


@tool(idempotent=False)
async def charge(amount: int) -> str:
    """Charge an amount (not idempotent)."""
    _log("charge", str(amount))
    await _block("charge")
    return f"charged {amount}"


@tool(requires_approval=True)
async def wipe(path: str) -> str:
    """Wipe a file (asks a person first)."""
    _log("wipe", path)
    return f"wiped {path}"


llm = OpenAICompatible("sk-test", "mock", LLM_URL)


@llm_chat(llm, toolkit=[record, hang, charge, wipe])
async def clerk(message: str, history: list | None = None):  # type: ignore[no-untyped-def]
    """You are a careful clerk."""


def _tracing() -> GenAITracing | None:
    """Spans written as JSON lines to ``$SPANS_FILE`` as they end (nothing else is exported)."""
    path = os.environ.get("SPANS_FILE")
    if not path:
        return None
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

    class FileExporter(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            with open(path, "a") as handle:
                for span in spans:
                    context, parent = span.get_span_context(), span.parent
                    record = {
                        "name": span.name,
                        "trace_id": context.trace_id if context else None,
                        "span_id": context.span_id if context else None,
                        "parent_id": parent.span_id if parent else None,
                        "attributes": dict(span.attributes or {}),
                    }
                    handle.write(json.dumps(record, default=str) + "\n")
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileExporter()))
    return GenAITracing(provider)


PARK_AFTER = float(os.environ.get("DURABLE_PARK_AFTER", "5"))
CONCURRENCY = int(os.environ.get("DURABLE_CONCURRENCY", "0")) or None
AGENT = DurableAgent(clerk, name="clerk", tracing=_tracing(), park_after=PARK_AFTER)
CONFIG = DurableConfig(
    database_url=DB_URL,
    executor_id=os.environ.get("DURABLE_EXECUTOR", "local"),
    queues=(
        QueueConfig(
            QUEUE,
            concurrency=CONCURRENCY,
            worker_concurrency=min(2, CONCURRENCY or 2),
            polling_interval=0.05,
        ),
    ),
)


async def main() -> None:
    if MODE == "worker":
        try:
            await serve_queue(
                CONFIG,
                QUEUE,
                heartbeat=0.2,
                dead_after=1.0,
                ready=lambda: print("ready", flush=True),
            )
        finally:
            await llm.aclose()
        return
    async with DurableRuntime(CONFIG) as runtime:
        if MODE == "start":
            result = await AGENT.run("do the job", history=[], workflow_id="w1")
        else:
            result = await runtime.result("w1", timeout=60)
        out = {
            "text": result.text,
            "resumed": result.resumed,
            "replayed": result.replayed_steps,
            "executed": result.executed_steps,
            "pid": os.getpid(),
        }
        print(json.dumps(out), flush=True)
    await llm.aclose()


if __name__ == "__main__":
    anyio.run(main)
