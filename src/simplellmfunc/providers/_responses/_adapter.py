"""OpenAIResponsesCompatible: any ``/responses`` server (the OpenAI Responses API), on httpx."""

from __future__ import annotations

from typing import Any, ClassVar

from .._base import LLMRequest, LLMResponse
from .._http_interface import HTTPInterface
from .._reply import malformed_reply
from .._stream import stream_error
from ._parser import ResponsesStreamParser
from ._wire import build_responses_body, failure_message, parse_response

__all__ = ["OpenAIResponsesCompatible"]


class OpenAIResponsesCompatible(HTTPInterface):
    """A model behind an OpenAI Responses API (``POST /responses``) endpoint.

    The transcript is sent whole on every call (no ``previous_response_id``): the framework owns
    the history. Reasoning items the model returns are kept in
    ``AssistantMessage.reasoning_details`` and sent back on the next call; with ``store=False``
    pass ``include=["reasoning.encrypted_content"]`` so that they carry their content.

    Takes the arguments of :class:`HTTPInterface`; ``max_tokens`` in the body parameters is sent
    as ``max_output_tokens``. A 200 response that reports a failed response is a
    :class:`~simplellmfunc.exceptions.StreamError`, streamed or not.

    Raises:
        ConfigError: For an empty key list.
    """

    endpoint_path: ClassVar[str] = "/responses"

    def _body(self, request: LLMRequest, stream: bool) -> dict[str, Any]:
        return build_responses_body(
            request,
            model=self.model_name,
            caps=self.capabilities,
            stream=stream,
            defaults=self.default_params,
        )

    def _parse_reply(self, data: dict[str, Any], request_id: str | None) -> LLMResponse:
        failure = failure_message(data)
        if failure is not None:
            message = f"response failed: {failure[:300]}"
            raise stream_error(self.provider_name, message, request_id)
        if not isinstance(data.get("output"), list):
            raise malformed_reply(self.provider_name, "output", data, request_id)
        return parse_response(data, self.provider_name, request_id)

    def _stream_parser(self, request_id: str | None) -> ResponsesStreamParser:
        return ResponsesStreamParser(self.provider_name, request_id)
