"""OpenAICompatible: any ``/chat/completions`` server, on httpx."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from ...exceptions import ProviderError
from .._base import LLMRequest, LLMResponse
from .._http_interface import HTTPInterface
from .._reply import malformed_reply
from .._stream import stream_error
from ._parser import ChatStreamParser
from ._wire import build_chat_body, parse_chat_response

__all__ = ["OpenAICompatible"]


class OpenAICompatible(HTTPInterface):
    """A model behind an OpenAI-compatible ``/chat/completions`` endpoint.

    Takes the arguments of :class:`HTTPInterface`: ``(api_key_pool, model_name, base_url,
    *, max_retries, retry_policy, timeout, connect_timeout, read_timeout, max_connections,
    rate_limit_capacity, rate_limit_refill_rate, rate_limit, capabilities, context_window,
    headers, provider_name, http_client, **default_params)``.

    Streams ask for ``stream_options.include_usage`` (with the ``stream_usage`` capability); a
    server that refuses the option with a 400 is asked once more without it, and never again.

    Raises:
        ConfigError: For an empty key list.
    """

    endpoint_path: ClassVar[str] = "/chat/completions"

    #: Whether to ask for ``stream_options.include_usage``; ``None`` until a server refuses it.
    _stream_usage: bool | None = None

    def _body(self, request: LLMRequest, stream: bool) -> dict[str, Any]:
        return build_chat_body(
            request,
            model=self.model_name,
            caps=self.capabilities,
            stream=stream,
            include_usage=self._include_usage(),
            defaults=self.default_params,
        )

    def _include_usage(self) -> bool:
        return self.capabilities.stream_usage if self._stream_usage is None else self._stream_usage

    def _parse_reply(self, data: dict[str, Any], request_id: str | None) -> LLMResponse:
        if "error" in data and not data.get("choices"):
            message = f"error in a 200 response: {str(data['error'])[:300]}"
            raise stream_error(self.provider_name, message, request_id)
        response = parse_chat_response(data, self.provider_name, request_id)
        if response is None:
            raise malformed_reply(self.provider_name, "choices", data, request_id)
        return response

    def _stream_parser(self, request_id: str | None) -> ChatStreamParser:
        return ChatStreamParser(self.provider_name, request_id)

    def _retry_refused(self, error: ProviderError, body: Mapping[str, object]) -> bool:
        if "stream_options" in body and error.status == 400 and "stream_options" in str(error):
            self._stream_usage = False  # this server refuses include_usage: count locally
            return True
        return False
