"""Spans of runs after the OpenTelemetry GenAI semantic conventions.

One ``invoke_agent {name}`` span per run, with a ``chat {model}`` span per LLM call (model,
provider, token usage, finish reason) and an ``execute_tool {name}`` span per tool call under it.
The spans come from the engine's step seam (:func:`~simplellmfunc.engine.running_steps`): a
:class:`GenAITracing` wraps whatever step runner is active (a durable run's), so the spans of a
durable run say which steps were replayed from the record.

Only the OpenTelemetry API is used: without an SDK and an exporter configured by the application
(or a ``tracer_provider`` given here), every span is a no-op and nothing leaves the process.
A context travels between processes as a W3C ``traceparent`` carrier (:meth:`inject`,
``carrier=``), which is how a durable run resumed or dequeued elsewhere joins the trace of the
request that started it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Tracer, TracerProvider

from ..._mutations import ContextMutation
from ...engine import (
    RunHook,
    RunView,
    StepKind,
    StepRunner,
    StepSlot,
    current_step_runner,
    running_steps,
)
from ...providers import LLMResponse

__all__ = ["GenAITracing"]

T = TypeVar("T")

_SCOPE = "simplellmfunc"


class GenAITracing:
    """Makes GenAI spans of the runs started inside :meth:`agent_run`.

    Args:
        tracer_provider: Where spans go (``None``: the global provider, a no-op unless the
            application configured one).
        capture_usage: Record token usage on ``chat`` spans.
    """

    def __init__(
        self, tracer_provider: TracerProvider | None = None, *, capture_usage: bool = True
    ) -> None:
        self.tracer: Tracer = trace.get_tracer(_SCOPE, tracer_provider=tracer_provider)
        self.capture_usage = capture_usage

    def inject(self) -> dict[str, str]:
        """The current trace context as a carrier (``traceparent``) to send to another process."""
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        return carrier

    @contextmanager
    def agent_run(
        self,
        agent_name: str,
        carrier: Mapping[str, str] | None = None,
        *,
        conversation_id: str | None = None,
        attributes: Mapping[str, Any] | None = None,
    ) -> Iterator[None]:
        """An ``invoke_agent`` span around the block; runs started in it get LLM and tool spans.

        Args:
            agent_name: ``gen_ai.agent.name``.
            carrier: The context of the caller, from :meth:`inject` in another process (``None``:
                the current context).
            conversation_id: ``gen_ai.conversation.id`` (a durable run's id).
            attributes: More span attributes.
        """
        context = propagate.extract(dict(carrier)) if carrier else None
        values: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent_name,
        }
        if conversation_id:
            values["gen_ai.conversation.id"] = conversation_id
        values.update(attributes or {})
        with (
            self.tracer.start_as_current_span(
                f"invoke_agent {agent_name}",
                context=context,
                kind=SpanKind.INTERNAL,
                attributes=values,
            ),
            running_steps(TracedSteps(self, current_step_runner())),
        ):
            yield


class TracedSteps(RunHook):
    """A step runner that opens a span around each step of ``inner`` (or around the call)."""

    def __init__(self, tracing: GenAITracing, inner: StepRunner | None) -> None:
        self._tracing = tracing
        self._inner = inner
        self.needs_task_group = isinstance(inner, RunHook) and inner.needs_task_group

    def slot(
        self, kind: StepKind, name: str, *, idempotent: bool = True, approval_id: str | None = None
    ) -> StepSlot:
        inner = (
            self._inner.slot(kind, name, idempotent=idempotent, approval_id=approval_id)
            if self._inner
            else None
        )
        return _TracedSlot(self._tracing, kind, name, inner)

    # The inner runner's hook (a durable run's resume note) still runs.
    async def before_llm_call(self, run: RunView) -> Sequence[ContextMutation]:
        if isinstance(self._inner, RunHook):
            return await self._inner.before_llm_call(run)
        return ()

    async def after_tool_batch(self, run: RunView) -> Sequence[ContextMutation]:
        if isinstance(self._inner, RunHook):
            return await self._inner.after_tool_batch(run)
        return ()

    async def on_end(self, run: RunView) -> None:
        if isinstance(self._inner, RunHook):
            await self._inner.on_end(run)


class _TracedSlot:
    __slots__ = ("_inner", "_kind", "_name", "_tracing")

    def __init__(
        self, tracing: GenAITracing, kind: StepKind, name: str, inner: StepSlot | None
    ) -> None:
        self._tracing = tracing
        self._kind = kind
        self._name = name
        self._inner = inner

    async def run(self, func: Callable[[], Awaitable[T]]) -> tuple[T, bool]:
        if self._kind == "llm":
            span_name, kind = f"chat {self._name}", SpanKind.CLIENT
            attributes = {"gen_ai.operation.name": "chat", "gen_ai.request.model": self._name}
        else:
            span_name, kind = f"execute_tool {self._name}", SpanKind.INTERNAL
            attributes = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": self._name,
                "gen_ai.tool.type": "function",
            }
        with self._tracing.tracer.start_as_current_span(
            span_name, kind=kind, attributes=attributes
        ) as span:
            try:
                if self._inner is None:
                    value, replayed = await func(), False
                else:
                    value, replayed = await self._inner.run(func)
            except Exception as exc:  # boundary: recorded on the span, re-raised
                span.set_attribute("error.type", type(exc).__qualname__)
                raise
            span.set_attribute("simplellmfunc.step.replayed", replayed)
            if isinstance(value, LLMResponse):
                self._response(span, value)
            failure = getattr(value, "error_type", None)  # a tool failure the model is shown
            if isinstance(failure, str):
                span.set_attribute("error.type", failure)
                span.set_status(trace.StatusCode.ERROR)
            return value, replayed

    def _response(self, span: trace.Span, response: LLMResponse) -> None:
        if response.model:
            span.set_attribute("gen_ai.response.model", response.model)
        if response.provider:
            span.set_attribute("gen_ai.provider.name", response.provider)
        if response.finish_reason:
            span.set_attribute("gen_ai.response.finish_reasons", [response.finish_reason])
        if self._tracing.capture_usage:
            span.set_attribute("gen_ai.usage.input_tokens", response.usage.prompt_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", response.usage.completion_tokens)
