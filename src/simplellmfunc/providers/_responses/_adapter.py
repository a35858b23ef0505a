"""OpenAIResponsesCompatible: any ``/responses`` server (the OpenAI Responses API), on httpx."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any, Final

from ...exceptions import ProviderError
from .._base import (
    FinishEvent,
    LLMRequest,
    LLMResponse,
    StreamEvent,
    UsageEvent,
)
from .._http import read_timeout
from .._http_interface import HTTPInterface
from .._openai._adapter import _body_chunks, _next_events
from .._openai._wire import stream_error
from ._wire import (
    ResponsesStreamParser,
    build_responses_body,
    failure_message,
    parse_response,
)

__all__ = ["OpenAIResponsesCompatible"]

_PATH: Final = "/responses"


class OpenAIResponsesCompatible(HTTPInterface):
    """A model behind an OpenAI Responses API (``POST /responses``) endpoint.

    The transcript is sent whole on every call (no ``previous_response_id``): the framework owns
    the history. Reasoning items the model returns are kept in
    ``AssistantMessage.reasoning_details`` and sent back on the next call; with ``store=False``
    pass ``include=["reasoning.encrypted_content"]`` so that they carry their content.

    Takes the arguments of :class:`HTTPInterface`; ``max_tokens`` in the body parameters is sent
    as ``max_output_tokens``.

    Raises:
        ConfigError: For an empty key list.
    """

    def _body(self, request: LLMRequest, stream: bool) -> dict[str, Any]:
        return build_responses_body(
            request,
            model=self.model_name,
            caps=self.capabilities,
            stream=stream,
            defaults=self.default_params,
        )

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Run the request without streaming.

        Raises:
            StreamError: When a 200 response reports a failed response.
            ProviderError: (a subclass) when the call fails after retries.
        """
        deadline = self._http.deadline(request.timeout)
        data, headers = await self._http.post_json(_PATH, self._body(request, False), deadline)
        request_id = headers.get("x-request-id")
        failure = failure_message(data)
        if failure is not None:
            message = f"response failed: {failure[:300]}"
            raise stream_error(self.provider_name, message, request_id)
        if not isinstance(data.get("output"), list):
            raise ProviderError(
                f"{self.provider_name}: response has no output",
                status=200,
                request_id=request_id,
                body_excerpt=json.dumps(data)[:300],
                provider=self.provider_name,
            )
        response = parse_response(data, self.provider_name, request_id)
        if response.usage.calls == 0:
            response = await self._with_estimate(request, response)
        return response

    async def stream(self, request: LLMRequest) -> AsyncGenerator[StreamEvent, None]:
        """Run the request streaming (SSE); the last event is a :class:`FinishEvent`.

        Raises:
            StreamError: For an ``error`` or ``response.failed`` event, a malformed event, or a
                stream that ends without ``response.completed``.
            ProviderError: (a subclass) when the call fails; never retried after the first event.
        """
        deadline = self._http.deadline(request.timeout)
        async with self._http.open(_PATH, self._body(request, True), deadline) as response:
            parser = ResponsesStreamParser(self.provider_name, response.headers.get("x-request-id"))
            body, limit = _body_chunks(response), read_timeout(response)
            try:
                while events := await _next_events(body, parser, deadline, limit):
                    for event in events:
                        yield event
            finally:
                await body.aclose()
            final = parser.response()
        # The connection and the key are back in their pools before the last events.
        if final.usage.calls == 0:
            final = await self._with_estimate(request, final)
        else:
            yield UsageEvent(final.usage)
        yield FinishEvent(final)
